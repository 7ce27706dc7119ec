"""The WebSocket transport's own limits (`httpserver.uvicorn_options`), on a real socket with
hand-written frames: whatever a client declares, the server never buffers a message larger
than the protocol's limit, and never inflates a compressed one.

- A frame, or a fragmented message, that declares more than `max_message_bytes` is closed 1009
  from its header: the test sends the header and at most a few bytes of the payload, so a
  server that waited for the payload (uvicorn's default accepts 16 MiB) would hang the test.
- permessage-deflate is never negotiated, and a frame with RSV1 set (compressed) is closed 1002.
- After every refusal the server still serves a new session, and (property test) refusing a
  frame whose MiBs of payload are all sent never holds more than a socket read or two in memory.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import struct
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fakes import ToneEngine
from tests.support.server import LiveServer, start_server
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import BIDI_PATH, Limits

LIMIT = Limits().max_message_bytes
HANG_GUARD_S = 30.0  # only keeps a server that waits for the payload from hanging the suite
CLOSE, TEXT, BINARY, CONTINUATION = 0x8, 0x1, 0x2, 0x0


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with start_server(create_app(ToneEngine(), Limits()), ready_timeout=60) as live:
        yield live


def handshake(port: int) -> tuple[socket.socket, bytes]:
    """Open the bidi route, offering permessage-deflate as browsers do; the socket and the
    server's response head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {BIDI_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, f"closed during the handshake: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock, head.split(b"\r\n\r\n", 1)[0]


def frame_header(opcode: int, length: int, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """A client frame's header (masked, as clients must), declaring `length` payload bytes."""
    first = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    if length < 126:
        sized = struct.pack("!BB", first, 0x80 | length)
    elif length < 1 << 16:
        sized = struct.pack("!BBH", first, 0x80 | 126, length)
    else:
        sized = struct.pack("!BBQ", first, 0x80 | 127, length)
    return sized + b"\0\0\0\0"  # a zero mask: the payload goes as it is


class FrameReader:
    """The server's frames (unmasked), however the bytes are split across reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.data = b""

    def _need(self, size: int) -> None:
        while len(self.data) < size:
            self.data += _recv(self.sock)

    def next(self) -> tuple[int, bytes]:
        """The next frame's opcode and payload."""
        self._need(2)
        opcode, size, offset = self.data[0] & 0x0F, self.data[1] & 0x7F, 2
        if size == 126:
            self._need(4)
            size, offset = struct.unpack("!H", self.data[2:4])[0], 4
        elif size == 127:
            self._need(10)
            size, offset = struct.unpack("!Q", self.data[2:10])[0], 10
        self._need(offset + size)
        payload, self.data = self.data[offset : offset + size], self.data[offset + size :]
        return opcode, payload


def close_code(sock: socket.socket, reader: FrameReader | None = None) -> int:
    """The code of the close frame the server sends (its frames before it skipped)."""
    reader = reader or FrameReader(sock)
    while True:
        opcode, payload = reader.next()
        if opcode == CLOSE:
            return int(struct.unpack("!H", payload[:2])[0])


def _recv(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    assert chunk, "the server closed without a close frame"
    return chunk


def still_serves(server: LiveServer) -> None:
    sock, _ = handshake(server.port)
    with sock:
        sock.sendall(frame_header(BINARY, 2) + b"{}")  # an empty object: an `error` frame, not a close
        opcode, payload = FrameReader(sock).next()
        assert opcode == TEXT and b"unknown_type" in payload, payload


def test_permessage_deflate_is_never_negotiated(server: LiveServer) -> None:
    sock, head = handshake(server.port)
    sock.close()
    assert b"sec-websocket-extensions" not in head.lower()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    declared=st.integers(min_value=LIMIT + 1, max_value=(1 << 63) - 1),
    opcode=st.sampled_from([TEXT, BINARY]),
    sent=st.integers(min_value=0, max_value=64),
)
def test_an_oversized_frame_is_closed_1009_from_its_header(
    server: LiveServer, declared: int, opcode: int, sent: int
) -> None:
    sock, _ = handshake(server.port)
    with sock:
        sock.sendall(frame_header(opcode, declared) + b"x" * sent)
        assert close_code(sock) == 1009


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.integers(min_value=1, max_value=LIMIT),
    extra=st.integers(min_value=1, max_value=LIMIT),
    opcode=st.sampled_from([TEXT, BINARY]),
)
def test_a_fragmented_message_past_the_limit_is_closed_1009(
    server: LiveServer, first: int, extra: int, opcode: int
) -> None:
    """Each fragment within the limit, their sum past it: the message is what counts."""
    second = LIMIT - first + extra
    sock, _ = handshake(server.port)
    with sock:
        sock.sendall(frame_header(opcode, first, fin=False) + b" " * first)
        sock.sendall(frame_header(CONTINUATION, second))
        assert close_code(sock) == 1009


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.binary(min_size=0, max_size=200), opcode=st.sampled_from([TEXT, BINARY]))
def test_a_compressed_frame_is_refused(server: LiveServer, payload: bytes, opcode: int) -> None:
    sock, _ = handshake(server.port)
    with sock:
        sock.sendall(frame_header(opcode, len(payload), rsv1=True) + payload)
        assert close_code(sock) == 1002


def test_the_server_still_serves_after_the_refusals(server: LiveServer) -> None:
    for _ in range(3):
        sock, _ = handshake(server.port)
        with sock:
            sock.sendall(frame_header(BINARY, (1 << 63) - 1))
            assert close_code(sock) == 1009
    still_serves(server)


def test_a_message_at_the_limit_reaches_the_session(server: LiveServer) -> None:
    """The limit is the protocol's own: a message of exactly `max_message_bytes` is read (and
    answered by the session: this one is text_too_long), one byte more is closed 1009."""
    payload = b'{"text": "' + b"a" * (LIMIT - 12) + b'"}'
    assert len(payload) == LIMIT
    sock, _ = handshake(server.port)
    with sock:
        sock.sendall(frame_header(BINARY, LIMIT) + payload)
        reader = FrameReader(sock)
        opcode, reply = reader.next()
        assert opcode == TEXT and b"text_too_long" in reply, reply
        sock.sendall(frame_header(BINARY, LIMIT + 1) + payload + b" ")
        assert close_code(sock, reader) == 1009


# --- memory: a refused frame is never buffered ------------------------------------------------

BIG = 8 << 20  # the largest payload a client below actually sends: far past the limit
_PAYLOAD = bytes(BIG)  # allocated once, before any measurement: sending it allocates nothing new
# What the server may hold at once while refusing, whatever the frame: a socket read or two
# (asyncio reads up to 256 KiB at a time) and the parser's copy; a buffered payload is MiBs.
ALLOWED_PEAK_BYTES = 2 << 20


def send_all_it_takes(sock: socket.socket, data: memoryview) -> None:
    """Send `data` until done or the server closes (it may refuse from the header on)."""
    with contextlib.suppress(OSError):
        sock.sendall(data)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["frame", "fragments", "compressed"]),
    size=st.integers(min_value=4 << 20, max_value=BIG),
    opcode=st.sampled_from([TEXT, BINARY]),
)
def test_a_refused_frame_never_grows_the_servers_memory(server: LiveServer, kind: str, size: int, opcode: int) -> None:
    """Oversized (one frame or fragments within the limit each) or compressed frames whose whole
    payload, MiBs, is sent: the server's peak of allocated memory stays that of one socket read,
    not the payload's, and nothing stays allocated after the refusal."""
    payload = memoryview(_PAYLOAD)[:size]
    sock, _ = handshake(server.port)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        with sock:
            reader = FrameReader(sock)
            if kind == "frame":
                sock.sendall(frame_header(opcode, size))
                send_all_it_takes(sock, payload)
                expected = {1009}
            elif kind == "fragments":  # each fragment at the limit, the message past it
                send_all_it_takes(sock, memoryview(frame_header(opcode, LIMIT, fin=False)))
                send_all_it_takes(sock, payload[:LIMIT])
                for start in range(LIMIT, size, LIMIT):
                    send_all_it_takes(sock, memoryview(frame_header(CONTINUATION, LIMIT, fin=False)))
                    send_all_it_takes(sock, payload[start : start + LIMIT])
                expected = {1009}
            else:  # RSV1: a compressed frame (a deflate bomb would inflate to GiBs): too big or not
                sock.sendall(frame_header(opcode, size, rsv1=True))
                send_all_it_takes(sock, payload)
                expected = {1002, 1009}  # refused for being compressed, or from its declared size first
            assert close_code(sock, reader) in expected
        still_serves(server)
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - before < ALLOWED_PEAK_BYTES, f"{kind}: the server held {peak - before} bytes at once"
    assert after - before < ALLOWED_PEAK_BYTES // 4, f"{kind}: {after - before} bytes stayed allocated"
