"""The edges of HTTP on real sockets: JSON bodies only (415), no CORS, slow headers and slow
bodies timed out, a cap on connections, and huge numbers in POST /speak.

The Kokoro server runs with the uvicorn options `voicestream serve` and the container use
(`voicestream.httpserver.uvicorn_options`), with short deadlines so the tests are quick.
Timing is never asserted: the tests wait (with a hang guard) for what the server does.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.server import LiveServer, start_server
from tests.support.session_client import next_frame, send_json
from tests.support.speak_server import SpeakServer, start_speak_server
from voicestream.engine.base import SpeechEngine
from voicestream.httpserver import uvicorn_options
from voicestream.kokoro_server import create_app
from voicestream.speak.config import SpeakConfig
from voicestream.wire.bidi import Limits

HANG_GUARD_S = 60.0  # only keeps a broken server from hanging the suite; never asserted on
HEADER_TIMEOUT_S = 1.0
BODY = json.dumps({"text": "Hi."})


@pytest.fixture(scope="module")
def edged_server(kokoro_engine: SpeechEngine) -> Iterator[LiveServer]:
    app = create_app(kokoro_engine, Limits(body_timeout_s=1.0))
    with start_server(app, **uvicorn_options(header_timeout_s=HEADER_TIMEOUT_S, max_connections=64)) as server:
        yield server


@pytest.fixture(scope="module")
def speak_server(edged_server: LiveServer) -> Iterator[SpeakServer]:
    with start_speak_server(SpeakConfig(kokoro_ws_url=edged_server.ws_url, service="speak-edges")) as server:
        yield server


def raw_connection(server_url: str) -> socket.socket:
    host, port = server_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=HANG_GUARD_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


# --- JSON only, and no CORS ---------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_invocations_refuses_a_body_that_is_not_declared_json(edged_server: LiveServer, content_type: str) -> None:
    """A web page may POST text/plain cross-origin without a preflight: that must not speak."""
    headers = {} if content_type is None else {"content-type": content_type}
    response = httpx.post(f"{edged_server.http_url}/invocations", content=BODY, headers=headers, timeout=60)
    assert response.status_code == 415
    body = response.json()
    assert body["type"] == "error" and body["code"] == "unsupported_media_type" and body["request_id"]


def test_json_with_a_charset_is_json(edged_server: LiveServer) -> None:
    headers = {"content-type": "Application/JSON; charset=utf-8"}
    response = httpx.post(f"{edged_server.http_url}/invocations", content=BODY, headers=headers, timeout=120)
    assert response.status_code == 200 and response.content


async def test_speak_refuses_a_body_that_is_not_declared_json(speak_server: SpeakServer) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(f"{speak_server.url}/speak", content=BODY, headers={"content-type": "text/plain"})
    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type" and response.headers["x-correlation-id"]


@pytest.mark.parametrize("path", ["/invocations", "/speak"])
def test_no_cors_headers_and_no_preflight(edged_server: LiveServer, speak_server: SpeakServer, path: str) -> None:
    base = edged_server.http_url if path == "/invocations" else speak_server.url
    origin = {"origin": "https://evil.example"}
    preflight = httpx.options(
        base + path,
        headers={**origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type"},
        timeout=60,
    )
    assert preflight.status_code == 405  # no route answers a preflight: the browser never sends the POST
    simple = httpx.post(base + path, content=BODY, headers={**origin, "content-type": "text/plain"}, timeout=60)
    assert simple.status_code == 415
    for response in (preflight, simple):
        assert not [name for name in response.headers if name.lower().startswith("access-control-")]


# --- slow clients ---------------------------------------------------------------------------------


def test_headers_that_never_finish_are_answered_408_and_closed(edged_server: LiveServer) -> None:
    """slowloris: before, 20 such connections stayed open for 60 s (and forever)."""
    with raw_connection(edged_server.http_url) as sock:
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: test\r\nX-Slow: ")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_connection_that_sends_nothing_is_closed(edged_server: LiveServer) -> None:
    with raw_connection(edged_server.http_url) as sock:
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")


def test_a_body_that_never_finishes_is_408_request_timeout(edged_server: LiveServer) -> None:
    with raw_connection(edged_server.http_url) as sock:
        head = (
            "POST /invocations HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"text": "Hi')
        answer = read_until_closed(sock)  # the app answers, then the connection closes
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 408 ")
    body = json.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert body["code"] == "request_timeout" and "12 bytes came" in body["message"]


@pytest.mark.parametrize(
    "head",
    [
        "POST /v1/audio/speech HTTP/1.1\r\n",
        "POST /invocations HTTP/1.1\r\nX-Amzn-SageMaker-Custom-Attributes: route=/v1/audio/speech\r\n",
    ],
)
def test_every_route_has_the_body_deadline(edged_server: LiveServer, head: str) -> None:
    """One reader, one deadline: 256 such bodies held every connection slot, for ever."""
    with raw_connection(edged_server.http_url) as sock:
        sock.sendall(
            (head + "Host: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode()
            + b'{"input": "Hi'
        )
        answer = read_until_closed(sock)
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 408 ")
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"


async def test_a_session_outlives_the_header_deadline(edged_server: LiveServer) -> None:
    """The deadline is for headers only: an upgraded WebSocket is never cut by it."""
    async with connect(edged_server.ws_url) as ws:
        await asyncio.sleep(3 * HEADER_TIMEOUT_S)
        await send_json(ws, {"type": "ping"})
        assert (await next_frame(ws)).type == "pong"


def test_a_keep_alive_connection_serves_a_second_request(edged_server: LiveServer) -> None:
    with httpx.Client(base_url=edged_server.http_url, timeout=60) as client:
        assert client.get("/ping").status_code == 200
        assert client.get("/ping").status_code == 200


# --- the connection cap ---------------------------------------------------------------------------


def test_past_the_connection_cap_requests_are_503(kokoro_engine: SpeechEngine) -> None:
    app = create_app(kokoro_engine, Limits())
    with start_server(app, **uvicorn_options(header_timeout_s=30, max_connections=3)) as server:
        idle = [raw_connection(server.http_url) for _ in range(3)]
        try:
            refused = httpx.get(f"{server.http_url}/ping", timeout=60)
        finally:
            for sock in idle:
                sock.close()
        assert refused.status_code == 503
        with httpx.Client(timeout=60) as client:  # the idle ones are gone: served again
            for _ in range(100):
                if client.get(f"{server.http_url}/ping").status_code == 200:
                    break
            else:
                raise AssertionError("the server never served again after the idle connections closed")


# --- item 1 on POST /speak ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ('{"text": "Hi.", "speed": 1' + "0" * 400 + "}", "invalid_speed"),
        ('{"text": "Hi.", "pace": {"tokens_per_s": 1' + "0" * 400 + "}}", "invalid_pace"),
        ('{"text": "Hi.", "pace": {"first_token_ms": -1' + "0" * 400 + "}}", "invalid_pace"),
    ],
)
async def test_huge_numbers_in_speak_are_coded_400s(speak_server: SpeakServer, raw: str, code: str) -> None:
    """Before: a plain-text 500 without a correlation id."""
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(
            f"{speak_server.url}/speak", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert response.json()["type"] == "error" and response.json()["code"] == code
    assert response.headers["x-correlation-id"]
