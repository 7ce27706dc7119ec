"""The Kokoro inference server: the container's app, and `voicestream serve` locally."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starlette.types import ASGIApp as ASGIApplication

from voicestream.engine.base import SpeechEngine
from voicestream.server.app import create_app
from voicestream.server.config import DEFAULT_HOST, DEFAULT_PORT, ServerConfig

__all__ = ["create_app", "engine_factory", "run", "serve"]


def engine_factory(
    config: ServerConfig, backend: str | None, threads: int | None, model_dir: Path | None
) -> Callable[[], SpeechEngine]:
    """The engine to load in the background: arguments first, then the VOICESTREAM_* environment."""
    from voicestream.engine import create_engine

    backend = backend or config.backend
    threads = threads or config.threads
    model_dir = model_dir or config.model_dir
    return lambda: create_engine(backend, model_dir, threads, config.device)


def serve(app: ASGIApplication, host: str, port: int, config: ServerConfig) -> None:
    """Run an app under uvicorn until interrupted, with our JSON logs (server or local stack)."""
    import uvicorn

    from voicestream.server.logs import logging_config

    uvicorn.run(
        app,
        host=host,
        port=port,
        ws="websockets-sansio",
        log_config=logging_config(config.log_level),
        timeout_graceful_shutdown=5,
    )


def run(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    backend: str | None = None,
    threads: int | None = None,
    model_dir: Path | None = None,
) -> None:
    """Serve until interrupted. Arguments override the VOICESTREAM_* environment (ServerConfig,
    protocol.Limits); the engine loads in the background while /ping answers 503."""
    from voicestream.protocol import Limits

    config = ServerConfig.from_env()
    app = create_app(
        engine_factory(config, backend, threads, model_dir), Limits.from_env(), synth_workers=config.synth_workers
    )
    serve(app, host, port, config)
