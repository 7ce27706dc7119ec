"""/ping on the real app and a real socket when the engine fails to load (the rest, with the real
Kokoro model: tests/integration/test_server_http.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.support.server import start_server
from voicestream.devserver import ServerStartError, wait_until_ready
from voicestream.engine.base import SpeechEngine
from voicestream.engine.models.assets import AssetError
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits


def test_ping_reports_a_failed_load() -> None:
    def broken() -> SpeechEngine:
        raise AssetError("missing model file /nowhere/kokoro.onnx")

    with start_server(create_app(broken, Limits()), wait_ready=False) as server:
        with pytest.raises(ServerStartError, match="nowhere"):
            wait_until_ready(server.http_url, 30)
        response = httpx.post(f"{server.http_url}/ping")
        assert response.status_code == 503
        assert response.json()["status"] == "failed" and "nowhere" in response.json()["error"]
