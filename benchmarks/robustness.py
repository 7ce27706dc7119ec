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
  is built when its request starts; inference is lazy and never run here).

    .venv/bin/python benchmarks/robustness.py [--repeats 3] [--cap-s 60] [--out benchmarks/results/robustness.json]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from common import LocalServer, base_parser, header, kokoro_server, ratio, run_async, summary, write_json
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


async def measure(server: LocalServer, repeats: int, cap_s: float) -> dict[str, Any]:
    work = {name: await long_number(server, text, cap_s) for name, text in LONG_NUMBERS.items()}
    await wait_idle(server, 8.0)
    isolated = {name: await isolation(server, text, repeats) for name, text in HOSTILE_G2P.items()}
    await wait_idle(server, 2.0)
    return {"work": work, "isolation": isolated, "blends": await asyncio.to_thread(blends, server, 500)}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "robustness.json", repeats=3)
    parser.add_argument("--cap-s", type=float, default=60.0, help="give up on one long request after this")
    parser.add_argument("--label", default="after", help="what code this measures (after, before)")
    args = parser.parse_args()
    with kokoro_server(args.url, args.threads) as server:
        report = header("robustness", args, server, label=args.label, cap_s=args.cap_s)
        report.update(run_async(lambda: measure(server, args.repeats, args.cap_s)))
    write_json(args.out, report)


if __name__ == "__main__":
    main()
