"""The inference server's Starlette app: the routes SageMaker (and everyone else) calls.

- GET|POST /ping: 200 once the engine is loaded and warmed up (the body names the engine, the
  device it runs on and its real-time factor measured at start: runtime.py), 503 before, or for
  good if loading failed (the body and the log say why:
  e.g. VOICESTREAM_DEVICE=cuda where torch sees no GPU)
- POST /invocations: one text in, streamed audio out (invocations.py)
- WS /invocations-bidirectional-stream: the persistent session (session.py)
- POST /v1/audio/speech, GET /v1/models, GET /v1/audio/voices: the OpenAI-compatible speech
  API (openai_speech.py); POST /v1/audio/phonemize: a text's phonemes (phonemize.py)

The handlers only translate; behaviour lives in the runtime, the session and the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicestream import env
from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server import openai_speech
from voicestream.kokoro_server.invocations import invocations
from voicestream.kokoro_server.logs import log_event
from voicestream.kokoro_server.phonemize import phonemize
from voicestream.kokoro_server.runtime import PRODUCTION, WARM_UP_TEXT, Policy, ServerRuntime
from voicestream.kokoro_server.session import CLOSE_TRY_AGAIN_LATER, DISCONNECT_ERRORS, ServerSession
from voicestream.kokoro_server.session_metrics import reporter_from_env
from voicestream.origins import RequestGuard
from voicestream.wire.bidi import BIDI_PATH, INVOCATIONS_PATH, PING_PATH, Limits, SessionClosed, encode_server_message
from voicestream.wire.errors import ErrorCode, ErrorMessage
from voicestream.wire.openai_speech import OPENAI_MODELS_PATH, OPENAI_SPEECH_PATH, OPENAI_VOICES_PATH, PHONEMIZE_PATH


async def ping(request: Request) -> JSONResponse:
    runtime: ServerRuntime = request.app.state.runtime
    if runtime.ready:
        speed = runtime.speed.report() if runtime.speed is not None else {}
        return JSONResponse({"status": "ready", **runtime.identity(), **speed})
    body = {"status": runtime.readiness.value, "error": runtime.error}
    return JSONResponse(body, status_code=503)


async def bidirectional_stream(websocket: WebSocket) -> None:
    runtime: ServerRuntime = websocket.app.state.runtime
    await websocket.accept()
    if not runtime.ready:
        await _refuse(websocket, ErrorCode.NOT_READY, f"the model is {runtime.readiness.value}")
        return
    if not runtime.try_open_session():
        log_event("session_refused", active=runtime.stats.sessions_active)
        await _refuse(
            websocket, ErrorCode.SERVER_BUSY, f"{runtime.limits.max_sessions} sessions are open: try again later"
        )
        return
    try:
        await ServerSession(runtime, websocket).run()
    finally:
        runtime.close_session()


async def _refuse(websocket: WebSocket, code: ErrorCode, message: str) -> None:
    """Tell the client why, then close with 1013 (try again later)."""
    with contextlib.suppress(*DISCONNECT_ERRORS):
        await websocket.send_text(encode_server_message(ErrorMessage(code=code, message=message)))
        await websocket.send_text(encode_server_message(SessionClosed(reason=code)))
        await websocket.close(CLOSE_TRY_AGAIN_LATER, code.value)


def create_app(
    engine: SpeechEngine | Callable[[], SpeechEngine],
    limits: Limits | None = None,
    synth_workers: int = 2,
    warm_up_text: str = WARM_UP_TEXT,
    allowed_origins: Collection[str] | None = None,
    policy: Policy = PRODUCTION,
) -> Starlette:
    """The server app. `engine` may be an engine or a factory; either way it is loaded and
    warmed up in the background after startup, while /ping answers 503. `policy`: production's
    unless a benchmark builds a baseline (runtime.Policy).

    A WebSocket handshake with an Origin (a web page's) is refused 403 unless the origin is in
    `allowed_origins` (default: VOICESTREAM_ALLOWED_ORIGINS, none); SageMaker's sidecar and SDK
    clients send no Origin (voicestream.origins)."""
    origins = env.allowed_origins() if allowed_origins is None else allowed_origins
    runtime = ServerRuntime(engine, limits or env.limits(), synth_workers, warm_up_text, policy=policy)
    metrics = reporter_from_env(lambda: runtime.stats.sessions_active, runtime.limits.max_sessions)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loading = asyncio.create_task(runtime.start(), name="voicestream-engine-load")
        if metrics is not None:
            metrics.start()
        try:
            yield
        finally:
            if metrics is not None:
                metrics.stop()
            loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loading
            runtime.close()

    app = Starlette(
        routes=[
            Route(PING_PATH, ping, methods=["GET", "POST"]),
            Route(INVOCATIONS_PATH, invocations, methods=["POST"]),
            WebSocketRoute(BIDI_PATH, bidirectional_stream),
            Route(OPENAI_SPEECH_PATH, openai_speech.speech, methods=["POST"]),
            Route(OPENAI_MODELS_PATH, openai_speech.models, methods=["GET"]),
            Route(OPENAI_VOICES_PATH, openai_speech.voices, methods=["GET"]),
            Route(PHONEMIZE_PATH, phonemize, methods=["POST"]),
        ],
        middleware=[Middleware(RequestGuard, origins=origins, http_origins=False)],
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.session_metrics = metrics
    return app
