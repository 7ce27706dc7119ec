"""The OpenAI-compatible speech API: POST /v1/audio/speech, GET /v1/models, GET /v1/audio/voices.

The contract is `wire.openai_speech`; the audio is the same `AudioStream` POST /invocations and
the bidi session use (sentences synthesized in turn, each streamed as soon as it exists), so the
first bytes leave after the first sentence, not after the whole input. Like /invocations, the
first audio is synthesized before the status line goes out (an engine error up to there is an
honest 4xx/5xx); a failure after that aborts an `audio` body and ends an `sse` one with an
`error` event. SageMaker reaches the same handler through POST /invocations with
CustomAttributes `route=/v1/audio/speech` (invocations.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voicestream.asgi import (
    ClientGone,
    ConsumerLag,
    SlowConsumerError,
    StreamingBody,
    read_body,
    unless_disconnected,
)
from voicestream.engine.base import InvalidRequestError
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server.encoders import content_type
from voicestream.kokoro_server.logs import log_event, request_id_var
from voicestream.kokoro_server.runtime import ServerBusyError, ServerRuntime
from voicestream.kokoro_server.speech import AudioItem, AudioStream, SpeechRequest, check_pronunciation
from voicestream.wire.bidi import DEFAULT_VOICE
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError, public_error
from voicestream.wire.openai_speech import (
    OpenAISpeechRequest,
    audio_delta_event,
    audio_done_event,
    error_event,
    models_body,
    openai_error_body,
    parse_openai_speech_request,
    words_event,
)

SSE_CONTENT_TYPE = "text/event-stream"
# The status logged for a client that left before its response began (nginx's convention).
CLIENT_CLOSED_REQUEST = 499


def openai_error(error: CodedError, param: str | None = None) -> JSONResponse:
    return JSONResponse(openai_error_body(error, param), status_code=error.status)


def pronunciation_error(error: ProtocolError) -> JSONResponse:
    """A bad phoneme symbol: in the lexicon (its message names `lexicon[...]`) or the input's markup."""
    log_event("bad_pronunciation", logging.WARNING, code=error.code)
    return openai_error(error, "lexicon" if error.message.startswith("lexicon") else "input")


async def speech(request: Request) -> Response | StreamingBody:
    runtime: ServerRuntime = request.app.state.runtime
    try:
        body = await read_body(request, runtime.limits.max_message_bytes, runtime.limits.body_timeout_s)
    except ProtocolError as error:
        return openai_error(error)
    return await speech_response(runtime, body, request)


async def speech_response(runtime: ServerRuntime, body: bytes, request: Request) -> Response | StreamingBody:
    """The response to one OpenAI speech body (the route's and /invocations' shared core);
    `request` is watched for the client leaving before the first audio."""
    request_id = uuid.uuid4().hex[:16]
    request_id_var.set(request_id)
    received_at = time.perf_counter()
    if not runtime.ready:
        return openai_error(CodedError(f"the model is {runtime.readiness.value}", code=ErrorCode.NOT_READY, status=503))
    try:
        parsed = parse_openai_speech_request(body, runtime.limits)
        runtime.engine.validate_voice(parsed.voice)
    except ProtocolError as error:
        log_event("bad_openai_speech", logging.WARNING, code=error.code)
        return openai_error(error)
    except InvalidRequestError as error:
        log_event("bad_openai_speech", logging.WARNING, code=error.code)
        return openai_error(error, "voice")
    text_options = TextOptions(normalize=parsed.normalize, lexicon=parsed.lexicon)
    try:
        check_pronunciation(runtime.engine, parsed.input, text_options, None)
    except ProtocolError as error:
        return pronunciation_error(error)
    speech_request = SpeechRequest(
        request_id=request_id,
        text=parsed.input,
        voice=parsed.voice or DEFAULT_VOICE,
        speed=parsed.speed,
        format=parsed.response_format,
        received_at=received_at,
        words=parsed.words,
        sample_rate=parsed.sample_rate,
        text_options=text_options,
    )
    log_event(
        "openai_speech",
        chars=len(parsed.input),
        format=parsed.response_format,
        sample_rate=parsed.sample_rate,
        stream=parsed.stream_format,
    )
    stream = AudioStream(runtime, speech_request)
    items = stream.items()
    # Up to the first audio frame (word timings may come first), errors are still a status.
    try:
        head = await unless_disconnected(request, _head(items))
    except ClientGone:
        await items.aclose()
        log_event("openai_speech_abandoned", logging.WARNING)
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except (InvalidRequestError, ServerBusyError) as error:
        log_event("openai_speech_refused", logging.WARNING, code=error.code)
        return openai_error(error)
    except Exception as error:
        log_event("openai_speech_failed", logging.ERROR, exc_info=True, error=repr(error))
        return openai_error(public_error(error))
    headers = {"x-request-id": request_id, "x-sample-rate": str(parsed.sample_rate), "cache-control": "no-cache"}
    if parsed.stream_format == "sse":
        chunks, media_type = _sse(parsed, stream, _chain(head, items)), SSE_CONTENT_TYPE
    else:
        chunks = _audio(stream, _chain(head, items))
        media_type = content_type(parsed.response_format, parsed.sample_rate)
    lag = ConsumerLag(runtime.limits.max_consumer_lag_s)
    return StreamingBody(chunks, media_type, headers, on_failure=_aborted, lag=lag, audio_s=stream.stats.audio_s)


async def _head(items: AsyncIterator[AudioItem]) -> list[AudioItem]:
    """The items up to and including the first audio frame (word timings may come first)."""
    head: list[AudioItem] = []
    async for item in items:
        head.append(item)
        if isinstance(item, bytes):
            break
    return head


def _aborted(error: Exception) -> None:
    if isinstance(error, SlowConsumerError):
        log_event("openai_speech_aborted", logging.WARNING, code=error.code)
        return
    log_event("openai_speech_aborted", logging.ERROR, exc_info=True, error=repr(error))


async def _chain(head: list[AudioItem], rest: AsyncIterator[AudioItem]) -> AsyncIterator[AudioItem]:
    for item in head:
        yield item
    async for item in rest:
        yield item


async def _audio(stream: AudioStream, items: AsyncIterator[AudioItem]) -> AsyncIterator[bytes]:
    async for item in items:
        if isinstance(item, bytes):
            yield item
    log_event("openai_speech_done", audio_ms=stream.stats.audio_ms, audio_bytes=stream.stats.audio_bytes)


async def _sse(
    parsed: OpenAISpeechRequest, stream: AudioStream, items: AsyncIterator[AudioItem]
) -> AsyncIterator[bytes]:
    try:
        async for item in items:
            if isinstance(item, bytes):
                yield audio_delta_event(item)
            elif parsed.words:
                yield words_event(item)
    except Exception as error:
        log_event("openai_speech_failed", logging.ERROR, exc_info=True, error=repr(error))
        yield error_event(public_error(error))
        return
    log_event("openai_speech_done", audio_ms=stream.stats.audio_ms, audio_bytes=stream.stats.audio_bytes)
    yield audio_done_event(len(parsed.input))


async def models(request: Request) -> JSONResponse:
    return JSONResponse(models_body())


async def voices(request: Request) -> JSONResponse:
    runtime: ServerRuntime = request.app.state.runtime
    if not runtime.ready:
        return openai_error(CodedError(f"the model is {runtime.readiness.value}", code=ErrorCode.NOT_READY, status=503))
    return JSONResponse({"voices": list(runtime.engine.voices()), "default": DEFAULT_VOICE})
