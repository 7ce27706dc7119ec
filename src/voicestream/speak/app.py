"""The speak function's web app: `POST /speak` streams a spoken reply, `GET /health` says ready.

Deployed, uvicorn runs it behind the Lambda Web Adapter with a RESPONSE_STREAM function URL
(functions/speak/run.sh); locally it runs the same way on any port. The handler only
translates: validate the body (clear 4xx), pick the text source, hand the events of
`run_bidi`/`run_batch` to `EventStreamResponse`, which writes them as SSE or binary frames.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TextIO

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from voicestream.asgi import StreamingBody, error_response, read_body
from voicestream.texts import agent_reply
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError
from voicestream.wire.framing import ResponseTransport
from voicestream.wire.speak import CONTENT_TYPES, SpeakEvent, encode_event

from .config import SpeakConfig
from .request import BODY_TIMEOUT_S, MAX_BODY_BYTES, SpeakRequest, parse_speak_request
from .run import SpeakOptions, run_speak
from .sources import BedrockModelFactory, ReplaySource, StrandsSource, TextSource
from .telemetry import ReplyObserver, Telemetry


class EventStreamResponse(StreamingBody):
    """Streams speak events as SSE or binary frames; traced and measured by `observer`."""

    def __init__(
        self,
        events: AsyncGenerator[SpeakEvent],
        transport: ResponseTransport,
        observer: ReplyObserver,
        headers: dict[str, str],
    ) -> None:
        self.observer = observer
        super().__init__(
            _encoded(events, transport, observer),
            CONTENT_TYPES[transport],
            {"cache-control": "no-cache", "x-accel-buffering": "no", **headers},  # proxies must not buffer
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with self.observer.traced():
                await super().__call__(scope, receive, send)
        finally:
            self.observer.finish()


async def _encoded(
    events: AsyncGenerator[SpeakEvent], transport: ResponseTransport, observer: ReplyObserver
) -> AsyncIterator[bytes]:
    async with contextlib.aclosing(events):
        async for event in events:
            observer.see(event)
            yield encode_event(event, transport)


def create_app(
    config: SpeakConfig | None = None, *, log_stream: TextIO | None = None, metrics: bool = True
) -> Starlette:
    """The app; `config` defaults to the environment (ConfigError when it is incomplete).
    Logs go to `log_stream` (default stdout); EMF metrics to stdout unless `metrics` is False."""
    config = config or SpeakConfig.from_env()
    telemetry = Telemetry(config.service, config.metrics_namespace, log_stream, metrics)
    bedrock = BedrockModelFactory(config.bedrock) if config.bedrock else None
    open_session = config.session_factory()

    def text_source(request: SpeakRequest) -> TextSource:
        pace = request.pace or config.replay_pace
        if request.text is not None:
            return ReplaySource(request.text, pace)
        assert request.prompt is not None
        if bedrock is not None:
            return StrandsSource(request.prompt, bedrock)
        return ReplaySource(agent_reply(), pace)  # offline: the canned reply stands in for a model

    async def speak(request: Request) -> JSONResponse | EventStreamResponse:
        cid = telemetry.bind(request.headers)
        headers = {"x-correlation-id": cid}
        try:
            body = parse_speak_request(await read_body(request, MAX_BODY_BYTES, BODY_TIMEOUT_S))
            config.check_request(body.speed, body.format, body.sample_rate)
        except ProtocolError as error:
            telemetry.logger.info("speak refused", extra={"status_code": error.status, "code": error.code})
            return error_response(error, headers)
        telemetry.tag(mode=body.mode, transport=body.transport)
        source = text_source(body)
        telemetry.logger.info("speak started", extra={"source": source.name, "tts": config.tts_description})
        options = SpeakOptions(
            voice=body.voice,
            speed=body.speed,
            format=body.format,
            sample_rate=body.sample_rate,
            max_duration_s=config.max_duration_s,
        )
        events = run_speak(body.mode, source, open_session, options)
        return EventStreamResponse(events, body.transport, telemetry.reply(body.mode, body.transport), headers)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "tts": config.tts_description, "agent": config.agent_description})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = CodedError(str(exc.detail), code=ErrorCode.HTTP_ERROR, status=exc.status_code)
        return error_response(error, exc.headers)

    routes = [Route("/speak", speak, methods=["POST"]), Route("/health", health, methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.config = config
    return app
