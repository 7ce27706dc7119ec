"""POST /invocations: one text in, its audio streamed out as each sentence is synthesized.

Two transports:
- binary: the encoded audio bytes themselves (pcm, streaming wav or mp3), chunked. A failure
  after the first byte cannot change the status any more, so the response is aborted: the
  connection closes without the final empty chunk and every HTTP client reports an incomplete
  body instead of a short file that looks complete.
- sse: `audio_stream_start`, `audio_chunk` (base64), `audio_stream_end` with timings, or an
  `error` event.

A client that disconnects stops the synthesis after the engine step in flight.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from voicestream.audio import CONTENT_TYPES
from voicestream.engine.base import DEFAULT_VOICE, InvalidRequestError
from voicestream.frames import encode_sse
from voicestream.protocol import (
    SAMPLE_RATE,
    ErrorCode,
    ErrorMessage,
    ProtocolError,
    parse_invocation_request,
    server_message_dict,
)
from voicestream.server.logs import log_event, request_id_var
from voicestream.server.runtime import ServerRuntime
from voicestream.server.stream import AudioStream, SpeechRequest, error_code_of

SSE_CONTENT_TYPE = "text/event-stream"


def error_response(status: int, code: ErrorCode, message: str, request_id: str | None = None) -> JSONResponse:
    body = server_message_dict(ErrorMessage(code=code.value, message=message, request_id=request_id))
    return JSONResponse(body, status_code=status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes without reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"body is {declared} bytes; the limit is {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"body exceeds the limit of {limit} bytes")
    return bytes(body)


async def invocations(request: Request) -> Any:
    runtime: ServerRuntime = request.app.state.runtime
    request_id = uuid.uuid4().hex[:16]
    request_id_var.set(request_id)
    received_at = time.perf_counter()
    if not runtime.ready:
        return error_response(503, ErrorCode.NOT_READY, f"the model is {runtime.readiness.value}")
    try:
        body = await read_body(request, runtime.limits.max_message_bytes)
        invocation = parse_invocation_request(body, runtime.limits)
        voice = invocation.voice or DEFAULT_VOICE
        try:
            runtime.engine.validate_voice(voice)
        except InvalidRequestError as error:
            raise ProtocolError(error_code_of(error), str(error)) from None
    except ProtocolError as error:
        status = 413 if error.code is ErrorCode.MESSAGE_TOO_LARGE else 400
        log_event("bad_invocation", logging.WARNING, code=error.code.value)
        return error_response(status, error.code, error.message, request_id)
    speech = SpeechRequest(
        request_id=request_id,
        text=invocation.text,
        voice=voice,
        speed=invocation.speed if invocation.speed is not None else 1.0,
        format=invocation.format,
        received_at=received_at,
    )
    log_event("invocation", transport=invocation.transport, chars=len(speech.text), format=speech.format)
    stream = AudioStream(runtime, speech)
    frames = stream.frames()
    # The first frame is synthesized before the status goes out: an error up to there (say an
    # unsupported language) is still an honest 4xx/5xx, and it costs no latency.
    try:
        first: bytes | None = await anext(frames)
    except StopAsyncIteration:
        first = None
    except InvalidRequestError as error:
        log_event("invocation_refused", logging.WARNING, code=error.code)
        return error_response(400, error_code_of(error), str(error), request_id)
    except Exception as error:
        log_event("invocation_failed", logging.ERROR, exc_info=True, error=repr(error))
        return error_response(500, ErrorCode.SYNTHESIS_FAILED, f"synthesis failed: {error}", request_id)
    first_audio_at = time.perf_counter() if first is not None else None
    audio = _prepend(first, frames)
    headers = {
        "x-request-id": request_id,
        "x-audio-format": speech.format,
        "x-sample-rate": str(SAMPLE_RATE),
        "cache-control": "no-cache",
    }
    if invocation.transport == "sse":
        return StreamedResponse(_sse_events(stream, audio, first_audio_at), SSE_CONTENT_TYPE, headers)
    return StreamedResponse(_binary_body(stream, audio, first_audio_at), CONTENT_TYPES[speech.format], headers)


async def _prepend(first: bytes | None, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first is not None:
        yield first
    async for frame in rest:
        yield frame


def _timings(stream: AudioStream, first_audio_at: float | None) -> dict[str, Any]:
    received_at = stream.request.received_at
    return {
        "request_id": stream.request.request_id,
        "audio_bytes": stream.stats.audio_bytes,
        "audio_ms": stream.stats.audio_ms,
        "first_audio_ms": None if first_audio_at is None else round((first_audio_at - received_at) * 1000, 1),
        "synth_ms": round(stream.stats.synth_s * 1000, 1),
        "total_ms": round((time.perf_counter() - received_at) * 1000, 1),
    }


async def _binary_body(
    stream: AudioStream, frames: AsyncIterator[bytes], first_audio_at: float | None
) -> AsyncIterator[bytes]:
    async for frame in frames:
        yield frame
    log_event("invocation_done", **_timings(stream, first_audio_at))


async def _sse_events(
    stream: AudioStream, frames: AsyncIterator[bytes], first_audio_at: float | None
) -> AsyncIterator[bytes]:
    request = stream.request
    yield encode_sse(
        "audio_stream_start",
        {
            "request_id": request.request_id,
            "format": request.format,
            "sample_rate": SAMPLE_RATE,
            "voice": request.voice,
        },
    )
    sequence = 0
    try:
        async for frame in frames:
            data = base64.b64encode(frame).decode("ascii")
            yield encode_sse("audio_chunk", {"request_id": request.request_id, "seq": sequence, "data": data})
            sequence += 1
    except Exception as error:
        code = error_code_of(error) if isinstance(error, InvalidRequestError) else ErrorCode.SYNTHESIS_FAILED
        log_event("invocation_failed", logging.ERROR, exc_info=True, code=code.value)
        yield encode_sse("error", _error_data(code, str(error), request.request_id))
        return
    timings = _timings(stream, first_audio_at)
    log_event("invocation_done", **timings)
    yield encode_sse("audio_stream_end", timings)


def _error_data(code: ErrorCode, message: str, request_id: str) -> Mapping[str, Any]:
    return {"code": code.value, "message": message, "request_id": request_id}


class StreamedResponse:
    """A chunked response that stops when the client leaves and aborts when its body fails."""

    def __init__(self, body: AsyncIterator[bytes], media_type: str, headers: Mapping[str, str]) -> None:
        self.body = body
        self.headers = [(b"content-type", media_type.encode())] + [
            (name.encode(), value.encode()) for name, value in headers.items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        streaming = asyncio.ensure_future(self._stream(send))
        disconnected = asyncio.ensure_future(_wait_for_disconnect(receive))
        done: set[asyncio.Future[None]] = set()
        try:
            done, _ = await asyncio.wait({streaming, disconnected}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, disconnected):
                task.cancel()
            await asyncio.gather(streaming, disconnected, return_exceptions=True)
        if streaming not in done:
            log_event("invocation_disconnected", logging.WARNING)

    async def _stream(self, send: Send) -> None:
        try:
            async for chunk in self.body:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except Exception as error:
            # Returning without the final body message makes the server drop the connection:
            # the client sees an incomplete chunked body, not a truncated file that looks whole.
            log_event("invocation_aborted", logging.ERROR, exc_info=True, error=repr(error))
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
