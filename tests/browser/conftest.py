"""The local stack (`voicestream serve`'s app) on a free port with the real engine, and a real
Chromium driving its page. Both are module-scoped: one model, one browser, several scenarios."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.driver import Browser
from voicestream.devserver import bind_free_port, serve_in_thread, wait_until_ready
from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server.runtime import ServerRuntime
from voicestream.local_stack import create_local_app, kokoro_ws_url
from voicestream.speak.config import SpeakConfig
from voicestream.wire.bidi import Limits

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "browser"


@dataclass
class LocalStack:
    url: str
    runtime: ServerRuntime

    def until_idle(self, timeout_s: float = 60.0) -> None:
        """Until the Kokoro server has no open session and no synthesis running."""
        deadline = time.monotonic() + timeout_s
        stats = self.runtime.stats
        while stats.sessions_active or stats.steps_running:
            if time.monotonic() > deadline:
                raise AssertionError(f"the server still works {timeout_s} s later: {stats}")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def local_stack(kokoro_engine: SpeechEngine) -> Iterator[LocalStack]:
    # The socket is bound first so that the speak app can be told its own Kokoro route's URL.
    listener = bind_free_port()
    port = listener.getsockname()[1]
    app = create_local_app(
        kokoro_engine, speak_config=SpeakConfig(kokoro_ws_url=kokoro_ws_url("127.0.0.1", port)), limits=Limits()
    )
    with serve_in_thread(app, "uvicorn-local-stack", listener=listener, lifespan="on") as running:
        wait_until_ready(running.url, 300)
        yield LocalStack(url=running.url, runtime=app.state.runtime)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = Browser()
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
