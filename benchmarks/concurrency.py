"""Experiment 6: simultaneous sessions, and clean refusals beyond the session limit.

1, 2, 4 and 8 sessions open at once against the real server, each speaking the 4-sentence
paragraph as the project's client does (chunker pieces, pipelined). Per level: first audio
p50/p95 across sessions, completion, aggregate audio seconds per wall second, errors. Each
level runs again on a baseline server beside it (benchmarks/common.py `Baseline`) whose engine
decodes whole sentences (decoder windows off), next to it in time: the server's throughput cost
of streaming inside a sentence, as a ratio;
again on one whose engine is never told that the server is behind a listener (`behind` ignored),
which shows what that signal buys once the sessions outrun the server; and again on one with
its windows on the plan's schedule alone (`not paced`: engine/streaming/pacing.py), what pacing costs or buys
when sessions share the cores.

Callers arriving one after another (`--arrivals N --arrival-gap-s S`): N sessions, one every S
seconds, each speaking the paragraph, with the server's synthesis steps run earliest deadline
first (when each listener runs out of audio: kokoro_server/scheduler.py) and, next to it, on a
server that runs them in the order they were asked for (a FIFO pool): first audio and stalls per
caller.

Then a second server on the same engine with a small session limit (`--limit`, the
VOICESTREAM_MAX_SESSIONS setting): the limit's worth of sessions are held open, two more try
to connect and must be refused with a clean `server_busy` (the client raises it from `connect()`
as SessionConnectError with that server code), and a held session must still speak afterwards.

    .venv/bin/python benchmarks/concurrency.py [--levels 1 2 4 8] [--repeats 1] [--limit 4]
        [--arrivals 5] [--arrival-gap-s 1.0] [--arrival-repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from common import (
    BEHIND_IGNORED,
    PACING_OFF,
    STEPS_IN_ARRIVAL_ORDER,
    WHOLE_SENTENCE_DECODING,
    Baseline,
    LocalServer,
    base_parser,
    baseline_servers,
    header,
    kokoro_server,
    own_cpu_s,
    run_session,
    summary,
    write_json,
)
from voicestream.chunker import split_sentences
from voicestream.speech import BidiSession, SessionClosed, SessionConnectError, SessionError
from voicestream.texts import paragraph
from voicestream.wire.bidi import Limits
from voicestream.wire.errors import ErrorMessage

EXTRA_SESSIONS = 2


async def level(server: LocalServer, sessions: int) -> dict[str, Any]:
    pieces = split_sentences(paragraph(), first_clause_min_words=4)
    started, cpu_started = time.perf_counter(), own_cpu_s()
    results = await asyncio.gather(
        *(run_session(server.ws_url, pieces, origin=started) for _ in range(sessions)), return_exceptions=True
    )
    wall_s = time.perf_counter() - started
    # With the server in this process, its CPU (and the clients', the same in every mode): what
    # the decoding cost, whatever else the machine ran meanwhile.
    cpu_s = own_cpu_s() - cpu_started if server.in_process else None
    records = [r for r in results if not isinstance(r, BaseException)]
    failures = [repr(r) for r in results if isinstance(r, BaseException)]
    errors = [code for r in records for code in r.errors] + failures
    audio_s = sum(r.audio_s for r in records)
    return {
        "sessions": sessions,
        "wall_s": round(wall_s, 2),
        "audio_s": round(audio_s, 2),
        "audio_s_per_wall_s": round(audio_s / wall_s, 2),
        "cpu_s": None if cpu_s is None else round(cpu_s, 2),
        "first_audio_ms": summary(r.first_audio_s * 1000 for r in records if r.first_audio_s is not None),
        "completion_ms": summary(r.completion_s * 1000 for r in records),
        "connect_ms": summary((r.connect_s * 1000 for r in records), 2),
        "jitter_ms": summary(r.metrics()["jitter_ms"] for r in records),
        "stall_ms": summary(r.metrics()["stall_ms"] for r in records),
        "errors": errors,
        "runs": [r.metrics() for r in records],
    }


async def refused(url: str) -> dict[str, Any]:
    """Try one session more than the limit allows: what does the client see, and how fast?"""
    started = time.perf_counter()
    seen: dict[str, Any] = {"error_code": None, "session_closed": False}
    try:
        async with (
            BidiSession.websocket(url, silence_timeout=10) as session,
            contextlib.aclosing(session.events()) as events,
        ):
            async for event in events:
                if isinstance(event, ErrorMessage):
                    seen["error_code"] = event.code
                elif isinstance(event, SessionClosed):
                    seen["session_closed"] = True
                    seen["reason"] = event.reason
    except SessionConnectError as exc:  # refused after the handshake: the server's reason
        seen["error_code"] = exc.server_code
        seen["client_error"] = f"{type(exc).__name__}: {exc}"
    except SessionError as exc:
        seen["client_error"] = f"{type(exc).__name__}: {exc}"
    seen["answered_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return seen


async def over_the_limit(server: LocalServer, limit: int) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        held = [await stack.enter_async_context(BidiSession.websocket(server.ws_url)) for _ in range(limit)]
        attempts = [await refused(server.ws_url) for _ in range(EXTRA_SESSIONS)]
        # The held sessions are unharmed: one of them still speaks.
        result = await held[0].synthesize("Still here.")
    return {
        "limit": limit,
        "held": limit,
        "extra_attempts": attempts,
        "busy_errors": sum(1 for a in attempts if a["error_code"] == "server_busy"),
        "held_session_still_speaks": len(result.audio) > 0,
    }


# Each mode's server: the measured one (None), or a baseline built beside it.
MODES: dict[str, Baseline | None] = {
    "chunked": None,
    "whole": WHOLE_SENTENCE_DECODING,
    "chunked, behind ignored": BEHIND_IGNORED,
    "chunked, not paced": PACING_OFF,
}
ARRIVAL_MODES: dict[str, Baseline | None] = {"earliest deadline first": None, "arrival order": STEPS_IN_ARRIVAL_ORDER}


async def measure(servers: dict[str, LocalServer], levels: list[int], repeats: int) -> list[dict[str, Any]]:
    """Each level on the measured server (`decoding: chunked`) and right before or after it (the
    order alternating per repeat) on each other mode's server (whole-sentence decoding, `behind`
    ignored, not paced)."""
    for server in servers.values():
        await run_session(server.ws_url, ["Warm up."])
    rows = []
    for repeat in range(repeats):
        for sessions in levels:
            modes = list(servers)
            for mode in modes if repeat % 2 == 0 else reversed(modes):
                row = await level(servers[mode], sessions)
                row["repeat"], row["decoding"] = repeat, mode
                rows.append(row)
                print(
                    f"  {sessions} sessions, {mode}: first audio p50 {row['first_audio_ms'].get('median')} ms,"
                    f" p95 {row['first_audio_ms'].get('p95')} ms, {row['audio_s_per_wall_s']} audio s per s,"
                    f" errors {row['errors']}"
                )
    return rows


async def arrivals(servers: dict[str, LocalServer], callers: int, gap_s: float, repeats: int) -> dict[str, Any]:
    """`callers` sessions, one every `gap_s` seconds, on the server with deadline scheduling and
    on one without, alternating which goes first per repeat: each caller's first audio (from its
    first send) and its stalls."""
    pieces = split_sentences(paragraph(), first_clause_min_words=4)

    async def caller(server: LocalServer, index: int) -> dict[str, Any]:
        await asyncio.sleep(index * gap_s)
        return (await run_session(server.ws_url, pieces)).metrics()

    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in servers}
    for repeat in range(repeats):
        for mode in runs if repeat % 2 == 0 else reversed(list(runs)):
            records = await asyncio.gather(*(caller(servers[mode], index) for index in range(callers)))
            runs[mode].extend(records)
            print(
                f"  {callers} callers {gap_s} s apart, {mode}: first audio "
                f"{[r['first_audio_ms'] for r in records]} ms, stall {[round(r['stall_ms']) for r in records]} ms"
            )
    return {
        "callers": callers,
        "gap_s": gap_s,
        "repeats": repeats,
        "modes": {
            mode: {
                "first_audio_ms": summary(r["first_audio_ms"] for r in records if r["first_audio_ms"] is not None),
                "stall_ms": summary(r["stall_ms"] for r in records),
                "stall_total_s": round(sum(r["stall_ms"] for r in records) / 1000, 2),
                "runs": records,
            }
            for mode, records in runs.items()
        },
    }


def over_whole(rows: list[dict[str, Any]], mode: str = "chunked", cost: str = "wall_s") -> dict[str, float]:
    """Per level, over all repeats: `mode`'s `cost` (wall or CPU seconds) per audio second over
    whole-sentence decoding's. With wall seconds, the server's RTF chunked / whole; with CPU
    seconds, the same cost without the time other processes took from it."""
    ratios = {}
    for sessions in sorted({row["sessions"] for row in rows}):
        per_audio_s = {
            name: sum(r[cost] for r in rows if r["sessions"] == sessions and r["decoding"] == name)
            / sum(r["audio_s"] for r in rows if r["sessions"] == sessions and r["decoding"] == name)
            for name in (mode, "whole")
        }
        ratios[str(sessions)] = round(per_audio_s[mode] / per_audio_s["whole"], 3)
    return ratios


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "concurrency.json", repeats=1)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--limit", type=int, default=4, help="max_sessions of the refusal check's server")
    parser.add_argument("--arrivals", type=int, default=5, help="callers arriving one after another (0: skip)")
    parser.add_argument("--arrival-gap-s", type=float, default=1.0, help="seconds between two callers' arrivals")
    parser.add_argument("--arrival-repeats", type=int, default=3)
    args: argparse.Namespace = parser.parse_args()
    compare_whole = not args.url  # the baselines are built from the in-process server's parts
    with kokoro_server(args.url, args.threads) as server:
        modes: dict[str, Baseline | None] = MODES if compare_whole else {"chunked": None}
        with baseline_servers(server, modes, args.threads) as servers:
            rows = asyncio.run(measure(servers, args.levels, args.repeats))
        arrival_check: dict[str, Any] | None = None
        if args.arrivals and server.runtime is not None:  # likewise
            with baseline_servers(server, ARRIVAL_MODES, args.threads) as servers:
                arrival_check = asyncio.run(arrivals(servers, args.arrivals, args.arrival_gap_s, args.arrival_repeats))
        limit_check: dict[str, Any] | None = None
        if server.engine is not None:  # the refusal check needs a server whose limit we set
            with kokoro_server(
                engine=server.engine, threads=args.threads, limits=Limits(max_sessions=args.limit)
            ) as limited:
                limit_check = asyncio.run(over_the_limit(limited, args.limit))
        report = header(
            "concurrency",
            args,
            server,
            text=paragraph(),
            levels=[row for row in rows if row["decoding"] == "chunked"],
            whole_sentence_levels=[row for row in rows if row["decoding"] == "whole"],
            behind_ignored_levels=[row for row in rows if row["decoding"] == "chunked, behind ignored"],
            not_paced_levels=[row for row in rows if row["decoding"] == "chunked, not paced"],
            rtf_chunked_over_whole=over_whole(rows) if compare_whole else None,
            rtf_behind_ignored_over_whole=over_whole(rows, "chunked, behind ignored") if compare_whole else None,
            cpu_chunked_over_whole=over_whole(rows, cost="cpu_s") if compare_whole else None,
            cpu_behind_ignored_over_whole=(
                over_whole(rows, "chunked, behind ignored", cost="cpu_s") if compare_whole else None
            ),
            rtf_not_paced_over_whole=over_whole(rows, "chunked, not paced") if compare_whole else None,
            cpu_not_paced_over_whole=over_whole(rows, "chunked, not paced", cost="cpu_s") if compare_whole else None,
            over_the_limit=limit_check,
            arrivals=arrival_check,
        )
    write_json(args.out, report)
    print("RTF chunked / whole per level:", report["rtf_chunked_over_whole"])
    print("the same with `behind` ignored:", report["rtf_behind_ignored_over_whole"])
    print("CPU s per audio s, chunked / whole per level:", report["cpu_chunked_over_whole"])
    print("the same with `behind` ignored:", report["cpu_behind_ignored_over_whole"])
    print("RTF not paced / whole per level:", report["rtf_not_paced_over_whole"])
    print("CPU s per audio s, not paced / whole:", report["cpu_not_paced_over_whole"])
    print("over the limit:", limit_check)


if __name__ == "__main__":
    main()
