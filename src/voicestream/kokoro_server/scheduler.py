"""The synthesis workers: a thread pool that runs the step whose listener runs dry first.

A FIFO pool serves steps in the order they were asked for, so a caller waiting for its first
audio queues behind other sessions' windows whose listeners still have seconds of audio to
hear. Here every step carries a deadline, the moment its listener runs out of audio (for a
first window: when the text came, the caller has waited since), and idle workers take the
earliest (earliest deadline first; ties in submission order). A listener starved longest is
served first, so nobody starves for ever: a step's deadline never moves, and every later
step's is later.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class DeadlineExecutor:
    """`submit(deadline, fn)` → a Future; `workers` threads, started on first use."""

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        if workers < 1:
            raise ValueError(f"need at least one worker, got {workers}")
        self._workers = workers
        self._prefix = thread_name_prefix
        self._queue: list[tuple[float, int, Future[Any], Callable[[], Any]]] = []
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, deadline: float, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the synthesis workers are shut down")
            heapq.heappush(self._queue, (deadline, next(self._order), future, fn))
            if len(self._threads) < self._workers:
                thread = threading.Thread(target=self._work, name=f"{self._prefix}_{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._ready.notify()
        return future

    def queued(self) -> int:
        """Steps waiting for a worker."""
        with self._ready:
            return len(self._queue)

    def shutdown(self) -> None:
        """Cancel every queued step; a running one finishes on its own (one engine step)."""
        with self._ready:
            self._closed = True
            dropped, self._queue = self._queue, []
            self._ready.notify_all()
        for _, _, future, _ in dropped:
            future.cancel()

    def _work(self) -> None:
        while self._run_next():
            pass

    def _run_next(self) -> bool:
        """Run the earliest step (False once shut down). A function of its own so that the step
        and its arguments (a request's engine state, its encoder) go with its frame: an idle
        worker must not keep the last step it ran alive."""
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if not self._queue:
                return False
            _, _, future, fn = heapq.heappop(self._queue)
        if not future.set_running_or_notify_cancel():
            return True  # cancelled while queued (its awaiting task went away)
        try:
            result = fn()
        except BaseException as error:  # handed to the awaiting task, as a pool would
            future.set_exception(error)
        else:
            future.set_result(result)
        return True
