"""The server refuses to run anywhere else than where it was told.

VOICESTREAM_DEVICE=cuda on a machine (or container) where the backend cannot use CUDA must not
quietly fall back to the CPU: /ping stays 503, its body and the log say why, and no session is
served. This machine has no GPU: the refusal is exercised with the onnx backend (CPU only), which
fails before loading any model; the torch backend's own refusal is in tests/torch. Where the
device is usable, /ping and pong name it (tests/integration/test_server_device.py).
"""

from __future__ import annotations

import io
import json
import logging
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.server import start_server
from tests.support.session_client import next_frame
from voicestream.env import ConfigError, Env, ServerSettings, server_settings
from voicestream.kokoro_server import create_app, engine_factory
from voicestream.kokoro_server.logs import capture_json_logs
from voicestream.wire.bidi import Limits


def test_a_device_the_backend_cannot_use_keeps_ping_at_503_and_says_why() -> None:
    settings = server_settings(Env({"VOICESTREAM_BACKEND": "onnx", "VOICESTREAM_DEVICE": "cuda"}))
    logs = io.StringIO()
    handler = capture_json_logs(logs, logging.INFO)
    try:
        with start_server(create_app(engine_factory(settings), Limits()), wait_ready=False) as server:
            deadline = time.monotonic() + 60
            while (answer := httpx.get(f"{server.http_url}/ping", timeout=10)).json()["status"] == "loading":
                assert time.monotonic() < deadline, "the engine neither loaded nor failed"
                time.sleep(0.05)
            again = httpx.get(f"{server.http_url}/ping", timeout=10)
    finally:
        logging.getLogger("voicestream").removeHandler(handler)

    assert answer.status_code == again.status_code == 503
    body = answer.json()
    assert body["status"] == "failed"
    assert "runs on the CPU only, not on 'cuda'" in body["error"]
    events = [json.loads(line) for line in logs.getvalue().splitlines()]
    (failed,) = [e for e in events if e["event"] == "engine_failed"]
    assert failed["level"] == "ERROR" and "not on 'cuda'" in failed["error"]
    assert not [e for e in events if e["event"] == "engine_ready"]


async def test_a_session_is_refused_while_the_device_is_unusable() -> None:
    settings = ServerSettings(backend="onnx", device="cuda")
    with start_server(create_app(engine_factory(settings), Limits()), wait_ready=False) as server:
        async with connect(server.ws_url) as ws:
            error = await next_frame(ws, 30)
    assert error.control is not None and error.control["type"] == "error"
    assert error.control["code"] == "not_ready"


@pytest.mark.parametrize("value", ["gpu", "cuda;rm", "tpu:0"])
def test_an_unknown_device_is_a_clear_configuration_error(value: str) -> None:
    with pytest.raises(ConfigError, match="VOICESTREAM_DEVICE"):
        server_settings(Env({"VOICESTREAM_DEVICE": value}))
    assert server_settings(Env({"VOICESTREAM_DEVICE": " CUDA:1 "})).device == "cuda:1"
    assert server_settings(Env({})).device is None
