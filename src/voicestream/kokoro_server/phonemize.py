"""POST /v1/audio/phonemize: what the server would say for a text, as Kokoro phonemes.

So that a user can build a lexicon: phonemize a word, adjust the phonemes, put them in the
lexicon (or send them as phoneme input). The text goes through exactly what synthesis does
(the same sentence split, normalization, lexicon and G2P of the shared front end, the same
phoneme budget and G2P queue, the same body reader and deadline), and the answer's phonemes,
sent back as `phonemes`, are said the same. Errors are the OpenAI routes' body. Through
SageMaker: POST /invocations with CustomAttributes `route=/v1/audio/phonemize` (invocations.py).
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voicestream.asgi import ClientGone, read_body, unless_disconnected
from voicestream.chunker import split_sentences
from voicestream.engine.base import EmptyTextError, InvalidRequestError, TextTooComplexError
from voicestream.engine.text.normalize import normalize_text
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server.logs import log_event
from voicestream.kokoro_server.openai_speech import CLIENT_CLOSED_REQUEST, openai_error, pronunciation_error
from voicestream.kokoro_server.runtime import ServerBusyError, ServerRuntime
from voicestream.kokoro_server.speech import check_pronunciation
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError, public_error
from voicestream.wire.openai_speech import parse_phonemize_request


async def phonemize(request: Request) -> Response:
    runtime: ServerRuntime = request.app.state.runtime
    try:
        body = await read_body(request, runtime.limits.max_message_bytes, runtime.limits.body_timeout_s)
    except ProtocolError as error:
        return openai_error(error)
    return await phonemize_response(runtime, body, request)


async def phonemize_response(runtime: ServerRuntime, body: bytes, request: Request) -> Response:
    """The answer to one phonemize body (the route's and /invocations' with CustomAttributes
    `route=/v1/audio/phonemize`); `request` is watched for the client leaving."""
    if not runtime.ready:
        return openai_error(CodedError(f"the model is {runtime.readiness.value}", code=ErrorCode.NOT_READY, status=503))
    try:
        parsed = parse_phonemize_request(body, runtime.limits)
        runtime.engine.validate_voice(parsed.voice)
    except ProtocolError as error:
        log_event("bad_phonemize", logging.WARNING, code=error.code)
        return openai_error(error)
    except InvalidRequestError as error:
        return openai_error(error, "voice")
    options = TextOptions(normalize=parsed.normalize, lexicon=parsed.lexicon)
    try:
        check_pronunciation(runtime.engine, parsed.input, options, None)
    except ProtocolError as error:
        return pronunciation_error(error)
    # The sentences synthesis would speak (speech.py's AudioStream), each phonemized as it would be.
    sentences = [s for s in split_sentences(parsed.input) or [parsed.input] if normalize_text(s).strip()]
    try:
        if not sentences:
            raise EmptyTextError()
        work = runtime.in_g2p(runtime.engine.phonemize, sentences, parsed.voice, options)
        phonemes = await unless_disconnected(request, work)
        total, limit = sum(map(len, phonemes)), runtime.limits.max_phonemes
        if total > limit:
            raise TextTooComplexError(f"the text is {total} phonemes of speech; one request may have at most {limit}")
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except (InvalidRequestError, ServerBusyError) as error:
        log_event("phonemize_refused", logging.WARNING, code=error.code)
        return openai_error(error, "input")
    except Exception as error:
        log_event("phonemize_failed", logging.ERROR, exc_info=True, error=repr(error))
        return openai_error(public_error(error))
    log_event("phonemize", chars=len(parsed.input), phonemes=total)
    return JSONResponse({"phonemes": " ".join(part for part in phonemes if part)})
