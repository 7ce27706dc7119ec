"""What the benchmark scripts share: the local Kokoro server, one bidi session with its metrics,
the playback simulation, statistics, the machine description and JSON output.

Every script runs against the real server on a real 127.0.0.1 socket: either one it starts
in-process (uvicorn on a free port, the real ONNX model, wrapped in `TimedEngine` so the
engine's own compute time is known per sentence) or a running one given by `--url`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from voicestream import env
from voicestream.devserver import RunningServer, bind_free_port, serve_in_thread, wait_until_ready
from voicestream.engine import AudioChunk, SpeechEngine, load_engine
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.process_memory import return_freed_memory_to_the_os
from voicestream.kokoro_server.runtime import PRODUCTION as PRODUCTION_POLICY
from voicestream.kokoro_server.runtime import Policy, ServerRuntime
from voicestream.speech import Audio, BidiSession, RequestCompleted, bidi_url
from voicestream.speech.websocket import http_base_url
from voicestream.stats import percentile
from voicestream.wire.bidi import SAMPLE_RATE, AudioFormat, Limits
from voicestream.wire.errors import ErrorMessage

# Every benchmark process runs the engine under the server's heap policy (process_memory.py),
# so an engine measured alone allocates as it does in the server.
return_freed_memory_to_the_os()

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PCM_BYTES_PER_S = SAMPLE_RATE * 2  # 16-bit mono


# --- statistics ---------------------------------------------------------------------------


def summary(values: Iterable[float], digits: int = 1) -> dict[str, float]:
    """n, median, p95, min and max of a sample (noisy machines: medians, not means)."""
    sample = list(values)
    if not sample:
        return {"n": 0}
    return {
        "n": len(sample),
        "median": round(statistics.median(sample), digits),
        "p95": round(percentile(sample, 95), digits),
        "min": round(min(sample), digits),
        "max": round(max(sample), digits),
    }


def ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 2) if denominator > 0 else None


# --- the machine and the results ----------------------------------------------------------


# The instruction-set extensions that decide onnxruntime's int8 kernels (MLAS picks them at run
# time): the machine classes this project lands on differ in these, and in speed by up to 3x.
KERNEL_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


def cpu_flags() -> list[str]:
    """The KERNEL_FLAGS this CPU has, from /proc/cpuinfo (empty where it cannot be read)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                present = set(line.split(":", 1)[1].split())
                return [flag for flag in KERNEL_FLAGS if flag in present]
    return []


def host_class(flags: Iterable[str]) -> str:
    """A short name for the kernel family the int8 model runs on: 'avx512-vnni', 'avx512',
    'avx2-vnni', 'avx2' or 'baseline'."""
    present = set(flags)
    if "avx512f" in present:
        return "avx512-vnni" if "avx512_vnni" in present else "avx512"
    if "avx2" in present:
        return "avx2-vnni" if "avx_vnni" in present else "avx2"
    return "baseline"


# One agent-length sentence, decoded whole: the host's speed in the unit the README's classes use.
CALIBRATION_SENTENCE = (
    "Thanks for calling, I can help you change your booking to Friday morning and send the new "
    "confirmation to the email address we have on file."
)


def whole_sentence_rtf(threads: int = 2, repeats: int = 3) -> float:
    """Seconds of compute per second of audio decoding CALIBRATION_SENTENCE whole (no windows, no
    lookahead) on `threads` threads: the median of `repeats` runs after a warm-up. The machine
    classes differ by up to 3x here, so every result file carries it beside its own numbers."""
    engine = OnnxEngine(threads=threads, strategy=OnnxStrategy(decoder_windows=None, lookahead=None, pacing=False))
    engine.load()
    try:
        samples = sum(len(chunk.samples) for chunk in engine.synthesize(CALIBRATION_SENTENCE))  # warm-up
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            for _chunk in engine.synthesize(CALIBRATION_SENTENCE):
                pass
            runs.append(time.perf_counter() - started)
    finally:
        engine.close()
    return round(statistics.median(runs) / (samples / SAMPLE_RATE), 3)


def machine(*, calibrate: bool = True) -> dict[str, Any]:
    """Enough to tell two result files' machines apart: the CPU, its kernel flags and class, and
    (`calibrate`) its whole-sentence real-time factor on 2 threads, measured now."""
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    memory_gib = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = Path("/proc/meminfo").read_text().splitlines()[0]
        memory_gib = round(int(first.split()[1]) / 2**20, 1)
    flags = cpu_flags()
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model,
        "cpu_flags": flags,
        "host_class": host_class(flags),
        "cpus": os.cpu_count(),
        "memory_gib": memory_gib,
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "whole_sentence_rtf": whole_sentence_rtf() if calibrate else None,
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        # Tracked files changed since that commit (other work in the tree while measuring).
        "git_modified_files": len((_git("status", "--porcelain", "--untracked-files=no") or "").splitlines()),
    }


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all processes, all cores), from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def own_cpu_s() -> float:
    """CPU seconds of this process (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class LoadMeter:
    """How busy the machine was while a measurement ran: the cores other processes kept busy
    (the machine's busy time less this process's own), and the load average before and after."""

    def __init__(self) -> None:
        self.loadavg_before = os.getloadavg()
        self._wall, self._busy, self._own = time.perf_counter(), busy_cpu_s(), own_cpu_s()

    def report(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._wall
        others = max(0.0, (busy_cpu_s() - self._busy) - (own_cpu_s() - self._own)) / wall
        return {
            "other_processes_cores": round(others, 2),
            "loadavg_before": [round(v, 2) for v in self.loadavg_before],
            "loadavg_after": [round(v, 2) for v in os.getloadavg()],
            "wall_s": round(wall, 1),
        }


def _git(*args: str) -> str | None:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    return None


def command_line() -> str:
    """How this script was run, as a command someone can paste."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return " ".join([".venv/bin/python", str(shown), *sys.argv[1:]])


_NUMBERS = r"-?[\d.]+(?:[eE][-+]?\d+)?"
# A list of numbers, then a list of such lists (frame arrivals, buffer timelines).
_FLAT_LIST = re.compile(rf"\[\s*({_NUMBERS}(?:,\s*{_NUMBERS})*)\s*\]")
_LIST_OF_LISTS = re.compile(r"\[\s*(\[[^\[\]]*\](?:,\s*\[[^\[\]]*\])*)\s*\]")


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Indented JSON, except that lists of numbers (and lists of those) stay on one line:
    thousands of frame timestamps should not be thousands of lines in a diff."""
    text = json.dumps(report, indent=2)
    text = _FLAT_LIST.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m.group(1))) + "]", text)
    text = _LIST_OF_LISTS.sub(lambda m: "[" + ", ".join(re.split(r"(?<=\]),\s*", m.group(1))) + "]", text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    full = path.resolve()
    print(f"wrote {full.relative_to(ROOT) if full.is_relative_to(ROOT) else full}")


def base_parser(description: str, out_name: str, repeats: int) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", help="a running server (http://host:port); default: start one in-process")
    parser.add_argument("--threads", type=int, default=2, help="inference threads of the in-process server")
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--out", type=Path, default=RESULTS / out_name)
    return parser


def header(name: str, args: argparse.Namespace, server: LocalServer, **extra: Any) -> dict[str, Any]:
    """The part every result file starts with."""
    return {
        "benchmark": name,
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "server": server.description,
        "repeats": args.repeats,
        "machine": machine(),
        **extra,
    }


# --- the engine, timed from the inside ----------------------------------------------------


@dataclass
class EngineCall:
    """One `synthesize` call on the real engine: which text, when, and its compute time."""

    text: str
    started_at: float
    setup_s: float  # validation + G2P: the part of the first chunk spent before inference
    chunk_s: list[float] = field(default_factory=list)

    @property
    def first_chunk_s(self) -> float | None:
        return self.setup_s + self.chunk_s[0] if self.chunk_s else None


class TimedEngine(SpeechEngine):
    """The real engine, recording the compute time of every call it serves.

    The server runs each step in a worker thread; the wrapper times exactly those steps, so
    "client first audio minus engine first chunk" is what the server, the sockets and the
    client add on top of the model.
    """

    def __init__(self, inner: SpeechEngine, pass_behind: bool = True) -> None:
        """`pass_behind` False: the server's `behind` is not passed on (each sentence planned as
        if the server kept up): what that signal buys, measured next to it (concurrency.py)."""
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.sample_rate = inner.sample_rate
        self.calls: list[EngineCall] = []
        self._lock = threading.Lock()
        self.pass_behind = pass_behind

    def _load(self) -> None:
        self.inner.load()

    def voices(self) -> tuple[str, ...]:
        return self.inner.voices()

    def validate_voice(self, voice: str) -> None:
        self.inner.validate_voice(voice)

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        return self.inner.count_phonemes(texts, voice, text_options)  # the real work check (G2P), not characters

    def close(self) -> None:
        self.inner.close()

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        started = time.perf_counter()
        chunks = self.inner.synthesize(
            text, voice, speed, ahead_s=ahead_s, behind=behind and self.pass_behind, text_options=text_options
        )
        call = EngineCall(text=text, started_at=started, setup_s=time.perf_counter() - started)
        with self._lock:
            self.calls.append(call)
        return self._timed(chunks, call)

    @staticmethod
    def _timed(chunks: Iterator[AudioChunk], call: EngineCall) -> Iterator[AudioChunk]:
        while True:
            started = time.perf_counter()
            chunk = next(chunks, None)
            if chunk is None:
                return
            call.chunk_s.append(time.perf_counter() - started)
            yield chunk

    def calls_since(self, moment: float) -> list[EngineCall]:
        with self._lock:
            return [call for call in self.calls if call.started_at >= moment]


# --- the server ---------------------------------------------------------------------------


@dataclass
class LocalServer:
    http_url: str
    description: str
    engine: TimedEngine | None = None  # None for a server given by --url
    runtime: ServerRuntime | None = None  # likewise
    running: RunningServer | None = None  # likewise: runs functions on the server's event loop

    @property
    def ws_url(self) -> str:
        return bidi_url(self.http_url)

    @property
    def in_process(self) -> bool:
        return self.engine is not None


def load_timed_engine(threads: int) -> TimedEngine:
    return TimedEngine(load_engine("onnx", threads=threads))


@contextlib.contextmanager
def serve_url(app: Any, name: str) -> Iterator[str]:
    """`app` served in-process on a free port (voicestream.devserver); yields its base URL."""
    with serve_in_thread(app, name) as running:
        yield running.url


@contextlib.contextmanager
def kokoro_server(
    url: str | None = None,
    threads: int = 2,
    limits: Limits | None = None,
    engine: TimedEngine | None = None,
    policy: Policy = PRODUCTION_POLICY,
    send_buffer: int | None = None,
) -> Iterator[LocalServer]:
    """The server to measure: `url` if given, else the real app under uvicorn on 127.0.0.1
    (with production's policy unless a baseline's is given; `send_buffer`: the kernel send
    buffer of its connections, see `devserver.bind_free_port`)."""
    if url:
        base = http_base_url(url)
        wait_until_ready(base, 30)
        yield LocalServer(http_url=base, description=f"external server at {base}")
        return
    engine = engine or load_timed_engine(threads)
    limits = limits or env.limits()
    app = create_app(engine, limits, policy=policy)
    listener = None if send_buffer is None else bind_free_port(send_buffer)
    with serve_in_thread(app, "kokoro-server", listener=listener) as running:
        wait_until_ready(running.url, 300)
        description = (
            f"in-process voicestream server on 127.0.0.1 (uvicorn, {engine.name}, {threads} inference threads, "
            f"max_sessions={limits.max_sessions})"
        )
        yield LocalServer(
            http_url=running.url, description=description, engine=engine, runtime=app.state.runtime, running=running
        )


@dataclass(frozen=True)
class Baseline:
    """What a baseline server differs in from the measured one: the engine's streaming strategy
    (None: the measured server's engine itself), whether the engine hears `behind`, and the
    server's policy. Each is passed in when the baseline is built; nothing of the measured
    server is switched."""

    strategy: OnnxStrategy | None = None
    pass_behind: bool = True
    policy: Policy = PRODUCTION_POLICY


# The baselines the benchmarks compare with (docs/engine.md, docs/REPORT.md).
WHOLE_SENTENCE_DECODING = Baseline(strategy=OnnxStrategy(decoder_windows=None))  # decoder windows off
BEHIND_IGNORED = Baseline(pass_behind=False)  # every sentence planned as if the server kept up
PACING_OFF = Baseline(strategy=OnnxStrategy(pacing=False))  # the window plan's schedule alone (pacing.py)
STEPS_IN_ARRIVAL_ORDER = Baseline(policy=Policy(schedule_by_deadline=False))  # a FIFO pool (scheduler.py)
# The anchor's server: each request synthesized as one text, never split into sentences. Ours
# splits every request itself; the anchor's (kokoro's KPipeline) splits only at newlines.
ANCHOR_STYLE_REQUESTS = Baseline(policy=Policy(split_requests=False))


@contextlib.contextmanager
def baseline_server(server: LocalServer, baseline: Baseline, threads: int = 2) -> Iterator[LocalServer]:
    """A second in-process server beside `server`, built with `baseline`: its own engine when
    the baseline has a strategy (an ONNX engine on `threads` threads), else `server`'s engine
    shared; the same limits. A server given by --url has no in-process parts to build it from."""
    if server.engine is None or server.runtime is None:
        raise RuntimeError("a baseline needs the in-process server (no --url)")
    inner = server.engine.inner
    if baseline.strategy is not None:
        if not isinstance(inner, OnnxEngine):
            raise RuntimeError("a baseline strategy needs an ONNX engine")
        inner = OnnxEngine(threads=threads, strategy=baseline.strategy, derived_dir=inner.derived_dir)
    engine = TimedEngine(inner, pass_behind=baseline.pass_behind)
    with kokoro_server(threads=threads, limits=server.runtime.limits, engine=engine, policy=baseline.policy) as built:
        try:
            yield built
        finally:
            if inner is not server.engine.inner:
                inner.close()


@contextlib.contextmanager
def anchor_style(server: LocalServer, threads: int = 2) -> Iterator[LocalServer | None]:
    """The anchor-style server beside an in-process `server` (None beside a server given by --url)."""
    if not server.in_process:
        yield None
        return
    with baseline_server(server, ANCHOR_STYLE_REQUESTS, threads) as anchor:
        yield anchor


@contextlib.contextmanager
def baseline_servers(
    server: LocalServer, baselines: dict[str, Baseline | None], threads: int = 2
) -> Iterator[dict[str, LocalServer]]:
    """One server per name: `server` itself for None, else a baseline server beside it."""
    with contextlib.ExitStack() as stack:
        yield {
            name: server if baseline is None else stack.enter_context(baseline_server(server, baseline, threads))
            for name, baseline in baselines.items()
        }


# --- one bidi session and what it measured ------------------------------------------------


@dataclass
class Arrival:
    """An audio frame at the client: seconds since the run's origin, and its audio length."""

    at_s: float
    audio_s: float


@dataclass
class RequestRecord:
    text: str
    sent_s: float
    first_audio_s: float | None  # since sent
    total_s: float | None  # since sent
    audio_s: float
    server_first_audio_ms: float | None
    server_synth_ms: float | None
    engine_first_chunk_ms: float | None = None


@dataclass
class SessionRecord:
    """The metrics every benchmark session records (times in seconds since `origin`)."""

    connect_s: float
    first_audio_s: float | None
    completion_s: float
    audio_s: float
    errors: list[str]
    requests: list[RequestRecord]
    arrivals: list[Arrival] = field(repr=False)
    audio: bytes = field(repr=False, default=b"")

    @property
    def real_time_factor(self) -> float | None:
        """End-to-end seconds per second of audio (below 1: faster than real time)."""
        return self.completion_s / self.audio_s if self.audio_s else None

    def gaps_ms(self) -> list[float]:
        return [(b.at_s - a.at_s) * 1000 for a, b in itertools.pairwise(self.arrivals)]

    def metrics(self) -> dict[str, Any]:
        """The per-session row of the JSON (no audio, no per-frame arrivals)."""
        gaps = self.gaps_ms()
        stall = playback(self.arrivals)
        return {
            "connect_ms": round(self.connect_s * 1000, 2),
            "first_audio_ms": None if self.first_audio_s is None else round(self.first_audio_s * 1000, 1),
            "completion_ms": round(self.completion_s * 1000, 1),
            "audio_s": round(self.audio_s, 3),
            "real_time_factor": None if self.real_time_factor is None else round(self.real_time_factor, 3),
            # Frames come in bursts (one engine chunk = many 40 ms frames): the spread of the
            # gaps and the longest gap are what a jitter buffer has to absorb.
            "jitter_ms": round(statistics.pstdev(gaps), 1) if gaps else 0.0,
            "max_gap_ms": round(max(gaps), 1) if gaps else 0.0,
            "frames": len(self.arrivals),
            "stall_ms": round(stall.stall_s * 1000, 1),
            "errors": self.errors,
            "requests": [asdict(request) for request in self.requests],
        }


async def run_session(
    ws_url: str,
    pieces: Iterable[str] | AsyncIterable[str],
    *,
    stop_and_wait: bool = False,
    format: AudioFormat | Callable[[int], AudioFormat] | None = None,
    origin: float | None = None,
    keep_audio: bool = False,
    engine: TimedEngine | None = None,
) -> SessionRecord:
    """Open a session, send every piece (pipelined, or each after the previous one's
    synthesis_complete), read until the last completes, and record what happened. `format`
    may depend on the piece's index (WAV: a header on the first piece only).

    Times count from `origin` (default: the first send). With `engine` (in-process server)
    each request also gets the engine's own first-chunk compute time for its first sentence.
    """
    opened = time.perf_counter()
    async with BidiSession.websocket(ws_url, silence_timeout=120.0) as session:
        connect_s = session.connect_s or 0.0
        arrivals_at: list[tuple[float, int]] = []
        chunks: list[bytes] = []
        errors: list[str] = []
        completed: dict[str, asyncio.Event] = {}
        sent: list[str] = []
        sending_done = asyncio.Event()
        first_send: list[float] = []

        async def send_all() -> None:
            async for piece in _aiter(pieces):
                if stop_and_wait and sent:
                    await completed[sent[-1]].wait()
                if not first_send:
                    first_send.append(time.perf_counter())
                request_id = f"r{len(sent)}"
                completed[request_id] = asyncio.Event()
                sent.append(request_id)
                piece_format = format(len(sent) - 1) if callable(format) else format
                await session.send(piece, request_id=request_id, format=piece_format)
            sending_done.set()

        sender = asyncio.create_task(send_all())
        try:
            async with contextlib.aclosing(session.events()) as events:
                async for event in events:
                    if isinstance(event, Audio):
                        arrivals_at.append((time.perf_counter(), len(event.data)))
                        if keep_audio:
                            chunks.append(event.data)
                    elif isinstance(event, RequestCompleted | ErrorMessage):
                        if isinstance(event, ErrorMessage):
                            errors.append(event.code)
                        if event.request_id in completed:
                            completed[event.request_id].set()
                        if sending_done.is_set() and all(flag.is_set() for flag in completed.values()):
                            break
            await sender
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
        ended = time.perf_counter()
    zero = origin if origin is not None else (first_send[0] if first_send else opened)
    audio_bytes = sum(size for _, size in arrivals_at)
    # PCM frames carry their length; compressed formats are spread over the server's audio_ms.
    timings = list(session.timings.values())
    server_audio_s = sum((t.server_audio_ms or 0.0) for t in timings) / 1000
    per_byte_s = server_audio_s / audio_bytes if audio_bytes else 0.0
    arrivals = [Arrival(at - zero, size * per_byte_s) for at, size in arrivals_at]
    engine_calls = engine.calls_since(opened) if engine is not None else []
    requests = [
        RequestRecord(
            text=t.text,
            sent_s=t.sent_at - zero,
            first_audio_s=t.first_audio_s,
            total_s=t.total_s,
            audio_s=(t.server_audio_ms or 0.0) / 1000,
            server_first_audio_ms=t.server_first_audio_ms,
            server_synth_ms=t.server_synth_ms,
            engine_first_chunk_ms=_engine_first_chunk_ms(engine_calls, t.text),
        )
        for t in timings
    ]
    first_audio = arrivals[0].at_s if arrivals else None
    last_done = max((t.completed_at for t in timings if t.completed_at is not None), default=ended)
    return SessionRecord(
        connect_s=connect_s,
        first_audio_s=first_audio,
        completion_s=last_done - zero,
        audio_s=server_audio_s,
        errors=errors,
        requests=requests,
        arrivals=arrivals,
        audio=b"".join(chunks),
    )


def _engine_first_chunk_ms(calls: list[EngineCall], request_text: str) -> float | None:
    """The first engine call whose text opens this request (the server splits a request into
    sentences, so the first call is for its first sentence)."""
    for call in calls:
        if request_text.strip().startswith(call.text.strip()) and call.first_chunk_s is not None:
            return round(call.first_chunk_s * 1000, 1)
    return None


async def _aiter(items: Iterable[str] | AsyncIterable[str]) -> AsyncIterator[str]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item


# --- playback -----------------------------------------------------------------------------


@dataclass
class Playback:
    """A player that starts at the first audio and plays in real time, pausing when empty."""

    start_s: float
    end_s: float
    stall_s: float
    stalls: list[tuple[float, float]]  # (when, how long), seconds since the run's origin
    buffer: list[tuple[float, float]]  # (when, seconds of audio buffered ahead), for plots


def playback(arrivals: list[Arrival]) -> Playback:
    if not arrivals:
        return Playback(0.0, 0.0, 0.0, [], [])
    start = arrivals[0].at_s
    play_end = start  # when the audio received so far has been played out
    stalls: list[tuple[float, float]] = []
    buffer: list[tuple[float, float]] = [(start, 0.0)]
    for arrival in arrivals:
        if arrival.at_s > play_end + 1e-9:  # the player ran dry before this frame came
            stalls.append((play_end, arrival.at_s - play_end))
            buffer.append((play_end, 0.0))
            play_end = arrival.at_s
        buffer.append((arrival.at_s, play_end - arrival.at_s))
        play_end += arrival.audio_s
        buffer.append((arrival.at_s, play_end - arrival.at_s))
    buffer.append((play_end, 0.0))
    return Playback(
        start_s=start,
        end_s=play_end,
        stall_s=sum(duration for _, duration in stalls),
        stalls=stalls,
        buffer=buffer,
    )


def run_async(main: Callable[[], Any]) -> Any:
    """asyncio.run for a coroutine function (the scripts' main loop)."""
    return asyncio.run(main())
