"""Hostile clients of the Kokoro server, one coroutine per abuse case of issue 32, for
benchmarks/robustness.py's hostile rows.

Each case opens its clients on real 127.0.0.1 sockets, does its harm and returns once the
server has ended every one of them by its own limits (or the case's cap passed): a Counter of
how each client ended (`408`, `close_1009`, `reset`, `eof`, `still_open` ...). Raw sockets where
a well-behaved client library would not misbehave (trickled bodies, hand-written WebSocket
frames, a client that stops reading with a 4 KiB receive buffer, a TCP reset).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import connect

SMALL_BUFFER = 4096
LONG_TEXT = "This long sentence is spoken to a client that does not listen to it at all. " * 12
BIDI_PATH = "/invocations-bidirectional-stream"
BIG_PAYLOAD = bytes(1 << 20)  # what an oversized frame's client really sends: 1 MiB, allocated once
Ends = Counter[str]


@dataclass(frozen=True)
class Target:
    """Where the hostile clients go, and the limits they run into."""

    port: int
    body_timeout_s: float
    consumer_lag_s: float
    close_timeout_s: float
    proxy_port: int | None = None  # the signing proxy in front of the server (`proxy_client_leaving`)


async def open_socket(
    port: int, receive_buffer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    sock.setblocking(False)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        # asyncio's reader buffers on its own: with a small limit it stops reading soon too.
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    limit = SMALL_BUFFER if receive_buffer is not None else 1 << 16
    return await asyncio.open_connection(sock=sock, limit=limit)


def post_head(path: str, length: int, host: str = "127.0.0.1") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def post_bytes(path: str, body: dict[str, Any], host: str = "127.0.0.1") -> bytes:
    payload = json.dumps(body).encode()
    return post_head(path, len(payload), host) + payload


def reset(writer: asyncio.StreamWriter) -> None:
    """Leave with a TCP reset (an abort), not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def how_it_ended(reader: asyncio.StreamReader, cap_s: float) -> str:
    """Read what is left: `reset`, `eof` (the server closed), or `still_open` at the cap."""
    try:
        async with asyncio.timeout(cap_s):
            while await reader.read(1 << 16):
                pass
    except ConnectionResetError:
        return "reset"
    except TimeoutError:
        return "still_open"
    return "eof"


async def status_of(reader: asyncio.StreamReader, cap_s: float) -> str:
    try:
        async with asyncio.timeout(cap_s):
            line = await reader.readline()
    except (TimeoutError, ConnectionResetError):
        return "no_answer"
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "closed_without_answer"


# --- WebSocket frames by hand ------------------------------------------------------------------


async def ws_handshake(
    port: int, receive_buffer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await open_socket(port, receive_buffer)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET {BIDI_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"the WebSocket handshake failed: {head[:80]!r}")
    return reader, writer


def frame_header(opcode: int, length: int, *, rsv1: bool = False) -> bytes:
    """A masked client frame's header (zero mask: the payload goes as it is)."""
    first = 0x80 | (0x40 if rsv1 else 0) | opcode
    if length < 126:
        sized = struct.pack("!BB", first, 0x80 | length)
    elif length < 1 << 16:
        sized = struct.pack("!BBH", first, 0x80 | 126, length)
    else:
        sized = struct.pack("!BBQ", first, 0x80 | 127, length)
    return sized + b"\0\0\0\0"


async def ws_close_code(reader: asyncio.StreamReader, cap_s: float) -> str:
    """`close_<code>` of the server's close frame (its other frames skipped), or how it ended."""
    try:
        async with asyncio.timeout(cap_s):
            while True:
                head = await reader.readexactly(2)
                opcode, size = head[0] & 0x0F, head[1] & 0x7F
                if size == 126:
                    size = struct.unpack("!H", await reader.readexactly(2))[0]
                elif size == 127:
                    size = struct.unpack("!Q", await reader.readexactly(8))[0]
                payload = await reader.readexactly(size)
                if opcode == 0x8:
                    return f"close_{struct.unpack('!H', payload[:2])[0]}" if len(payload) >= 2 else "close"
    except (asyncio.IncompleteReadError, ConnectionResetError):
        return "reset_or_eof_before_close"
    except TimeoutError:
        return "still_open"


# --- the cases ---------------------------------------------------------------------------------


async def slow_body(target: Target, ends: Ends, clients: int = 16) -> None:
    """Bodies trickled a byte at a time: the body deadline answers 408 and frees the connection."""

    async def one() -> None:
        reader, writer = await open_socket(target.port)
        writer.write(post_head("/v1/audio/speech", 4000) + b"{")
        answer = asyncio.ensure_future(status_of(reader, target.body_timeout_s + 10))
        while not answer.done():
            with contextlib.suppress(OSError):
                writer.write(b" ")
            await asyncio.wait({answer}, timeout=0.25)
        ends[answer.result()] += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(clients)))


async def oversized_frames(target: Target, ends: Ends, clients: int = 8) -> None:
    """Frames declaring a TiB, and 1 MiB of payload really sent: closed 1009 from the header."""

    async def one() -> None:
        reader, writer = await ws_handshake(target.port)
        writer.write(frame_header(0x2, 1 << 40))
        with contextlib.suppress(OSError):
            for start in range(0, len(BIG_PAYLOAD), 1 << 16):
                writer.write(BIG_PAYLOAD[start : start + (1 << 16)])
                await writer.drain()
        ends[await ws_close_code(reader, 10)] += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(clients)))


async def compressed_frames(target: Target, ends: Ends, clients: int = 8) -> None:
    """Frames with RSV1 (permessage-deflate was never agreed): closed 1002, nothing inflated."""

    async def one() -> None:
        reader, writer = await ws_handshake(target.port)
        payload = b"\x00" * 200
        writer.write(frame_header(0x2, len(payload), rsv1=True) + payload)
        ends[await ws_close_code(reader, 10)] += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(clients)))


def _stall_cap(target: Target) -> float:
    """How long a stalled client waits before it looks: the lag limit, two watches of a closing
    connection, and a margin."""
    return target.consumer_lag_s + 3 * target.close_timeout_s + 5.0


async def slow_reader_http(target: Target, ends: Ends, clients: int = 2) -> None:
    """POST /invocations for ~60 s of audio, then never read (4 KiB receive buffer): cut off as
    slow_consumer, and the socket that would never drain aborted."""

    async def one() -> None:
        reader, writer = await open_socket(target.port, SMALL_BUFFER)
        writer.write(post_bytes("/invocations", {"text": LONG_TEXT}))
        await asyncio.sleep(_stall_cap(target))
        ends[await how_it_ended(reader, 5.0)] += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(clients)))


async def slow_reader_ws(target: Target, ends: Ends, clients: int = 2) -> None:
    """Bidi sessions that ask for ~60 s of audio and never read it: closed slow_consumer."""

    async def one() -> None:
        reader, writer = await ws_handshake(target.port, SMALL_BUFFER)
        message = json.dumps({"type": "synthesize", "text": LONG_TEXT}).encode()
        writer.write(frame_header(0x1, len(message)) + message)
        await asyncio.sleep(_stall_cap(target))
        ends[await ws_close_code(reader, 5.0)] += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(clients)))


async def abandoned_clients(target: Target, ends: Ends, clients: int = 8) -> None:
    """Half leave right after sending (before any audio), half reset once their audio began."""

    async def one(n: int) -> None:
        reader, writer = await open_socket(target.port)
        writer.write(post_bytes("/invocations", {"text": f"Caller {n} hangs up. " + LONG_TEXT[:200]}))
        if n % 2:
            await reader.readuntil(b"\r\n\r\n")  # the status line: its first audio exists
            reset(writer)
            ends["reset_mid_stream"] += 1
        else:
            reset(writer)
            ends["left_before_audio"] += 1

    await asyncio.gather(*(one(n) for n in range(clients)))


async def _session(port: int, texts: list[tuple[str, str]], ends: Ends) -> None:
    """A well-formed bidi session that says each (text, voice) and reads every answer."""
    async with connect(f"ws://127.0.0.1:{port}{BIDI_PATH}", max_size=None) as ws:
        for n, (text, voice) in enumerate(texts):
            await ws.send(json.dumps({"type": "synthesize", "text": text, "voice": voice, "request_id": f"r{n}"}))
        done = 0
        while done < len(texts):
            payload = await ws.recv()
            if isinstance(payload, bytes) and payload[:1] != b"{":
                continue
            with contextlib.suppress(ValueError):
                message = json.loads(payload)
                if message.get("type") == "synthesis_complete":
                    ends["complete"] += 1
                    done += 1
                elif message.get("type") == "error":
                    ends[f"error_{message.get('code')}"] += 1
                    done += 1


async def g2p_heavy(target: Target, ends: Ends, clients: int = 2) -> None:
    """Texts whose G2P is the costliest per character ('a-' * 150, one letter with 1,999 accents)."""
    texts = [("a-" * 150, "af_heart"), ("a" + "\u0301" * 1999, "af_heart")]
    await asyncio.gather(*(_session(target.port, texts, ends) for _ in range(clients)))


async def rotating_blends(target: Target, ends: Ends, clients: int = 2, per_client: int = 12) -> None:
    """Short sentences, each in a voice blend nobody used before."""

    def blends(client: int) -> list[tuple[str, str]]:
        return [("Hi.", f"af_heart:{client * per_client + k + 1},af_bella:{per_client - k}") for k in range(per_client)]

    await asyncio.gather(*(_session(target.port, blends(client), ends) for client in range(clients)))


async def bad_input_flood(target: Target, ends: Ends, messages: int = 5000) -> None:
    """One session sends thousands of invalid messages as fast as it can; each is answered with a
    coded error and the log keeps a line per hundred (`bad_input` lines are counted apart)."""
    async with connect(f"ws://127.0.0.1:{target.port}{BIDI_PATH}", max_size=None) as ws:
        for _ in range(messages):
            await ws.send(b"this is not json")
        answered = 0
        async with asyncio.timeout(60):
            while answered < messages:
                payload = await ws.recv()
                with contextlib.suppress(ValueError):
                    if json.loads(payload).get("type") == "error":
                        answered += 1
        ends["errors_answered"] = answered


async def proxy_client_leaving(target: Target, ends: Ends, clients: int = 4) -> None:
    """Browsers that leave the signing proxy mid-stream: the proxy closes its upstream request,
    so the server stops synthesizing for them."""
    if target.proxy_port is None:
        ends["no_proxy"] += 1
        return

    async def one(n: int) -> None:
        assert target.proxy_port is not None
        reader, writer = await open_socket(target.proxy_port)
        body = {"text": f"Browser {n} leaves. " + LONG_TEXT[:300]}
        writer.write(post_bytes("/speak", body, host=f"127.0.0.1:{target.proxy_port}"))
        status = await status_of(reader, 60)
        await reader.readuntil(b"\r\n\r\n")
        await reader.read(1)  # the first audio byte has come through the proxy
        reset(writer)
        ends[f"left_after_{status}"] += 1

    await asyncio.gather(*(one(n) for n in range(clients)))


Case = Callable[[Target, Ends], Awaitable[None]]
CASES: dict[str, tuple[Case, str]] = {
    "slow_body": (slow_body, "16 bodies trickled a byte per 0.25 s (/v1/audio/speech)"),
    "oversized_frames": (oversized_frames, "8 WebSocket frames declaring 1 TiB, 1 MiB of it sent"),
    "compressed_frames": (compressed_frames, "8 WebSocket frames with RSV1 (compressed)"),
    "slow_reader_http": (slow_reader_http, "2 POST /invocations never read (4 KiB receive buffer)"),
    "slow_reader_ws": (slow_reader_ws, "2 bidi sessions whose audio is never read"),
    "abandoned_clients": (abandoned_clients, "8 POST /invocations left before or during their audio (RST)"),
    "g2p_heavy": (g2p_heavy, "2 sessions of G2P-heavy text ('a-' * 150, 1,999 accents)"),
    "rotating_blends": (rotating_blends, "2 sessions × 12 sentences, each in a new voice blend"),
    "bad_input_flood": (bad_input_flood, "one session sending 5,000 invalid messages"),
    "proxy_client_leaving": (proxy_client_leaving, "4 browsers leaving the signing proxy mid-stream"),
}

# The cases whose clients ask for audio: B shares the synthesis workers (and the 2 cores) with
# them, as with any other caller, so its first audio is slower by their share; the others are
# refused at the door and should cost B nothing.
SYNTHESIZING = frozenset(
    {"slow_reader_http", "slow_reader_ws", "abandoned_clients", "g2p_heavy", "rotating_blends", "proxy_client_leaving"}
)
