"""Issue 17, measured: what a hostile or unlucky caller costs the real server.

Against the in-process server (real model, real sockets), three measurements that use only the
public wire contract and the engine's `synthesize`, so the same script also measures the code
before the fix (run it with an older checkout's src on PYTHONPATH: see the report):

- work: POST /invocations with long digit runs ("9" * 2000, "9" * 300): status, time to the
  answer, audio received, capped at `--cap-s` seconds (the old server produced minutes of audio);
- isolation: session B's time to first audio for "Hello there." alone, and while session A's
  text sits in G2P (the issue's 'a' + 1,999 accents, and 'a-' * 150, which normalization keeps);
  the ratio is B's contended / alone first audio, per repeat;
- blends: RSS growth of the server process after 500 distinct voice blends (the table of each
  is built when its request starts; inference is lazy and never run here);
- hostile (issue 32): one row per abuse case of benchmarks/hostile.py (slow bodies, oversized
  and compressed WebSocket frames, HTTP and bidi clients that stop reading, abandoned clients,
  G2P-heavy text, rotating voice blends, a bad-input flood, browsers leaving the signing
  proxy). Per case: B's first audio alone, then while the case's clients do their harm (the
  ratio is the median contended over the median alone), how the server ended each hostile
  client, the server's log events meanwhile, its open connections after, and RSS growth from
  before the case to idle after it. The in-process server runs with a body deadline and a
  consumer-lag limit of 2 s (recorded in `hostile_limits`) so every case ends within seconds.
  Before the first case, two callers hear the cases' long text in full at once (`warm_up`): the
  memory a server takes on for its first concurrent long syntheses is first use, which every
  server pays once, not growth that a hostile client causes; the rows measure the growth.

    .venv/bin/python benchmarks/robustness.py [--repeats 3] [--cap-s 60] [--only hostile]
        [--out benchmarks/results/robustness.json]
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from botocore.credentials import Credentials
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.asyncio.client import connect

from common import LocalServer, base_parser, header, kokoro_server, ratio, run_async, summary, write_json
from hostile import CASES, LONG_TEXT, SYNTHESIZING, Target
from voicestream import env
from voicestream.devserver import bind_free_port, serve_in_thread
from voicestream.httpserver import CLOSE_TIMEOUT_S
from voicestream.kokoro_server.process_memory import release_freed_memory
from voicestream.local_stack import create_proxy_app
from voicestream.origins import allowed_hosts
from voicestream.speech import BidiSession, RequestCompleted

HOSTILE_G2P = {"accents": "a" + "\u0301" * 1999, "dashes": "a-" * 150}
LONG_NUMBERS = {"nines_2000": "9" * 2000, "nines_300": "9" * 300}
SHORT = "Hello there."


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def wait_idle(server: LocalServer, settle_s: float) -> None:
    """Until no synthesis step runs, then `settle_s` more (a G2P that outlived its session)."""
    assert server.runtime is not None
    while server.runtime.stats.steps_running:  # noqa: ASYNC110  # counted in worker threads: nothing to await
        await asyncio.sleep(0.1)
    await asyncio.sleep(settle_s)


async def long_number(server: LocalServer, text: str, cap_s: float) -> dict[str, Any]:
    started = time.perf_counter()
    result: dict[str, Any] = {"chars": len(text)}
    async with httpx.AsyncClient(timeout=cap_s + 30) as client:
        try:
            async with asyncio.timeout(cap_s):
                async with client.stream("POST", f"{server.http_url}/invocations", json={"text": text}) as response:
                    result["status"] = response.status_code
                    result["answer_ms"] = round((time.perf_counter() - started) * 1000, 1)
                    if response.status_code != 200:
                        body = json.loads(await response.aread())
                        result["code"] = body.get("code")
                        result["message"] = str(body.get("message"))[:200]
                    else:
                        audio = 0
                        async for chunk in response.aiter_raw():
                            audio += len(chunk)
                        result["audio_s"] = round(audio / 48_000, 1)
                        result["completed"] = True
        except TimeoutError:
            result["completed"] = False
            result["note"] = f"still streaming after {cap_s:g} s: the client gave up"
    result["total_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


async def first_audio_of_b(server: LocalServer) -> float:
    async with BidiSession.websocket(server.ws_url, silence_timeout=600) as session:
        request_id = await session.send(SHORT)
        async for event in session.events():
            if isinstance(event, RequestCompleted) and event.request_id == request_id:
                first = event.timings.first_audio_s
                assert first is not None
                return first * 1000
    raise RuntimeError("session B ended without completing")


async def isolation(server: LocalServer, hostile: str, repeats: int) -> dict[str, Any]:
    alone: list[float] = []
    contended: list[float] = []
    a_outcomes: list[str] = []
    for _ in range(repeats):
        await wait_idle(server, 1.0)
        alone.append(await first_audio_of_b(server))
        await wait_idle(server, 1.0)
        async with connect(server.ws_url, max_size=None) as stuck:
            await stuck.send(json.dumps({"type": "synthesize", "text": hostile, "request_id": "a"}).encode())
            await asyncio.sleep(0.3)  # A's G2P has begun
            contended.append(await first_audio_of_b(server))
            a_outcomes.append(await _outcome_so_far(stuck))
        await wait_idle(server, 8.0)  # an abandoned G2P may still run: let it end before the next repeat
    ratios = [c / a for c, a in zip(contended, alone, strict=True)]
    return {
        "chars": len(hostile),
        "b_first_audio_alone_ms": summary(alone),
        "b_first_audio_contended_ms": summary(contended),
        "contended_over_alone": {
            "per_repeat": [round(r, 2) for r in ratios],
            "median": ratio(statistics.median(ratios), 1),
        },
        "a_outcome_when_b_completed": a_outcomes,
        "runs": {"alone_ms": [round(v, 1) for v in alone], "contended_ms": [round(v, 1) for v in contended]},
    }


async def _outcome_so_far(ws: Any) -> str:
    """What A had got when B completed: its end (code) if it had one, else "in progress"."""
    outcome = "in progress"
    while True:
        try:
            payload = await asyncio.wait_for(ws.recv(), 0.05)
        except TimeoutError:
            return outcome
        if isinstance(payload, str) or payload[:1] == b"{":
            try:
                body = json.loads(payload)
            except ValueError:
                continue
            if body.get("type") in ("synthesis_complete", "error"):
                outcome = body.get("code") or body["type"]


def blends(server: LocalServer, count: int) -> dict[str, Any]:
    assert server.engine is not None
    engine = server.engine.inner
    engine.synthesize("Hi.", "af_heart:1,af_bella:1")  # the first blend: shared buffers allocated
    before = rss_mib()
    started = time.perf_counter()
    for step in range(1, count + 1):
        engine.synthesize("Hi.", f"af_heart:{step},af_bella:{count + 1 - step}")
    return {
        "distinct_blends": count,
        "rss_before_mib": round(before, 1),
        "rss_after_mib": round(rss_mib(), 1),
        "rss_growth_mib": round(rss_mib() - before, 1),
        "seconds": round(time.perf_counter() - started, 2),
    }


# --- hostile rows (issue 32) -------------------------------------------------------------------

HOSTILE_LIMITS = {"body_timeout_s": 2.0, "max_consumer_lag_s": 2.0}
# The kernel send buffer of the server's connections: Linux grows it up to MiBs, which a
# client that stops reading would fill for minutes of audio before the server feels it; a
# small one shows the same limits within seconds (the real-socket tests use the same means).
SEND_BUFFER = 16 << 10
CASE_CAP_S = 90.0  # a case that has not ended by then is recorded as such
WARM_S = 0.5  # the hostile clients are at work before B starts measuring


class EventCounter(logging.Handler):
    """Counts the server's log events by name (`bad_input`, `stalled_socket_aborted` ...)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None)
        code = fields.get("code") if isinstance(fields, dict) else None
        self.counts[record.getMessage() + (f":{code}" if code else "")] += 1


@contextlib.contextmanager
def counting_events() -> Iterator[EventCounter]:
    """Ours to count, not to print: the server logs thousands of lines under a flood."""
    counter = EventCounter()
    ours = logging.getLogger("voicestream")
    saved = (ours.level, ours.propagate)
    ours.addHandler(counter)
    ours.setLevel(logging.INFO)
    ours.propagate = False
    try:
        yield counter
    finally:
        ours.removeHandler(counter)
        ours.setLevel(saved[0])
        ours.propagate = saved[1]


def speak_to_invocations(app: ASGIApp) -> ASGIApp:
    """The server's app with POST /speak answered as /invocations: a stand-in function URL for
    the signing proxy (the speak function's body, `{"text": ...}`, is an invocation's too)."""

    async def rewritten(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/speak":
            scope = {**scope, "path": "/invocations", "raw_path": b"/invocations"}
        await app(scope, receive, send)

    return rewritten


@contextlib.contextmanager
def signing_proxy(server: LocalServer) -> Iterator[int]:
    """`voicestream serve --speak-url` in front of the measured server: its port. The stand-in
    serves the same app (and runtime) on a loop of its own, without a second lifespan."""
    assert server.running is not None
    app: ASGIApp = server.running.server.config.app  # type: ignore[assignment]  # our Starlette app
    with serve_in_thread(speak_to_invocations(app), "function-url-stand-in", lifespan="off") as upstream:
        listener = bind_free_port()
        port = listener.getsockname()[1]
        proxy = create_proxy_app(
            upstream.url,
            Credentials("AKIDBENCHMARK", "benchmark"),
            region="us-east-1",
            hosts=allowed_hosts("127.0.0.1", port),
        )
        with serve_in_thread(proxy, "signing-proxy", listener=listener):
            yield port


def connections(server: LocalServer) -> int:
    assert server.running is not None
    running = server.running
    return running.call(lambda: len(running.server.server_state.connections))


async def hostile_row(
    server: LocalServer, target: Target, name: str, repeats: int, events: EventCounter
) -> dict[str, Any]:
    case, what = CASES[name]
    await wait_idle(server, 1.0)
    alone = [await first_audio_of_b(server) for _ in range(repeats)]
    await wait_idle(server, 0.5)
    await asyncio.to_thread(release_freed_memory)  # as the idle server does: what is free goes back
    rss_before = rss_mib()
    events_before = Counter(events.counts)
    ends: Counter[str] = Counter()
    started = time.perf_counter()
    harm = asyncio.ensure_future(case(target, ends))
    await asyncio.sleep(WARM_S)
    contended = [await first_audio_of_b(server) for _ in range(repeats)]
    rss_peak = rss_mib()
    ended = True
    try:
        await asyncio.wait_for(harm, CASE_CAP_S)
    except TimeoutError:
        ended = False
    case_s = time.perf_counter() - started
    await wait_idle(server, 1.0)
    await asyncio.to_thread(release_freed_memory)
    rss_after = rss_mib()
    alone_ms, contended_ms = statistics.median(alone), statistics.median(contended)
    return {
        "what": what,
        "asks_for_synthesis": name in SYNTHESIZING,
        "ended_by_server": ended,
        "case_s": round(case_s, 1),
        "client_ends": dict(sorted(ends.items())),
        "server_events": dict(sorted((events.counts - events_before).items())),
        "connections_after": connections(server),
        "b_first_audio_alone_ms": summary(alone),
        "b_first_audio_contended_ms": summary(contended),
        "others_first_audio_ratio": ratio(contended_ms, alone_ms),
        "rss_before_mib": round(rss_before, 1),
        "rss_peak_mib": round(rss_peak, 1),
        "rss_after_mib": round(rss_after, 1),
        "rss_growth_mib": round(rss_after - rss_before, 1),
    }


async def warm_up(server: LocalServer, callers: int = 2) -> dict[str, Any]:
    """`callers` POST /invocations of the hostile cases' long text at once, each read in full; the
    RSS before and after (idle, freed memory returned)."""
    await wait_idle(server, 0.5)
    await asyncio.to_thread(release_freed_memory)
    before = rss_mib()

    async def one(client: httpx.AsyncClient) -> int:
        received = 0
        async with client.stream("POST", f"{server.http_url}/invocations", json={"text": LONG_TEXT}) as response:
            response.raise_for_status()
            async for part in response.aiter_bytes():
                received += len(part)
        return received

    async with httpx.AsyncClient(timeout=300) as client:
        received = await asyncio.gather(*(one(client) for _ in range(callers)))
    await wait_idle(server, 1.0)
    await asyncio.to_thread(release_freed_memory)
    return {
        "callers": callers,
        "text_chars": len(LONG_TEXT),
        "bytes_received": list(received),
        "rss_before_mib": round(before, 1),
        "rss_after_mib": round(rss_mib(), 1),
    }


async def hostile(server: LocalServer, repeats: int) -> dict[str, Any]:
    assert server.runtime is not None
    limits = server.runtime.limits
    with counting_events() as events, signing_proxy(server) as proxy_port:
        port = int(server.http_url.rsplit(":", 1)[1])
        target = Target(port, limits.body_timeout_s, limits.max_consumer_lag_s, CLOSE_TIMEOUT_S, proxy_port)
        rows = {}
        for name in CASES:
            rows[name] = await hostile_row(server, target, name, repeats, events)
            row = rows[name]
            print(
                f"hostile {name}: x{row['others_first_audio_ratio']}, {row['rss_growth_mib']:+.1f} MiB, "
                f"{row['case_s']} s, {row['client_ends']}",
                file=sys.stderr,
                flush=True,
            )
    return rows


async def measure(server: LocalServer, repeats: int, cap_s: float, only: str | None) -> dict[str, Any]:
    report: dict[str, Any] = {}
    if only in (None, "work"):
        report["work"] = {name: await long_number(server, text, cap_s) for name, text in LONG_NUMBERS.items()}
        await wait_idle(server, 8.0)
    if only in (None, "isolation"):
        report["isolation"] = {name: await isolation(server, text, repeats) for name, text in HOSTILE_G2P.items()}
        await wait_idle(server, 2.0)
    if only in (None, "blends"):
        report["blends"] = await asyncio.to_thread(blends, server, 500)
    if only in (None, "hostile"):
        report["hostile_warm_up"] = await warm_up(server)
        report["hostile"] = await hostile(server, repeats)
    return report


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "robustness.json", repeats=3)
    parser.add_argument("--cap-s", type=float, default=60.0, help="give up on one long request after this")
    parser.add_argument("--label", default="after", help="what code this measures (after, before)")
    parser.add_argument("--only", choices=["work", "isolation", "blends", "hostile"], help="one part alone")
    args = parser.parse_args()
    if args.url and args.only in (None, "hostile"):
        parser.error("the hostile rows need the in-process server (its log, connections and RSS): --only another part")
    limits = dataclasses.replace(
        env.limits(),
        body_timeout_s=HOSTILE_LIMITS["body_timeout_s"],
        max_consumer_lag_s=HOSTILE_LIMITS["max_consumer_lag_s"],
    )
    with kokoro_server(args.url, args.threads, limits=limits, send_buffer=SEND_BUFFER) as server:
        report = header(
            "robustness",
            args,
            server,
            label=args.label,
            cap_s=args.cap_s,
            hostile_limits=HOSTILE_LIMITS,
            server_send_buffer_bytes=SEND_BUFFER,
        )
        measured = run_async(lambda: measure(server, args.repeats, args.cap_s, args.only))
    if args.only and args.out.exists():
        # One part rerun: written into the full result file; the other parts keep their run's
        # header, this run's goes under `reruns` (the report cites it for that part).
        full = json.loads(args.out.read_text())
        full.update(measured)
        full.setdefault("reruns", {})[args.only] = report
        report = full
    else:
        report.update(measured)
    write_json(args.out, report)


if __name__ == "__main__":
    main()
