"""Issue 17 soak: many sessions of every kind against the real in-process server; is memory flat?

`--sessions` sessions (default 200, a few minutes; the issue's design size is 1,000), `--concurrency` at a
time, each one of:

- normal (50%): a short sentence, its audio to the end, a polite close;
- disconnect (20%): a sentence, then the connection dropped (TCP abort, no close) at its
  first audio frame;
- blend (15%): a short sentence in a voice blend no session used before;
- hostile (10%): in turn "9" * 2000 (refused: text_too_complex), one letter with 1,999 accents
  (normalized, spoken) and "a-" * 150 (refused when its G2P runs past the limit);
- long (5%): one 450-character sentence (one piece of ~500 phonemes: the arena's largest).

Sessions run in ten rounds. Every `--sample-every` sessions, and after each round once the
server is idle again (no session open, no synthesis step running): the process's RSS (server
and clients share it: the server runs in-process), its G2P processes' proportional set size
(they share pages copy-on-write), and the asyncio tasks alive on the server's event loop.
Samples taken under load catch syntheses at their peak; the idle ones are comparable (taken a
second after the last step, so after the heap trim the server does at 0.5 s idle). The
warm-up (the first round) also speaks one short sentence in each of `--prefill-blends` distinct
blends first, so that the bounded blend cache (32 tables) is full before memory is judged.
"Memory flat": idle RSS at the end (median of the last three idle samples) is at most 5% above
idle RSS after the warm-up. Also: outcomes per kind, anything unexpected, the wall time.

    .venv/bin/python benchmarks/soak.py [--sessions 200] [--concurrency 4] [--out benchmarks/results/soak.json]
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from common import LocalServer, base_parser, header, kokoro_server, run_async, write_json
from voicestream.speech import BidiSession, ErrorMessage, RequestCompleted
from voicestream.wire.framing import parse_control_frame

# The mix, 20 slots (normal 10, disconnect 4, blend 3, hostile 2, long 1), interleaved so that the
# warm-up round (a tenth of the sessions) meets every kind.
KINDS = ["long", "normal", "disconnect", "blend", "hostile", "normal", "normal", "disconnect", "blend", "normal"]
KINDS += ["normal", "disconnect", "hostile", "normal", "blend", "normal", "disconnect", "normal", "normal", "normal"]
SHORT = ["Hello there.", "Your table is ready.", "See you tomorrow at nine.", "Thanks for calling."]
MEDIUM = "The museum opens at ten in the morning and closes at six in the evening, so you have plenty of time."
HOSTILE = ["9" * 2000, "a" + "\u0301" * 1999, "a-" * 150]
LONG = (
    "The quick brown fox jumps over the lazy dog and keeps on running through the forest, past the old "
    "mill and the river, over the hills and far away, until the evening comes and the light grows dim, "
    "and still it runs on and on without ever looking back at the farm it left behind that morning, "
    "because the fox knows that the farmer and his dogs are never far behind it on a day like this one"
)
ROUNDS = 10  # the first is the warm-up
FLAT_GROWTH_PCT = 5.0
SESSION_GUARD_S = 300.0  # one session that hangs must not hang the soak (counted as unexpected)


def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pss_mib(pid: int) -> float:
    """Proportional set size: pages shared copy-on-write (the G2P workers' lexicons) counted once."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:  # the process ended meanwhile (a replaced G2P worker)
        pass
    return 0.0


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (the G2P fork server and its workers)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children[parent].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tasks_on(server: LocalServer) -> int:
    assert server.running is not None
    return server.running.call(lambda: len(asyncio.all_tasks()) - 1)  # less the one that counts


async def normal(server: LocalServer, text: str, voice: str | None = None) -> str:
    async with BidiSession.websocket(server.ws_url, silence_timeout=120) as session:
        request_id = await session.send(text, voice=voice)
        async for event in session.events():
            if isinstance(event, RequestCompleted) and event.request_id == request_id:
                return "complete"
            if isinstance(event, ErrorMessage) and event.request_id == request_id:
                return f"error:{event.code}"
    return "ended early"


async def disconnect(server: LocalServer) -> str:
    async with connect(server.ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "synthesize", "text": MEDIUM}).encode())
        while True:
            frame = await ws.recv()
            if parse_control_frame(frame) is None:  # the first audio frame: drop the connection now
                ws.transport.abort()
                return "dropped"


async def one(
    server: LocalServer, index: int, blends: itertools.count[int], hostiles: itertools.count[int]
) -> tuple[str, str]:
    kind = KINDS[index % len(KINDS)]
    if kind == "normal":
        return kind, await normal(server, SHORT[index % len(SHORT)])
    if kind == "disconnect":
        return kind, await disconnect(server)
    if kind == "blend":
        step = next(blends)
        return kind, await normal(server, SHORT[index % len(SHORT)], f"af_heart:{step},af_bella:{10_000 - step}")
    if kind == "hostile":
        return kind, await normal(server, HOSTILE[next(hostiles) % len(HOSTILE)])
    return kind, await normal(server, LONG)


EXPECTED = {
    "normal": {"complete"},
    "disconnect": {"dropped"},
    "blend": {"complete"},
    "hostile": {"complete", "error:text_too_complex"},
    "long": {"complete"},
}


async def idle(server: LocalServer) -> None:
    """Until the server's side of every session has ended and no synthesis step runs."""
    assert server.runtime is not None
    stats = server.runtime.stats
    while stats.sessions_active or stats.steps_running:  # noqa: ASYNC110  # counted in worker threads
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)


async def soak(
    server: LocalServer, sessions: int, concurrency: int, sample_every: int, prefill_blends: int
) -> dict[str, Any]:
    samples: list[dict[str, Any]] = []
    outcomes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    unexpected: list[str] = []
    blends, hostiles = itertools.count(1), itertools.count()
    next_index = itertools.count()
    done = 0
    started = time.perf_counter()

    def sample(when: str) -> None:
        workers = descendants(os.getpid())
        samples.append(
            {
                "sessions_done": done,
                "when": when,
                "t_s": round(time.perf_counter() - started, 1),
                "rss_mib": round(rss_mib(), 1),
                "g2p_processes_pss_mib": round(sum(pss_mib(pid) for pid in workers), 1),
                "server_tasks": tasks_on(server),
            }
        )

    async def worker(end: int) -> None:
        nonlocal done
        while (index := next(next_index)) < end:
            kind = KINDS[index % len(KINDS)]
            try:
                async with asyncio.timeout(SESSION_GUARD_S):
                    kind, outcome = await one(server, index, blends, hostiles)
            except Exception as error:
                outcome = f"raised {type(error).__name__}: {error}"[:200]
            outcomes[kind][outcome] += 1
            if outcome not in EXPECTED[kind]:
                unexpected.append(f"{index} {kind}: {outcome}")
            done += 1
            if done % sample_every == 0:
                await asyncio.to_thread(sample, "busy")

    await asyncio.to_thread(sample, "idle")
    for _ in range(prefill_blends):  # part of the warm-up: the blend cache fills up
        step = next(blends)
        await normal(server, SHORT[0], f"af_heart:{step},af_bella:{10_000 - step}")
    for round_number in range(1, ROUNDS + 1):
        end = sessions * round_number // ROUNDS
        next_index = itertools.count(done)
        await asyncio.gather(*(worker(end) for _ in range(concurrency)))
        await idle(server)
        await asyncio.to_thread(sample, "idle")
    wall_s = time.perf_counter() - started
    return {"wall_s": round(wall_s, 1), "samples": samples, "outcomes": outcomes, "unexpected": unexpected}


def flatness(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Idle RSS after the warm-up round vs after the last round."""
    idle = [s for s in samples if s["when"] == "idle"]  # [before anything, after round 1, ..., after the last]
    after_warm_up = idle[1]["rss_mib"]
    at_end = statistics.median(s["rss_mib"] for s in idle[-3:])
    growth = (at_end - after_warm_up) / after_warm_up * 100
    worst = (max(s["rss_mib"] for s in idle[1:]) - after_warm_up) / after_warm_up * 100
    return {
        "rss_start_mib": idle[0]["rss_mib"],
        "rss_after_warm_up_mib": after_warm_up,
        "rss_end_mib": at_end,
        "rss_idle_max_mib": max(s["rss_mib"] for s in idle[1:]),
        "rss_busy_max_mib": max(s["rss_mib"] for s in samples),
        "growth_after_warm_up_pct": round(growth, 2),
        "worst_idle_growth_pct": round(worst, 2),
        "flat": growth <= FLAT_GROWTH_PCT,
        "goal_pct": FLAT_GROWTH_PCT,
        "tasks_start": samples[0]["server_tasks"],
        "tasks_end": samples[-1]["server_tasks"],
        "tasks_max": max(s["server_tasks"] for s in samples),
        "g2p_processes_pss_start_mib": samples[0]["g2p_processes_pss_mib"],
        "g2p_processes_pss_end_mib": samples[-1]["g2p_processes_pss_mib"],
    }


def plot(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = report["samples"]
    done = [s["sessions_done"] for s in samples]
    idle = [s for s in samples if s["when"] == "idle"]
    fig, (memory, tasks) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    memory.plot(done, [s["rss_mib"] for s in samples], color="#aed6f1", lw=1, label="server process, under load")
    memory.plot([s["sessions_done"] for s in idle], [s["rss_mib"] for s in idle], "o-", color="#2980b9",
                label="server process, idle after each round")  # fmt: skip
    memory.plot(done, [s["g2p_processes_pss_mib"] for s in samples], color="#27ae60", label="G2P processes (PSS)")
    flat = report["flatness"]
    memory.axhline(flat["rss_after_warm_up_mib"] * (1 + FLAT_GROWTH_PCT / 100), color="#c0392b", ls="--", lw=1,
                   label=f"+{FLAT_GROWTH_PCT:g}% over the RSS after warm-up")  # fmt: skip
    memory.axvline(report["sessions"] / ROUNDS, color="grey", ls=":", lw=1)
    memory.set_ylabel("RSS (MiB)")
    memory.legend(fontsize=8)
    memory.set_title(f"Soak: {report['sessions']} sessions, {flat['growth_after_warm_up_pct']:+.1f}% after warm-up")
    tasks.plot(done, [s["server_tasks"] for s in samples], color="#8e44ad")
    tasks.set_ylabel("asyncio tasks (server loop)")
    tasks.set_xlabel("sessions finished")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "soak.json", repeats=1)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--sample-every", type=int, default=10)
    parser.add_argument("--prefill-blends", type=int, default=32, help="distinct blends spoken in the warm-up")
    args = parser.parse_args()
    with kokoro_server(None, args.threads) as server:  # in-process: its memory is this process's
        report = header(
            "soak",
            args,
            server,
            sessions=args.sessions,
            concurrency=args.concurrency,
            prefill_blends=args.prefill_blends,
        )
        report.update(
            run_async(lambda: soak(server, args.sessions, args.concurrency, args.sample_every, args.prefill_blends))
        )
    report["flatness"] = flatness(report["samples"])
    write_json(args.out, report)
    plot(report, args.out.with_name("soak_memory.png"))
    print(json.dumps(report["flatness"], indent=1))


if __name__ == "__main__":
    main()
