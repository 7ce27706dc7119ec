"""What clients are told when something fails on the server's side: the code's fixed message
(`wire.errors.FAILURE_MESSAGES`), never the exception's own text (model paths, ARNs); and
hostile voice blends are a coded 400, not a 500. Real server under uvicorn, tone engine that
faults on demand, every route and transport that reports errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.fakes import ToneEngine
from tests.support.server import LiveServer, start_server
from tests.support.session_client import next_frame, send_json
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits
from voicestream.wire.errors import FAILURE_MESSAGES

SECRET = "explode /opt/ml/model/kokoro.onnx arn:aws:iam::123456789012:role/x"
HUGE_BLEND = "af_heart:1e308,af_bella:1e308"


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with start_server(create_app(ToneEngine(fail_on="explode"), Limits()), ready_timeout=60) as live:
        yield live


def sse_events(body: str) -> list[tuple[str, dict[str, object]]]:
    events = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((fields.get("event", ""), json.loads(fields.get("data", "{}"))))
    return events


def test_invocations_sse_names_no_internals(server: LiveServer) -> None:
    body = {"text": f"A sentence long enough to fail halfway: {SECRET}.", "transport": "sse"}
    response = httpx.post(f"{server.http_url}/invocations", json=body, timeout=60)
    (name, error) = sse_events(response.text)[-1]
    assert name == "error" and error["code"] == "synthesis_failed"
    assert error["message"] == FAILURE_MESSAGES["synthesis_failed"] and "arn:aws" not in response.text


def test_openai_speech_sse_names_no_internals(server: LiveServer) -> None:
    body = {"model": "kokoro", "voice": "af_heart", "input": f"Long enough to fail: {SECRET}.", "stream_format": "sse"}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=60)
    assert "/opt/ml" not in response.text and "arn:aws" not in response.text
    assert FAILURE_MESSAGES["synthesis_failed"] in response.text


async def test_a_session_error_names_no_internals(server: LiveServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(
            ws, {"type": "synthesize", "text": f"Long enough to fail halfway: {SECRET}.", "request_id": "r"}
        )
        while (frame := await next_frame(ws)).type != "error":
            pass
    assert frame.control is not None and frame.control["message"] == FAILURE_MESSAGES["synthesis_failed"]


@pytest.mark.parametrize("path", ["/invocations", "/v1/audio/speech"])
def test_an_overflowing_blend_is_a_coded_400(server: LiveServer, path: str) -> None:
    body = {"text": "Hi.", "input": "Hi.", "model": "kokoro", "voice": HUGE_BLEND}
    if path == "/invocations":
        del body["input"], body["model"]
    else:
        del body["text"]
    response = httpx.post(f"{server.http_url}{path}", json=body, timeout=60)
    assert response.status_code == 400, response.text
    assert "weight" in response.text


async def test_an_overflowing_blend_in_a_session_is_a_coded_error(server: LiveServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"type": "synthesize", "text": "Hi.", "voice": HUGE_BLEND, "request_id": "r"})
        frame = await next_frame(ws)
        assert frame.control is not None and frame.control["type"] == "error"
        assert frame.control["code"] == "invalid_request"
        await send_json(ws, {"type": "synthesize", "text": "Still here.", "request_id": "s"})
        assert (await next_frame(ws)).type != "error"
