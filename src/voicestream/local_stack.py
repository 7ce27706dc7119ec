"""The local stack: what `voicestream serve` (and `make serve`) runs on a laptop, in one process.

One Starlette app on one port composes three apps that are deployed separately on AWS:

- the Kokoro server (`voicestream.kokoro_server`): /ping, POST /invocations, WS /invocations-bidirectional-stream,
  and the OpenAI-compatible /v1/audio/speech, /v1/models, /v1/audio/voices
- the speak function (`voicestream.speak.app`): POST /speak, GET /health; its bidi sessions go to
  this same process's WebSocket route, exactly as the deployed function's go to SageMaker
- the browser client (`voicestream/web/`): the page at /, plus GET /voices for its voice picker

Each sub-app keeps its own routes, middleware and error handling; this module only routes
paths to them and runs the Kokoro server's lifespan (the engine loads in the background while
/ping answers 503). Nothing here re-implements behaviour of the parts it composes.

`voicestream serve --speak-url URL` runs `create_proxy_app` instead: the page, and /speak
forwarded to a deployed speak function URL, SigV4-signed here with the operator's credentials,
so the browser talks to a stack whose URL requires AWS_IAM without ever holding AWS keys. No
model is loaded.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from voicestream.asgi import error_response
from voicestream.aws.function_url import SpeakProxy
from voicestream.engine.base import SpeechEngine
from voicestream.env import Env, ServerSettings, limits
from voicestream.kokoro_server.app import create_app as create_kokoro_app
from voicestream.kokoro_server.runtime import ServerRuntime
from voicestream.origins import RequestGuard, allowed_hosts, is_loopback
from voicestream.speak.app import create_app as create_speak_app
from voicestream.speak.config import SpeakConfig
from voicestream.wire.bidi import BIDI_PATH, DEFAULT_VOICE, Limits
from voicestream.wire.errors import CodedError, ErrorCode
from voicestream.wire.openai_speech import OPENAI_MODELS_PATH, OPENAI_SPEECH_PATH, OPENAI_VOICES_PATH
from voicestream.wire.voices import OFFICIAL_VOICES

WEB_DIR = Path(__file__).parent / "web"


def connect_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to `host` (wildcards via loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def kokoro_ws_url(host: str, port: int) -> str:
    """The URL of this process's own bidi route, for the speak app's sessions."""
    return f"ws://{connect_host(host)}:{port}{BIDI_PATH}"


def local_speak_config(ws_url: str, environ: Mapping[str, str] | None = None) -> SpeakConfig:
    """The speak function's settings from the environment (BEDROCK_MODEL_ID, REPLAY_*, …), but
    always speaking through the local Kokoro server, never a SageMaker endpoint."""
    return SpeakConfig.from_env(Env(environ), kokoro_ws_url=ws_url)


def create_local_app(
    engine: SpeechEngine | Callable[[], SpeechEngine],
    *,
    speak_config: SpeakConfig,
    limits: Limits | None = None,
    synth_workers: int = 2,
    log_stream: TextIO | None = None,
    web_dir: Path = WEB_DIR,
    hosts: Collection[str] | None = None,
) -> Starlette:
    """The composed app. `speak_config.kokoro_ws_url` must point at this app's own bidi route
    (see `kokoro_ws_url`): the port is the caller's to choose, so the caller builds it.
    `hosts`: the Host headers answered (`origins.allowed_hosts`); by default the loopback names
    and the address of `kokoro_ws_url`, with its port. Other origins are refused (origins.py)."""
    if hosts is None:
        own = urlsplit(str(speak_config.kokoro_ws_url))
        hosts = allowed_hosts(own.hostname or "127.0.0.1", own.port or 80)
    kokoro = create_kokoro_app(engine, limits, synth_workers=synth_workers)
    speak = create_speak_app(speak_config, log_stream=log_stream)
    runtime: ServerRuntime = kokoro.state.runtime

    async def voices(request: Request) -> JSONResponse:
        if not runtime.ready:
            message = f"the model is {runtime.readiness.value}" + (f": {runtime.error}" if runtime.error else "")
            return error_response(CodedError(message, code=ErrorCode.NOT_READY, status=503))
        return JSONResponse({"voices": list(runtime.engine.voices()), "default": DEFAULT_VOICE})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with kokoro.router.lifespan_context(kokoro):
            yield

    # A Starlette app given as a route's endpoint is called as a plain ASGI app with the path
    # unchanged, so each sub-app routes, handles errors and finds its own state as it would alone.
    app = Starlette(
        routes=[
            Route("/ping", kokoro),
            Route("/invocations", kokoro),
            WebSocketRoute(BIDI_PATH, kokoro),
            Route(OPENAI_SPEECH_PATH, kokoro),
            Route(OPENAI_MODELS_PATH, kokoro),
            Route(OPENAI_VOICES_PATH, kokoro),
            Route("/speak", speak),
            Route("/health", speak),
            Route("/voices", voices, methods=["GET"]),
            Mount("/", StaticFiles(directory=web_dir, html=True), name="web"),
        ],
        middleware=[Middleware(RequestGuard, hosts=hosts)],
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.kokoro = kokoro
    app.state.speak = speak
    return app


def run(settings: ServerSettings, extra_hosts: Sequence[str] = ()) -> None:
    """Serve the local stack until interrupted (`voicestream serve`); `extra_hosts`: more host
    names it answers for (besides loopback and its bound address)."""
    from voicestream.kokoro_server import engine_factory, serve

    app = create_local_app(
        engine_factory(settings),
        speak_config=local_speak_config(kokoro_ws_url(settings.host, settings.port)),
        limits=limits(),
        synth_workers=settings.synth_workers,
        hosts=allowed_hosts(settings.host, settings.port, extra_hosts),
    )
    print(f"voicestream: the page is at http://{connect_host(settings.host)}:{settings.port}/", flush=True)
    serve(app, settings)


class RemoteBindRefused(CodedError):
    """The signing proxy was asked to listen beyond this machine without saying so."""

    code = "remote_bind_refused"
    status = 400


def create_proxy_app(
    speak_url: str,
    credentials: Any,
    *,
    hosts: Collection[str],
    region: str | None = None,
    web_dir: Path = WEB_DIR,
) -> Starlette:
    """The page, and /speak proxied to a deployed function URL, signed server-side; only for
    the Host names in `hosts` (`origins.allowed_hosts`) and same-origin pages."""
    proxy = SpeakProxy(speak_url, credentials, region=region)

    async def voices(request: Request) -> JSONResponse:
        return JSONResponse({"voices": list(OFFICIAL_VOICES), "default": DEFAULT_VOICE})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "speak": proxy.target, "region": proxy.region})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await proxy.aclose()

    app = Starlette(
        routes=[
            Route("/speak", proxy.handle, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/voices", voices, methods=["GET"]),
            Mount("/", StaticFiles(directory=web_dir, html=True), name="web"),
        ],
        middleware=[Middleware(RequestGuard, hosts=hosts)],
        lifespan=lifespan,
    )
    app.state.proxy = proxy
    return app


def check_proxy_bind(host: str, allow_remote: bool) -> None:
    """`RemoteBindRefused` for a non-loopback address unless `allow_remote`: whoever reaches
    the proxy speaks with the operator's AWS credentials."""
    if not allow_remote and not is_loopback(host):
        raise RemoteBindRefused(
            f"--speak-url signs requests with your AWS credentials: it listens on a loopback address only "
            f"(not {host!r}) unless --allow-remote is given"
        )


def run_proxy(
    settings: ServerSettings,
    speak_url: str,
    region: str | None,
    *,
    allow_remote: bool = False,
    extra_hosts: Sequence[str] = (),
) -> None:
    """Serve the page with /speak proxied to `speak_url` (`voicestream serve --speak-url`)."""
    from voicestream.aws.sigv4 import caller_credentials
    from voicestream.kokoro_server import serve

    check_proxy_bind(settings.host, allow_remote)
    hosts = allowed_hosts(settings.host, settings.port, extra_hosts)
    app = create_proxy_app(speak_url, caller_credentials(), region=region, hosts=hosts)
    host = connect_host(settings.host)
    print(f"voicestream: the page is at http://{host}:{settings.port}/ (speaking through {speak_url})", flush=True)
    serve(app, settings)
