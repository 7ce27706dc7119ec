"""The server says where it synthesizes: /ping and every pong name the engine and the device
(what deploy-validate checks through SageMaker). Its refusal to run anywhere else than where it
was told is in tests/unit/test_server_device.py.
"""

from __future__ import annotations

import httpx
from websockets.asyncio.client import connect

from tests.support.server import LiveServer
from tests.support.session_client import next_frame, send_json


def test_ping_names_the_engine_and_device(kokoro_server: LiveServer) -> None:
    answer = httpx.get(f"{kokoro_server.http_url}/ping", timeout=10)
    assert answer.status_code == 200
    body = answer.json()
    # The speed the server measured at start (how fast is the host's business, not the test's).
    assert isinstance(body.pop("real_time_factor"), float) and isinstance(body.pop("faster_than_real_time"), bool)
    assert body == {"status": "ready", "engine": "onnx", "device": "cpu"}


async def test_pong_names_the_engine_and_device(kokoro_server: LiveServer) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"type": "ping"})  # as SageMaker delivers it: a binary frame
        pong = await next_frame(ws, 30)
    assert pong.control == {"type": "pong", "engine": "onnx", "device": "cpu"}
