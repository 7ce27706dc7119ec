"""The speak function's web app: `POST /speak` streams a spoken reply, `GET /health` says ready.

Deployed, uvicorn runs it behind the Lambda Web Adapter with a RESPONSE_STREAM function URL
(functions/speak/run.sh); locally it runs the same way on any port. The handler only
translates: validate the body (clear 4xx), pick the text source, hand the events of
`run_bidi`/`run_batch` to `EventStreamResponse`, which writes them as SSE or binary frames.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TextIO

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from voicestream.texts import agent_reply

from .config import SpeakConfig
from .events import SpeakEvent
from .request import MAX_BODY_BYTES, SpeakRequest, SpeakRequestError, StreamTransport, parse_speak_request
from .sources import BedrockModelFactory, ReplaySource, StrandsSource, TextSource
from .speak import SpeakOptions, run_speak
from .telemetry import ReplyObserver, Telemetry
from .wire import CONTENT_TYPES, encode_event


class EventStreamResponse(Response):
    """Streams speak events and stops them the moment the caller goes away.

    Starlette's StreamingResponse notices a disconnect only through anyio's cancel scope,
    whose repeated cancellation would also kill the reply's cleanup (cancelling the session
    on the speech server). Here a plain task watches for `http.disconnect` and cancels the
    writer once; the event generator's own cleanup then runs to the end.
    """

    def __init__(
        self,
        events: AsyncGenerator[SpeakEvent],
        transport: StreamTransport,
        observer: ReplyObserver,
        headers: dict[str, str],
    ) -> None:
        self.events = events
        self.transport = transport
        self.observer = observer
        self.status_code = 200
        self.background = None
        self.init_headers(
            {
                "content-type": CONTENT_TYPES[transport],
                "cache-control": "no-cache",
                "x-accel-buffering": "no",  # proxies must not hold the stream back
                **headers,
            }
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        writer = asyncio.create_task(self._write(send), name="speak-writer")
        watcher = asyncio.create_task(_disconnected(receive), name="speak-disconnect")
        try:
            async with self.observer.traced():
                await asyncio.wait({writer, watcher}, return_when=asyncio.FIRST_COMPLETED)
                for task in (writer, watcher):
                    task.cancel()
                await asyncio.gather(writer, watcher, return_exceptions=True)
        finally:
            self.observer.finish()

    async def _write(self, send: Send) -> None:
        async with contextlib.aclosing(self.events) as events:
            async for event in events:
                self.observer.see(event)
                await send(
                    {"type": "http.response.body", "body": encode_event(event, self.transport), "more_body": True}
                )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise SpeakRequestError(413, "body_too_large", f"the body is {declared} bytes; the limit is {MAX_BODY_BYTES}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise SpeakRequestError(413, "body_too_large", f"the body exceeds the limit of {MAX_BODY_BYTES} bytes")
    return bytes(body)


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

    async def speak(request: Request) -> Response:
        cid = telemetry.bind(request.headers)
        headers = {"x-correlation-id": cid}
        try:
            body = parse_speak_request(await _read_body(request))
        except SpeakRequestError as error:
            telemetry.logger.info("speak refused", extra={"status_code": error.status, "code": error.code})
            return _error(error.status, error.code, error.message, headers)
        telemetry.tag(mode=body.mode, transport=body.transport)
        source = text_source(body)
        telemetry.logger.info("speak started", extra={"source": source.name, "tts": config.tts_description})
        options = SpeakOptions(
            voice=body.voice, speed=body.speed, format=body.format, max_duration_s=config.max_duration_s
        )
        events = run_speak(body.mode, source, open_session, options)
        return EventStreamResponse(events, body.transport, telemetry.reply(body.mode, body.transport), headers)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "tts": config.tts_description, "agent": config.agent_description})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, "http_error", str(exc.detail), dict(exc.headers or {}))

    routes = [Route("/speak", speak, methods=["POST"]), Route("/health", health, methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.config = config
    return app
