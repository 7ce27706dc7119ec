"""The Kokoro inference server: the container's app, and `voicestream serve` locally."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp

from voicestream import env
from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server.app import create_app

__all__ = ["create_app", "engine_factory", "run", "serve", "settings_with"]


def settings_with(**overrides: Any) -> env.ServerSettings:
    """The environment's server settings (`voicestream.env`), with the non-None `overrides`
    (command-line arguments) on top."""
    given = {name: value for name, value in overrides.items() if value is not None}
    return dataclasses.replace(env.server_settings(), **given)


def engine_factory(settings: env.ServerSettings) -> Callable[[], SpeechEngine]:
    """The engine to load in the background (the server answers /ping 503 meanwhile)."""
    from voicestream.engine import G2PSettings, create_engine

    g2p = G2PSettings(workers=settings.g2p_workers, timeout_s=settings.g2p_timeout_s)
    return lambda: create_engine(
        settings.backend,
        settings.model_dir,
        settings.threads,
        settings.device,
        derived_dir=settings.derived_dir,
        decoder_windows=settings.decoder_windows,
        g2p=g2p,
    )


def serve(app: ASGIApp, settings: env.ServerSettings) -> None:
    """Run an app under uvicorn until interrupted, with our JSON logs (server or local stack)
    and the HTTP and WebSocket limits of `voicestream.httpserver` (header deadline, connection
    cap, message size, no compression)."""
    import uvicorn

    from voicestream.httpserver import uvicorn_options
    from voicestream.kokoro_server.logs import logging_config

    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=logging_config(settings.log_level),
        timeout_graceful_shutdown=5,
        **uvicorn_options(settings.header_timeout_s, settings.max_connections, env.limits().max_message_bytes),
    )


def run(settings: env.ServerSettings) -> None:
    """Serve until interrupted; the engine loads in the background while /ping answers 503."""
    app = create_app(engine_factory(settings), env.limits(), synth_workers=settings.synth_workers)
    serve(app, settings)
