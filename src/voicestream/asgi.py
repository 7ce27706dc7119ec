"""HTTP plumbing shared by the two apps (the Kokoro server and the speak function).

- `read_body`: a JSON request body, refused unless it is declared `application/json` (415: a web
  page's cross-origin "simple" POST cannot send that type without a CORS preflight, which no
  route answers), past a byte limit without reading it all (413), or when the client takes
  longer than a deadline to send it (408: a slow body must not hold a connection forever);
- `error_response`: the one JSON error body (`wire.errors`) with the error's status;
- `StreamingBody`: a chunked response that stops its producer the moment the client leaves and
  aborts (no final chunk) when the producer fails, so a client sees an incomplete body rather
  than a short one that looks whole; with a `ConsumerLag`, also when the client reads its audio
  slower than real time;
- `unless_disconnected`: awaits work done before a response starts (the first audio), dropping
  it when the client leaves meanwhile;
- `ConsumerLag`: the write deadline of a consumer of audio (a response or a bidi session).

Starlette's StreamingResponse notices a disconnect only through anyio's cancel scope, whose
repeated cancellation would also kill a producer's cleanup (say, cancelling the session on the
speech server). Here one task watches for `http.disconnect` and cancels the writer once; the
producer's own cleanup then runs to the end, in the writer's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError

JSON_MEDIA_TYPE = "application/json"

T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected before its response started."""


class SlowConsumerError(CodedError):
    """The client reads audio slower than real time by more than the limit: it is closed."""

    code = ErrorCode.SLOW_CONSUMER
    status = 408


class ConsumerLag:
    """How far a consumer of audio has fallen behind a listener who plays it in real time.

    Each send that waits (the transport's buffers are full because the client does not read)
    adds the time it waited, less the seconds of audio it carried, to the lag (never below zero:
    a client that kept up owes nothing, and time the server spent synthesizing is not a send's).
    A client that reads in real time waits about as long as its audio lasts and stays near
    zero; one that reads at a fraction of that, or not at all, grows it until a send would pass
    `max_lag_s`: `SlowConsumerError`, whose caller closes the consumer."""

    def __init__(self, max_lag_s: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self.max_lag_s = max_lag_s
        self.lag_s = 0.0
        self._clock = clock

    async def send(self, sending: Awaitable[None], audio_s: float) -> None:
        """Await `sending` (a write carrying `audio_s` seconds of audio) within what is left."""
        allowed_s = self.max_lag_s - self.lag_s + audio_s
        started = self._clock()
        try:
            if allowed_s <= 0:
                raise TimeoutError
            async with asyncio.timeout(allowed_s):
                await sending
        except TimeoutError:
            if inspect.iscoroutine(sending):
                sending.close()  # never awaited when refused upfront: no "never awaited" warning
            raise SlowConsumerError(
                f"the client reads audio more than {self.max_lag_s:g} s slower than real time: closed"
            ) from None
        self.lag_s = max(0.0, self.lag_s + (self._clock() - started) - audio_s)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or `ClientGone` as soon as the client disconnects meanwhile (then `work`
    is cancelled: a request that waits for a worker, say its G2P, is dropped before it starts).
    Call once the body is read: the only message left to receive is the disconnect."""

    async def doing() -> T:
        return await work

    task = asyncio.ensure_future(doing())
    watcher = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (task, watcher):
            waiting.cancel()  # no-op for the one that finished
        await asyncio.gather(task, watcher, return_exceptions=True)
    if task.cancelled():
        raise ClientGone()
    return task.result()


def require_json(request: Request) -> None:
    """`ProtocolError` unsupported_media_type (415) unless the body is declared application/json
    (parameters such as `; charset=utf-8` are fine)."""
    declared = request.headers.get("content-type", "")
    media_type = declared.split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        shown = repr(declared) if declared else "none"
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE, f"the body must be sent as {JSON_MEDIA_TYPE}; its content-type is {shown}"
        )


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The JSON request body (`require_json`); `ProtocolError` message_too_large past `limit`
    bytes, request_timeout when it has not all arrived within `timeout_s` (every route has one:
    a body that never ends must not hold a connection slot for ever)."""
    require_json(request)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"the body is {declared} bytes; the limit is {limit}")
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"the body exceeds the limit of {limit} bytes")
    except TimeoutError:
        raise ProtocolError(
            ErrorCode.REQUEST_TIMEOUT, f"the body did not arrive within {timeout_s:g} s ({len(body)} bytes came)"
        ) from None
    return bytes(body)


def error_response(error: CodedError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=dict(headers or {}))


class StreamingBody:
    """Streams `chunks` as a chunked response (`status`, 200 by default); see the module docstring.

    `on_disconnect` is called when the client left first; `on_failure` with the exception when
    the producer failed (the response is then aborted)."""

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        media_type: str,
        headers: Mapping[str, str] | None = None,
        *,
        on_disconnect: Callable[[], None] | None = None,
        on_failure: Callable[[Exception], None] | None = None,
        status: int = 200,
        lag: ConsumerLag | None = None,
        audio_s: Callable[[], float] | None = None,
    ) -> None:
        """`lag` with `audio_s` (seconds of audio the producer has made so far): each chunk's send
        must keep the client within `lag.max_lag_s` of real time, else the response is aborted
        (`on_failure` gets the `SlowConsumerError`)."""
        self.chunks = chunks
        self.status = status
        self.headers = [(b"content-type", media_type.encode())] + [
            (name.lower().encode(), value.encode()) for name, value in (headers or {}).items()
        ]
        self.on_disconnect = on_disconnect
        self.on_failure = on_failure
        self.lag = lag
        self.audio_s = audio_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        writer = asyncio.create_task(self._write(send), name="voicestream-response-writer")
        watcher = asyncio.create_task(_disconnected(receive), name="voicestream-disconnect-watcher")
        done: set[asyncio.Task[None]] = set()
        try:
            done, _ = await asyncio.wait({writer, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (writer, watcher):
                task.cancel()
            await asyncio.gather(writer, watcher, return_exceptions=True)
        if writer not in done and self.on_disconnect is not None:
            self.on_disconnect()

    async def _write(self, send: Send) -> None:
        sent_audio_s = 0.0
        try:
            async with _closing(self.chunks) as chunks:
                async for chunk in chunks:
                    message = send({"type": "http.response.body", "body": chunk, "more_body": True})
                    if self.lag is None or self.audio_s is None:
                        await message
                        continue
                    made_s = self.audio_s()
                    await self.lag.send(message, made_s - sent_audio_s)
                    sent_audio_s = made_s
        except Exception as error:
            # Returning without the final body message makes the server drop the connection:
            # the client sees an incomplete chunked body, not a truncated one that looks whole.
            if self.on_failure is not None:
                self.on_failure(error)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@contextlib.asynccontextmanager
async def _closing(chunks: AsyncIterator[bytes]) -> AsyncIterator[AsyncIterator[bytes]]:
    """Close an async generator in this task, also when cancelled (its cleanup runs now)."""
    try:
        yield chunks
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
