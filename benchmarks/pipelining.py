"""Pipelined vs stop-and-wait on one bidi session: what does sending ahead buy?

The 4-sentence benchmark paragraph (voicestream.texts) is cut
into sentences by the project's chunker and spoken over a fresh session per run, three ways:

- pipelined: every sentence is sent at once; the server synthesizes sentence N+1 while N's
  audio is still going out;
- stop_and_wait: each sentence is sent only after the previous one's synthesis_complete;
- one_request: the whole paragraph as a single request (the anchor's way), for reference.

On 127.0.0.1 a round trip costs well under a millisecond, so stop-and-wait loses almost
nothing there; between a Lambda function and an endpoint, or a phone and a region, it costs
tens of milliseconds per sentence. `--rtt-ms` therefore also runs every mode through a local
TCP proxy that delays each direction by half the given round-trip time (a simulated network,
declared as such in the JSON).

Modes are interleaved within each repeat (rotating which goes first), so drift on a noisy
machine hits all alike; the JSON keeps every run and the medians. Per run: total time (first
send → last synthesis_complete), time to first audio, and the silence a listener would hear
between sentences if playback started at the first audio byte (`stall_s`).

    .venv/bin/python benchmarks/pipelining.py [--url ws://host:port] [--repeats 3]
        [--rtt-ms 0 50] [--out benchmarks/results/pipelining.json]

Without --url it starts `python -m voicestream.kokoro_server` on a free local port (ONNX, CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from common import machine
from voicestream.chunker import split_sentences
from voicestream.speech import BidiSession, RequestCompleted, RequestTimings
from voicestream.texts import paragraph
from voicestream.wire.errors import ErrorMessage

BYTES_PER_SECOND = 24_000 * 2  # 16-bit mono PCM at 24 kHz
MODES = ("pipelined", "stop_and_wait", "one_request")


async def speak(url: str, pieces: list[str], pipelined: bool) -> list[RequestTimings]:
    async with BidiSession.websocket(url, silence_timeout=120.0) as session:
        if pipelined:
            ids = [await session.send(piece) for piece in pieces]
            await _until_complete(session, ids[-1])
        else:
            for piece in pieces:
                await _until_complete(session, await session.send(piece))
        return list(session.timings.values())


async def _until_complete(session: BidiSession, request_id: str) -> None:
    async with contextlib.aclosing(session.events()) as events:
        async for event in events:
            if isinstance(event, ErrorMessage):
                raise RuntimeError(f"server error [{event.code}]: {event.message}")
            if isinstance(event, RequestCompleted) and event.request_id == request_id:
                return
    raise RuntimeError("the session ended early")


def measure(timings: list[RequestTimings]) -> dict[str, float]:
    start = timings[0].sent_at
    first_audio = [t.first_audio_at for t in timings]
    completed = [t.completed_at for t in timings]
    if None in first_audio or None in completed:
        raise RuntimeError("a request finished without audio")
    # Playback starts at the first audio byte; each sentence plays once it has arrived and the
    # previous one has finished playing. Any wait in between is silence the listener hears.
    playhead = stall = 0.0
    for index, timing in enumerate(timings):
        arrived = (timing.first_audio_at or 0.0) - start
        begin = arrived if index == 0 else max(playhead, arrived)
        if index:
            stall += begin - playhead
        playhead = begin + timing.audio_bytes / BYTES_PER_SECOND
    total = max(c or 0.0 for c in completed) - start
    synth = sum((t.server_synth_ms or 0.0) for t in timings) / 1000
    return {
        "total_s": total,
        "first_audio_s": (first_audio[0] or 0.0) - start,
        "stall_s": stall,
        # The server synthesizes one request at a time, so total = synthesis + idle; the idle
        # part (round trips, turnarounds) is what pipelining removes, and it does not swing with
        # the CPU load the way synthesis time does on a shared machine.
        "server_synth_s": synth,
        "idle_s": total - synth,
        "audio_s": sum(t.audio_bytes for t in timings) / BYTES_PER_SECOND,
        "requests": len(timings),
    }


async def run(url: str, repeats: int, rtts_ms: list[float]) -> dict[str, Any]:
    text = paragraph()
    sentences = split_sentences(text)
    await speak(url, ["Warm up."], pipelined=True)  # first-inference allocations are not the steady state
    parsed = urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    results = []
    for rtt_ms in rtts_ms:
        async with DelayProxy(host, port, rtt_ms / 2000) as proxy:
            target = url if rtt_ms == 0 else urlunsplit(parsed._replace(netloc=f"127.0.0.1:{proxy.port}"))
            runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
            for repeat in range(repeats):
                order = MODES[repeat % len(MODES) :] + MODES[: repeat % len(MODES)]
                for mode in order:
                    pieces = [text] if mode == "one_request" else sentences
                    timings = await speak(target, pieces, pipelined=mode == "pipelined")
                    runs[mode].append(measure(timings))
                    print(f"rtt {rtt_ms} ms, repeat {repeat + 1}, {mode}: {runs[mode][-1]}", file=sys.stderr)
        medians = {
            mode: {key: statistics.median(run[key] for run in mode_runs) for key in mode_runs[0]}
            for mode, mode_runs in runs.items()
        }
        pipelined, stop_and_wait = medians["pipelined"]["total_s"], medians["stop_and_wait"]["total_s"]
        results.append(
            {
                "rtt_ms": rtt_ms,
                "network": "direct"
                if rtt_ms == 0
                else f"simulated: local proxy delaying each direction {rtt_ms / 2} ms",
                "median": medians,
                "pipelined_saves_s": stop_and_wait - pipelined,
                "pipelined_speedup": stop_and_wait / pipelined,
                "pipelined_saves_idle_s": medians["stop_and_wait"]["idle_s"] - medians["pipelined"]["idle_s"],
                "runs": runs,
            }
        )
    return {
        "benchmark": "pipelining",
        "text": text,
        "sentences": sentences,
        "repeats": repeats,
        "server": url,
        "machine": machine(),
        "results": results,
    }


class DelayProxy:
    """A TCP proxy on 127.0.0.1 that delays every chunk by `one_way_s` in each direction,
    keeping order: a stand-in for network distance between client and server."""

    def __init__(self, upstream_host: str, upstream_port: int, one_way_s: float) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.one_way_s = one_way_s
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def deliver() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                await asyncio.sleep(max(0.0, due - loop.time()))
                writer.write(data)
                await writer.drain()
            writer.close()

        delivery = asyncio.create_task(deliver())
        try:
            while data := await reader.read(65536):
                queue.put_nowait((loop.time() + self.one_way_s, data))
        except ConnectionError:
            pass
        queue.put_nowait(None)
        with contextlib.suppress(ConnectionError):
            await delivery


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def local_server(threads: int) -> Iterator[str]:
    """`python -m voicestream.kokoro_server` on a free port until the block ends."""
    port = _free_port()
    command = [sys.executable, "-m", "voicestream.kokoro_server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--backend", "onnx", "--threads", str(threads)]
    process = subprocess.Popen(command)
    try:
        deadline = time.monotonic() + 600
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with code {process.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not become ready within 600 s")
            time.sleep(0.2)
        yield f"ws://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running server (ws://host:port); default: start one locally")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="inference threads of the local server")
    parser.add_argument(
        "--rtt-ms", type=float, nargs="+", default=[0.0, 50.0], help="round-trip times to run at (0: direct)"
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "pipelining.json")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if any(rtt < 0 for rtt in args.rtt_ms):
        parser.error("--rtt-ms values must be >= 0")
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(local_server(args.threads))
        result = asyncio.run(run(url, args.repeats, args.rtt_ms))
    if not args.url:
        result["server"] = f"local python -m voicestream.kokoro_server (onnx, {args.threads} threads)"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for row in result["results"]:
        total = {mode: round(values["total_s"], 3) for mode, values in row["median"].items()}
        idle = {mode: round(values["idle_s"], 3) for mode, values in row["median"].items()}
        print(f"rtt {row['rtt_ms']} ms: median total_s {total}, idle_s {idle}")
    print(f"→ {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
