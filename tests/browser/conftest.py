"""The local stack (`voicestream serve`'s app) on a free port with the real engine, and a real
Chromium driving its page. Both are module-scoped: one model, one browser, several scenarios."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from tests.browser.driver import Browser
from tests.support.server import wait_for_ping
from voicestream.agent.config import SpeakConfig
from voicestream.engine.base import SpeechEngine
from voicestream.local_stack import create_local_app, kokoro_ws_url
from voicestream.protocol import Limits
from voicestream.server.runtime import ServerRuntime

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
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_local_app(
        kokoro_engine, speak_config=SpeakConfig(kokoro_ws_url=kokoro_ws_url("127.0.0.1", port)), limits=Limits()
    )
    server = uvicorn.Server(uvicorn.Config(app, ws="websockets-sansio", log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-local-stack", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ping(url, timeout=300)
        yield LocalStack(url=url, runtime=app.state.runtime)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


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
