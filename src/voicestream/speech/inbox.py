"""What a session's background work hands to its one consumer, and the silence clock.

Both sessions (Kokoro's `BidiSession`, `VllmOmniSession`) read their server in background tasks
and queue what they read here; `events()` takes it out. While answers are due (a request, ping,
cancel or close unanswered), a consumer that hears nothing for `silence_timeout` seconds gets
`SessionTimeoutError` instead of waiting forever: a dead server must not hang a voice call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import SessionTimeoutError

T = TypeVar("T")


class Inbox(Generic[T]):
    def __init__(self) -> None:
        self.progress_at = time.perf_counter()
        """When the server last showed progress (or the clock last started)."""
        self._items: deque[T] = deque()
        self._signal = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        self._items.append(item)
        self._signal.set()

    def wake(self) -> None:
        """Let a waiting consumer look again (its state changed, not the items)."""
        self._signal.set()

    def start_clock(self) -> None:
        """Something new awaits an answer while none was due: silence counts from now."""
        self.progress_at = time.perf_counter()
        self._signal.set()

    def progress(self, at: float) -> None:
        self.progress_at = max(self.progress_at, at)

    def pop(self) -> T:
        """The oldest item (IndexError when there is none: check `len` or `bool` first)."""
        return self._items.popleft()

    async def wait(self, silence_timeout: float | None, silence: Callable[[], str]) -> None:
        """Wait until something is put or woken; with answers due (a `silence_timeout`), at most
        until `silence_timeout` s after the last progress, then raise SessionTimeoutError with
        `silence()`: what was not heard from whom, for how long."""
        timeout: float | None = None
        if silence_timeout is not None:
            timeout = self.progress_at + silence_timeout - time.perf_counter()
            if timeout <= 0:
                raise SessionTimeoutError(silence())
        self._signal.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._signal.wait()
