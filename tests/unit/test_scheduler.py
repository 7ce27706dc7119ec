"""DeadlineExecutor: synthesis steps run earliest deadline first, ties in the order asked for;
errors reach the caller; cancelled and shut-down steps never run."""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
import time
import weakref
from concurrent.futures import CancelledError, Future

import pytest

from tests.support.fakes import ToneEngine, started_runtime
from voicestream.kokoro_server.scheduler import DeadlineExecutor


def blocked_worker(executor: DeadlineExecutor) -> tuple[threading.Event, Future[object]]:
    """Occupy the executor's one worker until the returned event is set."""
    release, running = threading.Event(), threading.Event()

    def hold() -> None:
        running.set()
        release.wait(5)

    held = executor.submit(0.0, hold)
    assert running.wait(5)
    return release, held


def test_waiting_steps_run_earliest_deadline_first_and_ties_in_the_order_asked() -> None:
    executor = DeadlineExecutor(1, "test")
    release, held = blocked_worker(executor)
    ran: list[str] = []
    futures = [
        executor.submit(deadline, functools.partial(ran.append, name))
        for name, deadline in [("late", 30.0), ("due", 10.0), ("due too", 10.0), ("middle", 20.0)]
    ]
    assert executor.queued() == 4
    release.set()
    for future in [held, *futures]:
        future.result(5)
    assert ran == ["due", "due too", "middle", "late"]
    executor.shutdown()


def test_a_steps_error_reaches_its_caller_and_the_worker_goes_on() -> None:
    executor = DeadlineExecutor(1, "test")

    def fail() -> None:
        raise RuntimeError("engine fault")

    with pytest.raises(RuntimeError, match="engine fault"):
        executor.submit(1.0, fail).result(5)
    assert executor.submit(2.0, lambda: 42).result(5) == 42
    executor.shutdown()


def test_cancelled_and_shut_down_steps_never_run_and_a_running_one_finishes() -> None:
    executor = DeadlineExecutor(1, "test")
    release, held = blocked_worker(executor)
    ran: list[str] = []
    cancelled = executor.submit(1.0, lambda: ran.append("cancelled"))
    dropped = executor.submit(2.0, lambda: ran.append("dropped"))
    assert cancelled.cancel()
    executor.shutdown()
    release.set()
    assert held.result(5) is None  # the step in flight finished
    with pytest.raises(CancelledError):
        dropped.result(5)
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(3.0, lambda: None)
    time.sleep(0.05)
    assert ran == []


class Carried:
    """What a step carries (a request's encoder, its engine state): weakly referenceable."""


def test_an_idle_worker_keeps_nothing_of_the_last_step_it_ran() -> None:
    executor = DeadlineExecutor(1, "test")
    carried = Carried()
    gone = weakref.ref(carried)
    assert executor.submit(1.0, functools.partial(id, carried)).result(5) == id(carried)
    del carried
    for _ in range(500):  # the worker drops the step once it has handed the result over
        gc.collect()
        if gone() is None:
            break
        time.sleep(0.01)
    assert gone() is None, "the idle worker still holds the step it ran last"
    executor.shutdown()


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        DeadlineExecutor(0, "test")


async def test_the_runtime_serves_a_listener_already_waiting_before_one_with_audio_ahead() -> None:
    runtime = await started_runtime(ToneEngine(), workers=1)
    release = threading.Event()
    order: list[str] = []
    occupied = asyncio.ensure_future(runtime.in_worker(release.wait, 5))
    await asyncio.sleep(0.05)  # the one worker is busy
    now = time.perf_counter()
    ahead = asyncio.ensure_future(runtime.in_worker_by(now + 2.0, order.append, "audio ahead until now + 2 s"))
    waiting = asyncio.ensure_future(runtime.in_worker_by(now - 1.0, order.append, "waiting for 1 s"))
    await asyncio.sleep(0.05)
    release.set()
    await asyncio.gather(occupied, ahead, waiting)
    assert order == ["waiting for 1 s", "audio ahead until now + 2 s"]
    runtime.close()
