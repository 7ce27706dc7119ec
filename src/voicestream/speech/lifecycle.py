"""`SessionLifecycle`: the state machine every speech session shares, written once.

A session is NEW until `connect()`, OPEN until `close()` (CLOSING while it waits for the server to
acknowledge), then CLOSED; `connect` may be called once, `close` any number of times. Background
work queues what it reads in an `Inbox`, and the one consumer waits on it under the silence
timeout. Subclasses (`BidiSession`, `VllmOmniSession`) say how to open and close their wire
(`_open`, `_release`, `_shut`) and what awaits an answer (`_expecting`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from abc import ABC, abstractmethod
from enum import Enum
from types import TracebackType
from typing import Generic, Self, TypeVar

from .errors import SessionClosedError, SessionError
from .events import RequestTimings
from .inbox import Inbox

ItemT = TypeVar("ItemT")


class SessionState(Enum):
    NEW = "new"  # not connected yet
    OPEN = "open"
    CLOSING = "closing"  # close() is waiting for the server's acknowledgement
    CLOSED = "closed"


class SessionLifecycle(ABC, Generic[ItemT]):
    """Connect once, close idempotently, refuse work unless open, time out on silence."""

    def __init__(self, *, connect_timeout: float, silence_timeout: float, close_timeout: float) -> None:
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("silence_timeout", silence_timeout),
            ("close_timeout", close_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self.connect_timeout = connect_timeout
        self.silence_timeout = silence_timeout
        self.close_timeout = close_timeout
        self.timings: dict[str, RequestTimings] = {}
        """Every request sent on this session, in send order, with its client-side timings."""
        self.connect_s: float | None = None
        """Seconds `connect()` took (TCP/TLS, handshake, and for SageMaker the HTTP/2 stream)."""
        self._state = SessionState.NEW
        self._inbox: Inbox[ItemT] = Inbox()
        self._send_lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._failure: SessionError | None = None
        self._ended = False  # the consumer has seen the end of the session

    @property
    @abstractmethod
    def description(self) -> str:
        """Where the session goes, for logs and error messages."""

    # --- what each session does on its own wire ------------------------------------------------

    @abstractmethod
    async def _open(self) -> None:
        """Open the wire (within `connect_timeout`); raise `SessionConnectError` when it cannot."""

    @abstractmethod
    async def _release(self) -> None:
        """Drop whatever `_open` left behind after it failed; the state becomes CLOSED."""

    @abstractmethod
    async def _shut(self) -> None:
        """Say goodbye (bounded by `close_timeout`), release everything; the state becomes CLOSED."""

    @abstractmethod
    def _expecting(self) -> bool:
        """Whether an answer is due (a request, ping, cancel or close): silence counts then."""

    @abstractmethod
    def _outstanding(self) -> int:
        """How many requests are unanswered, for the silence timeout's message."""

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def is_open(self) -> bool:
        """Connected, and neither closed nor failed nor ended: `send` would work."""
        return self._state is SessionState.OPEN and self._failure is None and not self._ended

    async def connect(self) -> None:
        """Open the session; raises `SessionConnectError` when it cannot."""
        if self._state is not SessionState.NEW:
            raise SessionClosedError("connect() may be called once per session")
        self._state = SessionState.OPEN
        started = time.perf_counter()
        try:
            await self._open()
        except BaseException:
            await self._release()
            raise
        self.connect_s = time.perf_counter() - started
        self._inbox.start_clock()

    async def close(self) -> None:
        """Finish politely, then release everything. Requests still in flight are abandoned.
        Idempotent; bounded by `close_timeout`."""
        if self._state in (SessionState.CLOSING, SessionState.CLOSED):
            return
        if self._state is SessionState.NEW:
            self._state = SessionState.CLOSED
            return
        self._state = SessionState.CLOSING
        await self._shut()

    # --- shared helpers ----------------------------------------------------------------------

    def _new_request_id(self) -> str:
        while (rid := f"req-{next(self._ids)}") in self.timings:
            pass
        return rid

    def _ensure_open(self) -> None:
        if self._failure is not None:
            raise SessionClosedError(f"the session failed earlier: {self._failure}") from self._failure
        if self._state is not SessionState.OPEN or self._ended:
            raise SessionClosedError(f"the session is {'ended' if self._ended else self._state.value}")

    def _expect(self) -> None:
        """Something new awaits an answer: the silence clock starts now if it was idle."""
        if not self._expecting():
            self._inbox.start_clock()
        self._inbox.wake()

    async def _wait_for_item(self) -> None:
        """Wait until the inbox holds something or the state changed; `SessionTimeoutError`
        after `silence_timeout` s without progress while answers are due."""
        await self._inbox.wait(
            self.silence_timeout if self._expecting() else None,
            lambda: (
                f"no frame from {self.description} for {self.silence_timeout} s "
                f"with {self._outstanding()} request(s) outstanding"
            ),
        )
