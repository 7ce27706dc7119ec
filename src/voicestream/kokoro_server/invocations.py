"""POST /invocations: one text in, its audio streamed out as each sentence is synthesized.

Two transports:
- binary: the encoded audio bytes themselves (pcm, streaming wav or mp3), chunked. A failure
  after the first byte cannot change the status any more, so the response is aborted: the
  connection closes without the final empty chunk and every HTTP client reports an incomplete
  body instead of a short file that looks complete.
- sse: `audio_stream_start`, `audio_chunk` (base64), `audio_stream_end` with timings, or an
  `error` event.

A client that disconnects stops the synthesis after the engine step in flight; one that leaves
before its first audio is noticed too (its request leaves the G2P queue before its turn), and one
that reads the audio more than `max_consumer_lag_s` slower than real time is cut off
(`slow_consumer` in the log, the body aborted).

SageMaker has only this route for streamed requests, so a request whose CustomAttributes
(header `X-Amzn-SageMaker-Custom-Attributes`) hold `route=/v1/audio/speech` carries an
OpenAI speech body and is answered exactly as POST /v1/audio/speech (openai_speech.py);
`route=/v1/audio/phonemize` likewise reaches POST /v1/audio/phonemize (phonemize.py).
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from voicestream.asgi import (
    ClientGone,
    ConsumerLag,
    SlowConsumerError,
    StreamingBody,
    error_response,
    read_body,
    unless_disconnected,
)
from voicestream.engine.base import InvalidRequestError
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server.encoders import content_type
from voicestream.kokoro_server.logs import log_event, request_id_var
from voicestream.kokoro_server.openai_speech import openai_error, speech_response
from voicestream.kokoro_server.phonemize import phonemize_response
from voicestream.kokoro_server.runtime import ServerBusyError, ServerRuntime
from voicestream.kokoro_server.speech import AudioStream, SpeechRequest, check_pronunciation
from voicestream.wire.bidi import DEFAULT_VOICE, parse_invocation_request
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError, public_error
from voicestream.wire.framing import encode_sse
from voicestream.wire.openai_speech import CUSTOM_ATTRIBUTES_HEADER, routes_to_openai_speech, routes_to_phonemize

SSE_CONTENT_TYPE = "text/event-stream"
# The status logged for a client that left before its response began (nginx's convention).
CLIENT_CLOSED_REQUEST = 499


async def invocations(request: Request) -> Any:
    runtime: ServerRuntime = request.app.state.runtime
    if routes_to_openai_speech(request.headers.get(CUSTOM_ATTRIBUTES_HEADER)):
        try:
            body = await read_body(request, runtime.limits.max_message_bytes, runtime.limits.body_timeout_s)
        except ProtocolError as error:
            return openai_error(error)
        return await speech_response(runtime, body, request)
    if routes_to_phonemize(request.headers.get(CUSTOM_ATTRIBUTES_HEADER)):
        try:
            body = await read_body(request, runtime.limits.max_message_bytes, runtime.limits.body_timeout_s)
        except ProtocolError as error:
            return openai_error(error)
        return await phonemize_response(runtime, body, request)
    request_id = uuid.uuid4().hex[:16]
    request_id_var.set(request_id)
    received_at = time.perf_counter()
    if not runtime.ready:
        return error_response(
            CodedError(f"the model is {runtime.readiness.value}", code=ErrorCode.NOT_READY, status=503)
        )
    try:
        body = await read_body(request, runtime.limits.max_message_bytes, runtime.limits.body_timeout_s)
        invocation = parse_invocation_request(body, runtime.limits)
        voice = invocation.voice or DEFAULT_VOICE
        runtime.engine.validate_voice(voice)
        text_options = TextOptions(
            normalize=invocation.normalize, lexicon=invocation.lexicon, phonemes=invocation.phonemes
        )
        check_pronunciation(runtime.engine, invocation.text, text_options, request_id)
    except (ProtocolError, InvalidRequestError) as error:
        error.request_id = request_id
        log_event("bad_invocation", logging.WARNING, code=error.code)
        return error_response(error)
    speech = SpeechRequest(
        request_id=request_id,
        text=invocation.text,
        voice=voice,
        speed=invocation.speed if invocation.speed is not None else 1.0,
        format=invocation.format,
        received_at=received_at,
        sample_rate=invocation.sample_rate,
        text_options=text_options,
    )
    log_event("invocation", transport=invocation.transport, chars=len(speech.text), format=speech.format)
    stream = AudioStream(runtime, speech)
    frames = stream.frames()
    # The first frame is synthesized before the status goes out: an error up to there (say an
    # unsupported language) is still an honest 4xx/5xx, and it costs no latency.
    # Meanwhile the client may leave: then nothing more is done for it.
    try:
        first = await unless_disconnected(request, _first(frames))
    except ClientGone:
        await frames.aclose()
        log_event("invocation_abandoned", logging.WARNING)
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except (InvalidRequestError, ServerBusyError) as error:
        error.request_id = request_id
        log_event("invocation_refused", logging.WARNING, code=error.code)
        return error_response(error)
    except Exception as error:
        log_event("invocation_failed", logging.ERROR, exc_info=True, error=repr(error))
        return error_response(public_error(error, request_id=request_id))
    first_audio_at = time.perf_counter() if first is not None else None
    audio = _prepend(first, frames)
    headers = {
        "x-request-id": request_id,
        "x-audio-format": speech.format,
        "x-sample-rate": str(speech.sample_rate),
        "cache-control": "no-cache",
    }
    if invocation.transport == "sse":
        chunks, media_type = _sse_events(stream, audio, first_audio_at), SSE_CONTENT_TYPE
    else:
        chunks, media_type = (
            _binary_body(stream, audio, first_audio_at),
            content_type(speech.format, speech.sample_rate),
        )
    return StreamingBody(
        chunks,
        media_type,
        headers,
        on_disconnect=_disconnected,
        on_failure=_aborted,
        lag=ConsumerLag(runtime.limits.max_consumer_lag_s),
        audio_s=stream.stats.audio_s,
    )


async def _first(frames: AsyncIterator[bytes]) -> bytes | None:
    return await anext(frames, None)


def _disconnected() -> None:
    log_event("invocation_disconnected", logging.WARNING)


def _aborted(error: Exception) -> None:
    if isinstance(error, SlowConsumerError):
        log_event("invocation_aborted", logging.WARNING, code=error.code)
        return
    log_event("invocation_aborted", logging.ERROR, exc_info=True, error=repr(error))


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
            "sample_rate": request.sample_rate,
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
        public = public_error(error)
        log_event("invocation_failed", logging.ERROR, exc_info=True, code=public.code, error=repr(error))
        yield encode_sse("error", {"code": public.code, "message": public.message, "request_id": request.request_id})
        return
    timings = _timings(stream, first_audio_at)
    log_event("invocation_done", **timings)
    yield encode_sse("audio_stream_end", timings)
