"""What every connection of one server shares: the engine, its readiness, the synthesis
workers and the session count.

The engine loads and warms up in a background thread while the server already answers
/ping with 503; synthesis steps run in a bounded pool of worker threads, never on the event
loop, so one slow synthesis cannot stall other sessions' sockets, and the step whose listener
runs out of audio first goes first (scheduler.py). A request's G2P (its work
check, `SpeechEngine.count_phonemes`) waits in threads of its own: a text whose G2P runs long
holds no synthesis worker while its conversion runs (or is stopped) in a G2P process. At most
`Limits.max_g2p_queue` requests wait for or run their G2P at once; one more is refused with
server_busy at once, and a request whose client left is dropped from the queue before its G2P
starts (its await is cancelled, and with it the queued work).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import ParamSpec, TypeVar

from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server.encoders import EncoderFactory, create_encoder
from voicestream.kokoro_server.logs import log_event
from voicestream.kokoro_server.process_memory import release_freed_memory, return_freed_memory_to_the_os
from voicestream.kokoro_server.scheduler import DeadlineExecutor
from voicestream.wire.bidi import SAMPLE_RATE, Limits
from voicestream.wire.errors import CodedError, ErrorCode

P = ParamSpec("P")
T = TypeVar("T")

WARM_UP_TEXT = "Ready."
# One ordinary agent sentence, synthesized once after the warm-up and timed: how fast this host
# speaks for a listener (windows, lookahead, pacing and all), known before /ping says 200, so a
# host too slow for real time says so at start instead of stalling its listeners mid-sentence.
SPEED_CHECK_TEXT = "Thanks for calling, how can I help you today?"
# Seconds without a synthesis step after which the heaps' free pages are given back.
IDLE_RELEASE_DELAY_S = 0.5
# Threads that wait on G2P (the ONNX engine converts in worker processes; these only wait).
G2P_WAITERS = 4


class ServerBusyError(CodedError):
    """The server has more work queued than a limit allows: try again later."""

    code = ErrorCode.SERVER_BUSY
    status = 503


class Readiness(StrEnum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass(slots=True)
class RuntimeStats:
    """Counters for health checks and tests (read from any thread; written on the loop)."""

    sessions_active: int = 0
    sessions_opened: int = 0
    sessions_refused: int = 0
    steps_running: int = 0  # synthesis steps executing in worker threads right now
    sentences_started: int = 0
    g2p_queued: int = 0  # requests waiting for or running their G2P work check
    g2p_refused: int = 0  # refused because `Limits.max_g2p_queue` were queued


@dataclass(frozen=True, slots=True)
class SpeedMeasurement:
    """One synthesis timed at start: seconds of compute per second of audio."""

    compute_s: float
    audio_s: float

    @property
    def real_time_factor(self) -> float:
        return self.compute_s / self.audio_s if self.audio_s > 0 else float("inf")

    @property
    def faster_than_real_time(self) -> bool:
        return self.real_time_factor < 1.0

    def report(self) -> dict[str, float | bool]:
        return {
            "real_time_factor": round(self.real_time_factor, 3),
            "faster_than_real_time": self.faster_than_real_time,
        }


def measure_speed(engine: SpeechEngine, text: str, clock: Callable[[], float] = time.perf_counter) -> SpeedMeasurement:
    """Synthesize `text` once, timing the compute of each chunk as the engine produces it."""
    compute_s = 0.0
    samples = 0
    chunks = iter(engine.synthesize(text))
    while True:
        started = clock()
        chunk = next(chunks, None)
        compute_s += clock() - started
        if chunk is None:
            return SpeedMeasurement(compute_s=compute_s, audio_s=samples / SAMPLE_RATE)
        samples += len(chunk.samples)


# Engines already warmed up and timed: an app built again over the same loaded engine (tests and
# benchmarks build many over one) takes its measurement instead of speaking the texts again.
_MEASURED: weakref.WeakKeyDictionary[SpeechEngine, SpeedMeasurement] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Policy:
    """How the server turns requests into engine steps: production's by default. Benchmarks build
    a server with a baseline policy rather than switching a running server's parts.

    `split_requests`: each request is split into sentences, synthesized in turn (first audio after
    the first sentence); False: one synthesis per request, as the anchor's server does.
    `schedule_by_deadline`: steps run earliest deadline first (scheduler.py); False: in the order
    asked for, as a FIFO pool would."""

    split_requests: bool = True
    schedule_by_deadline: bool = True


PRODUCTION = Policy()


class ServerRuntime:
    """The engine (or a factory that loads it), the synthesis workers and the session count."""

    def __init__(
        self,
        engine: SpeechEngine | Callable[[], SpeechEngine],
        limits: Limits,
        synth_workers: int = 2,
        warm_up_text: str = WARM_UP_TEXT,
        release_memory: Callable[[], None] = release_freed_memory,
        clock: Callable[[], float] = time.perf_counter,
        policy: Policy = PRODUCTION,
        encoders: EncoderFactory = create_encoder,
    ) -> None:
        """`release_memory`: what gives freed memory back once the server is idle (tests pass
        their own to observe when it runs). `clock`: what the start's speed check is timed with.
        `encoders`: what makes each request's audio encoder (tests pass their own)."""
        self.limits = limits
        self.policy = policy
        self.encoders = encoders
        self.stats = RuntimeStats()
        self.readiness = Readiness.LOADING
        self.error: str | None = None
        self.speed: SpeedMeasurement | None = None  # measured at start, before readiness
        self._clock = clock
        self._engine_source = engine
        self._engine: SpeechEngine | None = None
        self._warm_up_text = warm_up_text
        self._executor = DeadlineExecutor(synth_workers, thread_name_prefix="voicestream-synth")
        self._g2p_executor = ThreadPoolExecutor(max_workers=G2P_WAITERS, thread_name_prefix="voicestream-g2p")
        self._steps_lock = threading.Lock()
        self._release_memory = release_memory
        self._idle_release: asyncio.TimerHandle | None = None

    @property
    def ready(self) -> bool:
        return self.readiness is Readiness.READY

    @property
    def engine(self) -> SpeechEngine:
        if self._engine is None or not self.ready:
            raise RuntimeError("the engine is not ready")
        return self._engine

    def identity(self) -> dict[str, str]:
        """What the loaded engine is and where it runs: {"engine": "torch", "device": "cuda"}."""
        return {"engine": self.engine.name, "device": self.engine.device}

    async def start(self) -> None:
        """Load the engine and run one warm-up synthesis; readiness tells how it went."""
        started = time.perf_counter()
        # Before the first synthesis: the server's idle memory stays flat (process_memory.py).
        return_freed_memory_to_the_os()
        try:
            self._engine = await asyncio.to_thread(self._load_and_warm_up)
        except Exception as exc:
            self.readiness = Readiness.FAILED
            self.error = f"{type(exc).__name__}: {exc}"
            log_event("engine_failed", logging.ERROR, exc_info=True, error=self.error)
            return
        self.readiness = Readiness.READY
        assert self.speed is not None  # measured by _load_and_warm_up
        rtf = round(self.speed.real_time_factor, 3)
        log_event(
            "engine_ready",
            engine=self._engine.name,
            device=self._engine.device,
            load_ms=round((time.perf_counter() - started) * 1000, 1),
            real_time_factor=rtf,
        )
        if not self.speed.faster_than_real_time:
            log_event(
                "engine_slower_than_real_time",
                logging.WARNING,
                real_time_factor=rtf,
                consequence="listeners will hear gaps inside sentences: serve from a faster host or device",
            )

    def _load_and_warm_up(self) -> SpeechEngine:
        source = self._engine_source
        engine = source if isinstance(source, SpeechEngine) else source()
        engine.load()
        known = _MEASURED.get(engine)
        if known is None:
            # The first inference allocates onnxruntime/torch buffers: pay that before /ping says 200.
            for _chunk in engine.synthesize(self._warm_up_text):
                pass
            known = _MEASURED[engine] = measure_speed(engine, SPEED_CHECK_TEXT, self._clock)
        self.speed = known
        return engine

    def close(self) -> None:
        if self._idle_release is not None:
            self._idle_release.cancel()
        # Steps already running finish on their own (one engine chunk); queued ones are dropped.
        self._executor.shutdown()
        self._g2p_executor.shutdown(wait=False, cancel_futures=True)
        # An engine the runtime built (from a factory) is the runtime's to release; one it was
        # given belongs to the caller, who may share it between apps.
        if self._engine is not None and self._engine is not self._engine_source:
            self._engine.close()

    def try_open_session(self) -> bool:
        if self.stats.sessions_active >= self.limits.max_sessions:
            self.stats.sessions_refused += 1
            return False
        self.stats.sessions_active += 1
        self.stats.sessions_opened += 1
        return True

    def close_session(self) -> None:
        self.stats.sessions_active -= 1

    async def in_worker(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one CPU-bound step in a synthesis worker thread and await its result: after the
        steps already waiting whose deadlines are due (its own deadline is now)."""
        return await self.in_worker_by(time.perf_counter(), function, *args, **kwargs)

    async def in_worker_by(self, deadline: float, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`in_worker` for a step whose listener runs out of audio at `deadline` (a
        time.perf_counter() value; in the past for one already waiting): earliest first."""
        loop = asyncio.get_running_loop()
        try:
            due = deadline if self.policy.schedule_by_deadline else time.perf_counter()
            step = self._executor.submit(due, lambda: self._counted(function, *args, **kwargs))
            result: T = await asyncio.wrap_future(step, loop=loop)
            return result
        finally:
            self._release_memory_when_idle(loop)

    async def in_g2p(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a G2P step (a request's work check) in a G2P waiter thread and await its result;
        `ServerBusyError` when `Limits.max_g2p_queue` requests already wait for or run theirs.
        Cancelling the await drops the step if it has not started."""
        limit = self.limits.max_g2p_queue
        if self.stats.g2p_queued >= limit:
            self.stats.g2p_refused += 1
            raise ServerBusyError(f"{limit} requests are waiting for their text to be converted: try again later")
        loop = asyncio.get_running_loop()
        self.stats.g2p_queued += 1
        try:
            return await loop.run_in_executor(self._g2p_executor, lambda: function(*args, **kwargs))
        finally:
            self.stats.g2p_queued -= 1

    def _release_memory_when_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        """Once no synthesis step has run for IDLE_RELEASE_DELAY_S, give the heaps' free pages back
        (process_memory.py): each finished step pushes the moment back, so a busy server never
        pays for it."""
        if self._idle_release is not None:
            self._idle_release.cancel()
        self._idle_release = loop.call_later(IDLE_RELEASE_DELAY_S, self._release_if_idle, loop)

    def _release_if_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        self._idle_release = None
        if self.stats.steps_running == 0:
            # In a thread of its own: a trim walks the heaps (up to tens of ms), and neither the
            # event loop nor a synthesis worker should wait for it.
            loop.run_in_executor(None, self._release_memory)

    def _counted(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        with self._steps_lock:
            self.stats.steps_running += 1
        try:
            return function(*args, **kwargs)
        finally:
            with self._steps_lock:
                self.stats.steps_running -= 1
