"""The local stack's composition: every part answers on its own path, on one port."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient

from tests.browser.conftest import LocalStack
from voicestream.engine.base import AudioChunk, SpeechEngine
from voicestream.engine.text.options import TextOptions
from voicestream.local_stack import WEB_DIR, connect_host, create_local_app, kokoro_ws_url, local_speak_config
from voicestream.speak.config import SpeakConfig


def test_routes_reach_each_part(local_stack: LocalStack) -> None:
    with httpx.Client(base_url=local_stack.url, timeout=30) as client:
        assert client.get("/ping").json()["status"] == "ready"  # the Kokoro server
        assert client.get("/health").json()["status"] == "ok"  # the speak app
        voices = client.get("/voices").json()
        assert voices["default"] == "af_heart"
        assert voices["voices"] == list(local_stack.runtime.engine.voices())
        page = client.get("/")
        assert page.headers["content-type"].startswith("text/html")
        assert page.text == (WEB_DIR / "index.html").read_text()
        for module in ("app.js", "frames.js", "player.js", "pcm-worklet.js"):
            response = client.get(f"/{module}")
            assert response.status_code == 200
            # Browsers refuse ES modules and worklets served with any other type.
            assert response.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
        refused = client.post("/speak", json={"text": "hi", "mdoe": "bidi"})
        assert refused.status_code == 400 and refused.json()["code"] == "unknown_field"
        bad_invocation = client.post("/invocations", json={})
        assert bad_invocation.status_code == 400
        assert client.get("/no-such-file.js").status_code == 404


class BrokenEngine(SpeechEngine):
    name = "broken"

    def _load(self) -> None:
        raise RuntimeError("weights missing")

    def voices(self) -> tuple[str, ...]:
        raise AssertionError("never asked before loading")

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        raise AssertionError("never called")


def test_voices_say_why_while_the_model_is_not_ready() -> None:
    config = SpeakConfig(kokoro_ws_url=kokoro_ws_url("127.0.0.1", 9))
    app = create_local_app(BrokenEngine(), speak_config=config)
    with TestClient(app, base_url="http://127.0.0.1:9") as client:  # its own Host (origins.py)
        deadline = time.monotonic() + 30
        while client.get("/ping").json()["status"] != "failed":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        response = client.get("/voices")
        assert response.status_code == 503
        assert response.json()["code"] == "not_ready"
        assert "weights missing" in response.json()["message"]


@pytest.mark.parametrize(
    ("host", "expected"),
    [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("", "127.0.0.1"), ("::", "[::1]"), ("::1", "[::1]")],
)
def test_connect_host(host: str, expected: str) -> None:
    assert connect_host(host) == expected
    assert kokoro_ws_url(host, 8080) == f"ws://{expected}:8080/invocations-bidirectional-stream"


def test_speak_config_always_targets_the_local_server() -> None:
    env = {"SAGEMAKER_ENDPOINT_NAME": "prod", "AWS_REGION": "eu-west-1", "SPEAK_MAX_DURATION_S": "20"}
    config = local_speak_config("ws://127.0.0.1:8080/invocations-bidirectional-stream", env)
    assert config.kokoro_ws_url == "ws://127.0.0.1:8080/invocations-bidirectional-stream"
    assert config.sagemaker_endpoint is None
    assert config.max_duration_s == 20
