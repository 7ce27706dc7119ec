"""The Kokoro inference server: the container's app, and `voicestream serve` locally."""

from __future__ import annotations

from pathlib import Path

from voicestream.server.app import create_app
from voicestream.server.config import DEFAULT_HOST, DEFAULT_PORT, ServerConfig

__all__ = ["create_app", "run"]


def run(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    backend: str | None = None,
    threads: int | None = None,
    model_dir: Path | None = None,
) -> None:
    """Serve until interrupted. Arguments override the VOICESTREAM_* environment (ServerConfig,
    protocol.Limits); the engine loads in the background while /ping answers 503."""
    import uvicorn

    from voicestream.engine import create_engine
    from voicestream.protocol import Limits
    from voicestream.server.logs import logging_config

    config = ServerConfig.from_env()
    backend = backend or config.backend
    threads = threads or config.threads
    model_dir = model_dir or config.model_dir
    app = create_app(
        lambda: create_engine(backend, model_dir, threads),
        Limits.from_env(),
        synth_workers=config.synth_workers,
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        ws="websockets-sansio",
        log_config=logging_config(config.log_level),
        timeout_graceful_shutdown=5,
    )
