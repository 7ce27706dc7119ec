"""Experiment 2 (and the data of 3): a voice agent's reply, bidi vs batch, through the speak function.

The real speak app (voicestream.speak, uvicorn on 127.0.0.1) speaks the 6-sentence agent reply
from the replay text source (first token after 300 ms, then N tokens/s) through the real
Kokoro server; this script is its HTTP client (binary transport, PCM) and timestamps every
audio frame as it arrives. Modes:

- bidi: run_bidi: the chunker cuts sentences as tokens arrive, each goes into the open session;
- batch: run_batch: the fair baseline: the whole reply as one request once the text has ended
  (our server still splits that request into sentences);
- batch_unsplit (goal pace only): batch against the anchor-style server that synthesizes a
  request as one text, as the anchor's batch path did;
- stop_and_wait (goal pace only): not the speak app: this script's own client on the same
  replay source and chunker, sending each sentence only after the previous synthesis_complete
  (the anchor's client), for the gapless comparison (experiment 3, gapless.py).

Cells rotate within each repeat. Every run records time to first audio at the client, the speak
function's own timings, completion, real-time factor, jitter, stall, and (at the goal pace)
every frame's arrival for the playback simulation.

    .venv/bin/python benchmarks/agent.py [--repeats 2] [--paces 20 50 100] [--url http://host:port]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from common import (
    ANCHOR_STYLE_REQUESTS,
    PCM_BYTES_PER_S,
    Arrival,
    LocalServer,
    base_parser,
    baseline_server,
    header,
    kokoro_server,
    playback,
    ratio,
    run_session,
    serve_url,
    summary,
    write_json,
)
from voicestream.chunker import SentenceChunker
from voicestream.speak.app import create_app
from voicestream.speak.config import SpeakConfig
from voicestream.speak.sources import ReplayPace, ReplaySource
from voicestream.texts import agent_reply
from voicestream.wire.speak import Done, ReplyError, SentenceAudio, SpeakStreamDecoder

FIRST_TOKEN_MS = 300
GOAL_PACE = 50.0
METRICS = {
    "first_audio_ms": 1,
    "response_start_ms": 2,
    "completion_ms": 1,
    "real_time_factor": 3,
    "jitter_ms": 1,
    "max_gap_ms": 1,
    "stall_ms": 1,
}


def session_metrics(arrivals: list[Arrival], completion_s: float) -> dict[str, Any]:
    audio_s = sum(a.audio_s for a in arrivals)
    gaps = [(b.at_s - a.at_s) * 1000 for a, b in itertools.pairwise(arrivals)]
    return {
        "first_audio_ms": round(arrivals[0].at_s * 1000, 1) if arrivals else None,
        "completion_ms": round(completion_s * 1000, 1),
        "audio_s": round(audio_s, 3),
        "real_time_factor": round(completion_s / audio_s, 3) if audio_s else None,
        "jitter_ms": round(statistics.pstdev(gaps), 1) if gaps else 0.0,
        "max_gap_ms": round(max(gaps), 1) if gaps else 0.0,
        "stall_ms": round(playback(arrivals).stall_s * 1000, 1),
    }


async def speak_run(speak_url: str, mode: str, tokens_per_s: float) -> tuple[dict[str, Any], list[Arrival]]:
    """One POST /speak; every audio frame timestamped at arrival (seconds since the POST)."""
    body = {
        "text": agent_reply(),
        "mode": "batch" if mode.startswith("batch") else mode,
        "transport": "binary",
        "format": "pcm",
        "pace": {"first_token_ms": FIRST_TOKEN_MS, "tokens_per_s": tokens_per_s},
    }
    arrivals: list[Arrival] = []
    errors: list[str] = []
    done: Done | None = None
    decoder = SpeakStreamDecoder("binary")
    # A fresh client per run: connection setup is part of what the caller pays.
    async with httpx.AsyncClient(timeout=120) as client:
        started = time.perf_counter()
        async with client.stream("POST", f"{speak_url}/speak", json=body) as response:
            response_start_s = time.perf_counter() - started
            response.raise_for_status()
            async for chunk in response.aiter_raw():
                at = time.perf_counter() - started
                for event in decoder.feed(chunk):
                    if isinstance(event, SentenceAudio):
                        arrivals.append(Arrival(at, len(event.data) / PCM_BYTES_PER_S))
                    elif isinstance(event, ReplyError):
                        errors.append(event.code)
                    elif isinstance(event, Done):
                        done = event
        completion_s = time.perf_counter() - started
    decoder.close()
    row = session_metrics(arrivals, completion_s)
    row["response_start_ms"] = round(response_start_s * 1000, 2)
    row["errors"] = errors
    if done is not None:
        row["status"] = done.status
        row["sentences"] = done.sentences
        row["speak_timings_ms"] = {
            "first_text": done.timings.first_text_ms,
            "first_sentence": done.timings.first_sentence_ms,
            "first_audio": done.timings.first_audio_ms,
            "total": done.timings.total_ms,
        }
    return row, arrivals


async def replayed_pieces(tokens_per_s: float) -> AsyncIterator[str]:
    source = ReplaySource(agent_reply(), ReplayPace(first_token_s=FIRST_TOKEN_MS / 1000, tokens_per_s=tokens_per_s))
    chunker = SentenceChunker()
    async for delta in source.stream():
        for piece in chunker.feed(delta):
            yield piece
    rest = chunker.flush()
    if rest is not None:
        yield rest


async def stop_and_wait_run(server: LocalServer, tokens_per_s: float) -> tuple[dict[str, Any], list[Arrival]]:
    origin = time.perf_counter()
    record = await run_session(server.ws_url, replayed_pieces(tokens_per_s), stop_and_wait=True, origin=origin)
    row = session_metrics(record.arrivals, record.completion_s)
    row["response_start_ms"] = round(record.connect_s * 1000, 2)
    row["errors"] = record.errors
    row["sentences"] = len(record.requests)
    return row, record.arrivals


def cells(paces: list[float], with_unsplit: bool) -> list[tuple[str, float]]:
    grid = [(mode, pace) for pace in paces for mode in ("bidi", "batch")]
    grid.append(("stop_and_wait", GOAL_PACE))
    if with_unsplit:
        grid.append(("batch_unsplit", GOAL_PACE))
    return grid


async def measure(
    server: LocalServer, speak_url: str, repeats: int, paces: list[float], unsplit_url: str | None = None
) -> dict[str, Any]:
    """The grid's cells, `batch_unsplit` (when `unsplit_url`, a speak app in front of the
    anchor-style server, is given) through that app."""
    grid = cells(paces, unsplit_url is not None)
    # Warm-up: the first request through each path pays imports and connection caches.
    await run_session(server.ws_url, ["Warm up."])
    async with httpx.AsyncClient(timeout=60) as client:
        for url in filter(None, (speak_url, unsplit_url)):
            (await client.post(f"{url}/speak", json={"text": "Warm up.", "transport": "binary"})).raise_for_status()
    runs: list[dict[str, Any]] = []
    for repeat in range(repeats):
        shift = repeat % len(grid)
        for mode, pace in grid[shift:] + grid[:shift]:
            if mode == "stop_and_wait":
                row, arrivals = await stop_and_wait_run(server, pace)
            elif mode == "batch_unsplit" and unsplit_url is not None:
                row, arrivals = await speak_run(unsplit_url, mode, pace)
            else:
                row, arrivals = await speak_run(speak_url, mode, pace)
            row.update(mode=mode, tokens_per_s=pace, repeat=repeat)
            if pace == GOAL_PACE:  # the playback simulation (gapless.py) needs every frame
                row["arrivals"] = [[round(a.at_s, 4), round(a.audio_s, 4)] for a in arrivals]
            runs.append(row)
            print(
                f"  repeat {repeat} {mode:<14} {pace:>5.0f} tok/s: first audio {row['first_audio_ms']} ms",
                row["errors"],
            )
    return {"runs": runs}


def analyse(runs: list[dict[str, Any]]) -> dict[str, Any]:
    table: list[dict[str, Any]] = []
    for mode, pace in dict.fromkeys((r["mode"], r["tokens_per_s"]) for r in runs):
        rows = [r for r in runs if r["mode"] == mode and r["tokens_per_s"] == pace]
        table.append(
            {
                "mode": mode,
                "tokens_per_s": pace,
                **{
                    metric: summary((r[metric] for r in rows if r.get(metric) is not None), digits)
                    for metric, digits in METRICS.items()
                },
                "errors": sum(len(r["errors"]) for r in rows),
            }
        )

    def first_audio(mode: str, pace: float) -> dict[int, float]:
        return {r["repeat"]: r["first_audio_ms"] for r in runs if r["mode"] == mode and r["tokens_per_s"] == pace}

    ratios = []
    for pace in sorted({r["tokens_per_s"] for r in runs}):
        bidi = first_audio("bidi", pace)
        for baseline in ("batch", "batch_unsplit"):
            base = first_audio(baseline, pace)
            paired = [base[k] / bidi[k] for k in base if bidi.get(k)]
            if not paired:
                continue
            ratios.append(
                {
                    "tokens_per_s": pace,
                    "baseline": baseline,
                    "of_medians": ratio(statistics.median(base.values()), statistics.median(bidi.values())),
                    "median_of_paired": round(statistics.median(paired), 2),
                }
            )
    return {"table": table, "ratios": ratios}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "agent.json", repeats=2)
    parser.add_argument("--paces", type=float, nargs="+", default=[20.0, 50.0, 100.0], help="tokens per second")
    args: argparse.Namespace = parser.parse_args()
    if GOAL_PACE not in args.paces:
        parser.error(f"--paces must include the goal pace {GOAL_PACE:g}")
    with kokoro_server(args.url, args.threads) as server:
        # The anchor-style batch waits for one synthesis of the whole reply: no silence timeout.
        with contextlib.ExitStack() as stack:
            quiet = stack.enter_context(open(os.devnull, "w"))  # closed by the stack

            def speak_app(kokoro: LocalServer) -> str:
                config = SpeakConfig(kokoro_ws_url=kokoro.ws_url, silence_timeout_s=300)
                return stack.enter_context(serve_url(create_app(config, log_stream=quiet, metrics=False), "speak"))

            speak = speak_app(server)
            unsplit = None
            if server.in_process:  # the anchor's server (a request as one text) beside ours: batch_unsplit
                anchor = stack.enter_context(baseline_server(server, ANCHOR_STYLE_REQUESTS, args.threads))
                unsplit = speak_app(anchor)
            measured = asyncio.run(measure(server, speak, args.repeats, args.paces, unsplit))
        report = header(
            "agent",
            args,
            server,
            text=agent_reply(),
            first_token_ms=FIRST_TOKEN_MS,
            goal_tokens_per_s=GOAL_PACE,
            speak_function="in-process voicestream.speak app under uvicorn (POST /speak, binary transport, pcm)",
            **analyse(measured["runs"]),
            **measured,
        )
    write_json(args.out, report)
    for row in report["table"]:
        print(
            f"{row['mode']:<14} {row['tokens_per_s']:>5.0f} tok/s"
            f" first audio median {row['first_audio_ms'].get('median')} ms"
            f"  stall median {row['stall_ms'].get('median')} ms"
        )
    for row in report["ratios"]:
        print(row)


if __name__ == "__main__":
    main()
