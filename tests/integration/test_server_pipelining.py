"""Pipelining against a client that reads nothing: request N+1 is synthesized while N's audio
is stuck in the socket, and no further (the server buffers one request ahead, not the queue).

The client is a raw socket (client libraries read eagerly into memory, which would hide the
backpressure), and the server's send buffer is fixed small, so what the connection can absorb
(~75 KB: uvicorn's 64 KiB write buffer plus the kernel's) is less than the first request's audio.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct

from tests.conftest import ServerFactory
from tests.support.server import LiveServer
from voicestream.wire.bidi import BIDI_PATH
from voicestream.wire.framing import parse_control_frame

FIRST = "We will all meet at the old railway station at noon tomorrow."  # ~3.5 s: ~170 KB of PCM


class RawClient:
    """Just enough RFC 6455 for a client that chooses when to read."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {BIDI_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(1)
        assert response.startswith(b"HTTP/1.1 101"), response

    def send_binary(self, payload: bytes) -> None:
        mask = os.urandom(4)
        header = bytes([0x82]) + (
            bytes([0x80 | len(payload)])
            if len(payload) < 126
            else bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        )
        self.sock.sendall(header + mask + bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload)))

    def _exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "connection closed"
            data += chunk
        return bytes(data)

    def receive(self) -> tuple[int, bytes]:
        first, second = self._exactly(2)
        size = second & 0x7F
        if size == 126:
            (size,) = struct.unpack(">H", self._exactly(2))
        elif size == 127:
            (size,) = struct.unpack(">Q", self._exactly(8))
        return first & 0x0F, self._exactly(size)


def sender_is_blocked(server: LiveServer) -> bool:
    """True when a WebSocket connection's writes are paused: its peer is not reading."""

    def paused() -> bool:
        connections = server.running.server.server_state.connections
        return any(not connection.writable.is_set() for connection in connections if hasattr(connection, "writable"))

    return server.on_loop(paused)


async def test_next_request_is_synthesized_while_audio_waits_and_no_further(server_factory: ServerFactory) -> None:
    # no keepalive pings: this client does not read for a while on purpose (slower hosts: longer)
    with server_factory(send_buffer=4096, ws_ping_interval=None) as server:
        stats = server.runtime.stats
        client = RawClient(server.port)
        try:
            for request_id, text in (("p0", FIRST), ("p1", "Yes."), ("p2", "No.")):
                client.send_binary(json.dumps({"text": text, "request_id": request_id}).encode())
            await server.until(lambda live: live.runtime.stats.sentences_started >= 2 and stats.steps_running == 0)
            await server.until(sender_is_blocked)  # p0's audio does not fit: the send task waits
            assert stats.sentences_started == 2, "p1 was synthesized ahead, p2 waits for the client"

            # Now read everything: complete, in order, nothing interleaved.
            sequence: list[str] = []
            audio_bytes = {"p0": 0, "p1": 0, "p2": 0}
            current = ""
            while sequence.count("synthesis_complete") < 3:
                opcode, payload = client.receive()
                control = parse_control_frame(payload)
                if control is None:
                    assert opcode == 0x2 and current
                    audio_bytes[current] += len(payload)
                    continue
                if control["type"] == "queued":
                    # A request still waiting (here: behind the audio the client did not read) is
                    # told so every few seconds (docs/protocol.md); how many depends on the host.
                    continue
                sequence.append(str(control["type"]))
                if control["type"] == "synthesis_start":
                    current = str(control["request_id"])
                else:
                    assert control == {**control, "type": "synthesis_complete", "request_id": current}
                    assert control["audio_bytes"] == audio_bytes[current]
        finally:
            client.sock.close()  # also when an assertion failed: no socket left for a later test's GC
    assert sequence == ["synthesis_start", "synthesis_complete"] * 3
    assert audio_bytes["p0"] > 100_000  # more than the connection could absorb: the premise holds
