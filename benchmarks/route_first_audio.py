"""First audio and gaps at the bidi route, per text, and what the route adds to the engine's time.

Issue 29 measures a host at the route, not in the engine: a fresh bidirectional session per text
over a real 127.0.0.1 socket, a listener that starts at the first audio frame and plays in real
time. Issue 31 asks the same of the torch engine through `voicestream serve`. This script does
both, for the 5-, 15-, 30- and 50-word sentences of first_audio_length.py (no clause marks), the
issue's digit-heavy sentence and the benchmark paragraph (one message; the server splits it into
sentences), rotating the texts per repeat so that the machine's load falls on all alike:

- first audio (the first send to the first audio frame), p50, and its long/short ratio (50 words
  over 5: whether first audio grows with the sentence);
- the listener's worst single gap and total stall after playback starts (common.playback), max
  over repeats;
- what the route adds: first audio minus the server's own first_audio_ms (its
  synthesis_complete), and, for an in-process server, minus the engine's first chunk (G2P + the
  first window, timed inside the engine: common.TimedEngine), p50.

The server is the in-process ONNX one (`--slow-factor k`: its split runtime slowed k times,
slow_host.py's emulation of a slower host at the route), or any running server given by `--url`,
e.g. the torch engine:

    VOICESTREAM_BACKEND=torch .venv-torch/bin/voicestream serve --kokoro-only &
    .venv/bin/python benchmarks/route_first_audio.py --url http://127.0.0.1:8080 --out .../route_first_audio_torch.json

    .venv/bin/python benchmarks/route_first_audio.py [--repeats 3] [--threads 2] [--slow-factor 3.1] [--url URL]
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from typing import Any

from common import (
    LocalServer,
    TimedEngine,
    base_parser,
    header,
    kokoro_server,
    playback,
    run_async,
    run_session,
    write_json,
)
from first_audio_length import LENGTHS, sentence
from slow_host import DIGITS, loaded
from voicestream.engine.onnx.engine import OnnxStrategy
from voicestream.texts import paragraph

WARM_UP = "Warm up the connection path and the engine's speed estimates."


def texts() -> dict[str, str]:
    return {
        **{f"{words}_words": sentence(words) for words in LENGTHS},
        "digit_heavy": DIGITS,
        "paragraph": paragraph(),
    }


def p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


async def measure(server: LocalServer, repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Each text in a fresh session, `repeats` times, the order rotated per repeat."""
    await run_session(server.ws_url, [WARM_UP])
    every = texts()
    names = list(every)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            record = await run_session(server.ws_url, [every[name]], engine=server.engine)
            played = playback(record.arrivals)
            (request,) = record.requests
            first_ms = None if record.first_audio_s is None else record.first_audio_s * 1000
            stall_ms = played.stall_s * 1000
            runs[name].append(
                {
                    "repeat": repeat,
                    "first_audio_ms": None if first_ms is None else round(first_ms, 1),
                    "worst_gap_ms": round(max((gap for _at, gap in played.stalls), default=0.0) * 1000, 1),
                    "stall_ms": round(stall_ms, 1),
                    "audio_s": round(record.audio_s, 3),
                    "server_first_audio_ms": request.server_first_audio_ms,
                    "engine_first_chunk_ms": request.engine_first_chunk_ms,
                    "errors": record.errors,
                }
            )
            print(f"  repeat {repeat} {name:<12} first audio {first_ms or 0:>7.1f} ms, stall {stall_ms:.0f} ms")
    return runs


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def over(key: str) -> list[float]:
        measured = [row for row in rows if row["first_audio_ms"] is not None and row[key] is not None]
        return [row["first_audio_ms"] - row[key] for row in measured]

    return {
        "first_audio_ms_p50": p50([row["first_audio_ms"] for row in rows if row["first_audio_ms"] is not None]),
        "worst_gap_ms_max": max(row["worst_gap_ms"] for row in rows),
        "stall_ms_max": max(row["stall_ms"] for row in rows),
        "audio_s": rows[0]["audio_s"],
        "route_over_server_ms_p50": p50(over("server_first_audio_ms")),
        "route_over_engine_ms_p50": p50(over("engine_first_chunk_ms")),
        "errors": sorted({code for row in rows for code in row["errors"]}),
    }


@contextlib.contextmanager
def server_under_test(url: str | None, threads: int, slow_factor: float) -> Iterator[LocalServer]:
    if url or slow_factor == 1.0:
        with kokoro_server(url, threads=threads) as server:
            yield server
        return
    engine = TimedEngine(loaded(slow_factor, threads, OnnxStrategy()))
    with kokoro_server(threads=threads, engine=engine) as server:
        server.description += f", split runtime slowed {slow_factor}x (slow_host.py's emulation)"
        yield server


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "route_first_audio.json", repeats=3)
    parser.add_argument(
        "--slow-factor", type=float, default=1.0, help="in-process server: encoder and decoder runs k times slower"
    )
    args = parser.parse_args()
    if args.url and args.slow_factor != 1.0:
        parser.error("--slow-factor slows the in-process server; a server given by --url runs as it is")
    with server_under_test(args.url, args.threads, args.slow_factor) as server:
        runs = run_async(lambda: measure(server, args.repeats))
        report = header("route_first_audio", args, server, slow_factor=args.slow_factor)
    results = {name: summarise(rows) for name, rows in runs.items()}
    first = {name: result["first_audio_ms_p50"] for name, result in results.items()}
    short, long = first[f"{LENGTHS[0]}_words"], first[f"{LENGTHS[-1]}_words"]
    report["results"] = results
    report["first_audio_long_over_short"] = round(long / short, 2) if long and short else None
    report["worst_gap_ms_max"] = max(result["worst_gap_ms_max"] for result in results.values())
    report["runs"] = runs
    write_json(args.out, report)
    for name, result in results.items():
        print(
            f"{name:<12} first audio p50 {result['first_audio_ms_p50']} ms, worst gap {result['worst_gap_ms_max']} ms,"
            f" route over server {result['route_over_server_ms_p50']} ms,"
            f" over engine {result['route_over_engine_ms_p50']} ms"
        )
    print(f"long/short {report['first_audio_long_over_short']}; written {args.out}")


if __name__ == "__main__":
    main()
