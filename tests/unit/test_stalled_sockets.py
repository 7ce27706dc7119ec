"""A streaming HTTP response whose client stops reading, or leaves mid-stream, gives back its
synthesis slot, its memory and its connection, and the server goes on serving others (issue 32).

Real sockets: the server's accepted sockets get a 4 KiB send buffer and the client a 4 KiB
receive buffer, so a client that reads nothing fills the TCP window within kilobytes. The app
then aborts the response (slow_consumer, asgi.ConsumerLag) and uvicorn closes the transport,
which would wait for ever to flush its buffered bytes to a client that never reads:
httpserver.py aborts a closing connection whose buffered bytes stop shrinking.

Verdicts are states reached (no connection left, no step running, the coded log line), each
waited for with a generous hang guard, never a measured time.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes import ToneEngine
from tests.support.server import LiveServer, start_server
from voicestream.httpserver import uvicorn_options
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.logs import capture_json_logs
from voicestream.wire.bidi import BIDI_PATH, Limits

HANG_GUARD_S = 30.0
SMALL_BUFFER = 4096
LONG_TEXT = "Nobody reads this sentence. " * 12  # 100 ms of tone a character: ~34 s of audio
ROUTES = [
    ("/invocations", {}),
    ("/v1/audio/speech", {"model": "kokoro", "voice": "af_heart"}),
]


def body_for(path: str, extra: dict[str, Any], text: str) -> dict[str, Any]:
    return {**extra, ("text" if path == "/invocations" else "input"): text}


def post(port: int, path: str, body: dict[str, Any], receive_buffer: int | None = None) -> socket.socket:
    """A POST on a real socket (with a small receive buffer if given), its reply left unread."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(HANG_GUARD_S)
    sock.connect(("127.0.0.1", port))
    payload = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    sock.sendall(head.encode() + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return sock


def whole_reply(sock: socket.socket) -> bytes:
    reply = b""
    while not reply.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    sock.close()
    return reply


def names(stream: io.StringIO) -> list[str]:
    return [event["event"] for event in events(stream)]


def connections(server: LiveServer) -> int:
    return server.on_loop(lambda: len(server.running.server.server_state.connections))


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = capture_json_logs(stream)
    try:
        yield stream
    finally:
        handler.close()
        logging.getLogger("voicestream").removeHandler(handler)


def events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


@pytest.fixture
def server() -> Iterator[LiveServer]:
    app = create_app(ToneEngine(ms_per_char=100), Limits(max_consumer_lag_s=0.3))
    options = uvicorn_options(close_timeout_s=0.5)
    with start_server(app, ready_timeout=HANG_GUARD_S, send_buffer=SMALL_BUFFER, **options) as live:
        yield live


@pytest.mark.parametrize(("path", "extra"), ROUTES)
def test_a_client_that_stops_reading_loses_its_socket_and_others_are_served(
    server: LiveServer, logs: io.StringIO, path: str, extra: dict[str, Any]
) -> None:
    stalled = post(server.port, path, body_for(path, extra, LONG_TEXT), receive_buffer=SMALL_BUFFER)
    try:
        # The response is aborted (slow_consumer), then its connection, whose bytes never drain.
        # Waited for by its log line first: before the server has accepted the socket, it counts
        # no connection either.
        server.wait_until(lambda live: "stalled_socket_aborted" in names(logs), HANG_GUARD_S)
        server.wait_until(lambda live: connections(live) == 0, HANG_GUARD_S)
        # The server goes on: another client is served to the end.
        reply = whole_reply(post(server.port, path, body_for(path, extra, "Somebody reads this.")))
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"0\r\n\r\n")
        server.wait_until(lambda live: live.runtime.stats.steps_running == 0, HANG_GUARD_S)
    finally:
        stalled.close()
    seen = events(logs)
    aborted = [event for event in seen if event["event"] in ("invocation_aborted", "openai_speech_aborted")]
    assert [event.get("code") for event in aborted] == ["slow_consumer"]
    stalled_lines = [event for event in seen if event["event"] == "stalled_socket_aborted"]
    assert len(stalled_lines) == 1 and stalled_lines[0]["code"] == "slow_consumer"
    assert stalled_lines[0]["buffered_bytes"] > 0


@pytest.mark.parametrize(("path", "extra"), ROUTES)
def test_a_client_that_aborts_mid_stream_stops_its_synthesis_and_others_are_served(
    server: LiveServer, path: str, extra: dict[str, Any]
) -> None:
    engine = server.runtime.engine
    assert isinstance(engine, ToneEngine)
    made_before = engine.chunks_made
    leaving = post(server.port, path, body_for(path, extra, LONG_TEXT), receive_buffer=SMALL_BUFFER)
    assert leaving.recv(1024).startswith(b"HTTP/1.1 200")  # its audio has begun
    leaving.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    leaving.close()  # an abort: RST, not FIN
    server.wait_until(lambda live: connections(live) == 0, HANG_GUARD_S)
    server.wait_until(lambda live: live.runtime.stats.steps_running == 0, HANG_GUARD_S)
    made = engine.chunks_made - made_before
    whole = -(-engine.samples_for(LONG_TEXT) // engine.chunk_samples)
    assert made < whole / 2  # synthesis stopped when the client left, far from the text's end
    reply = whole_reply(post(server.port, path, body_for(path, extra, "Somebody reads this.")))
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"0\r\n\r\n")


def test_a_bidi_session_that_stops_reading_loses_its_socket_and_others_are_served(
    server: LiveServer, logs: io.StringIO
) -> None:
    """The same over the WebSocket: the session ends slow_consumer (close 1008), and its
    connection, whose close frame cannot go out, is reset once its bytes stop draining."""
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    stalled.settimeout(HANG_GUARD_S)
    stalled.connect(("127.0.0.1", server.port))
    key = base64.b64encode(os.urandom(16)).decode()
    stalled.sendall(
        (
            f"GET {BIDI_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:  # the upgrade's answer, before any frame
        head += stalled.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    message = json.dumps({"type": "synthesize", "text": LONG_TEXT}).encode()
    # One masked text frame (zero mask: the payload as it is); the reply is never read.
    stalled.sendall(struct.pack("!BBH", 0x81, 0x80 | 126, len(message)) + b"\0\0\0\0" + message)
    try:
        server.wait_until(lambda live: connections(live) == 0, HANG_GUARD_S)
        reply = whole_reply(post(server.port, "/invocations", {"text": "Somebody reads this."}))
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"0\r\n\r\n")
    finally:
        stalled.close()
    seen = [event["event"] for event in events(logs)]
    assert "session_slow_consumer" in seen and "stalled_socket_aborted" in seen
