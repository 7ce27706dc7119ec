"""uvicorn's settings for the servers voicestream runs (the container, the local stack): the
edges of HTTP, bounded.

- Headers: uvicorn times out idle keep-alive connections only. A client that opens a connection
  and trickles a header byte every few seconds (slowloris) held it forever: 20 such
  connections stayed 60 s. `HeaderDeadlineProtocol` gives every request `header_timeout_s`
  from its first byte (from the connection's start for the first request) to complete its
  headers, then answers 408 and closes.
- Connections: past `max_connections` open HTTP connections uvicorn answers new requests 503
  at once (`limit_concurrency`). WebSocket sessions are counted by the server's own
  `VOICESTREAM_MAX_SESSIONS` instead (upgraded connections leave uvicorn's count).
- Idle keep-alive connections close after `KEEP_ALIVE_S`.
- Closing connections: a response the app aborts (a slow consumer, a failed stream) makes
  uvicorn `close()` the transport, and asyncio's close first flushes what the transport still
  holds: to a client that stopped reading (TCP window full) that is never, so the socket, its
  buffered bytes and its place in `max_connections` were held for good. A closing connection
  whose buffered bytes have not shrunk for `close_timeout_s` is aborted (RST) instead, logged
  `stalled_socket_aborted` with code `slow_consumer`. This also covers an upgraded WebSocket
  connection that is closing to a client that does not read.
- Bodies have their own deadline, in the app (`asgi.read_body`: 408 request_timeout).
- WebSocket messages: uvicorn's default is 16 MiB; ours is the protocol's limit
  (`Limits.max_message_bytes`, 64 KiB), so a frame (or fragmented message) that declares more
  is closed 1009 from its header, before its payload is buffered. permessage-deflate is off:
  audio does not compress, and a compressed frame costs CPU to inflate (refused 1002).
- One implementation: websockets' sans-I/O protocol.

`uvicorn_options` is the one place these are set: `voicestream serve`, the container's
entrypoint (both `kokoro_server.serve`) and every in-process server (`devserver`: the demo,
the benchmarks, the tests) run with it.

The protocol class extends uvicorn's h11 protocol (uvicorn is pinned; tests/integration/
test_http_edges.py holds a slow client to the deadline), and it is used even where httptools
is installed, so the deadline always applies.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from voicestream.wire.bidi import Limits

KEEP_ALIVE_S: Final = 5
CLOSE_TIMEOUT_S: Final = 5.0
_TIMEOUT_BODY: Final = b"the request headers took too long"
_REQUEST_TIMEOUT_RESPONSE: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    + f"content-length: {len(_TIMEOUT_BODY)}\r\n\r\n".encode()
    + _TIMEOUT_BODY
)

_MAX_MESSAGE_BYTES: Final = Limits().max_message_bytes

logger = logging.getLogger("voicestream.httpserver")


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline for each request's headers and one for a closing
    connection's last bytes (module docstring)."""

    header_timeout_s: float = 10.0
    close_timeout_s: float = CLOSE_TIMEOUT_S
    _header_deadline: asyncio.TimerHandle | None = None
    _close_watch: asyncio.TimerHandle | None = None
    _buffered_at_last_look: int = -1

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_headers()
        self._close_watch = self.loop.call_later(self.close_timeout_s, self._look_at_closing)

    def _look_at_closing(self) -> None:
        """Every `close_timeout_s` while the connection lives (the transport's, so this goes on
        after a WebSocket upgrade hands it to another protocol): abort it when it is closing and
        its buffered bytes have not shrunk since the last look."""
        self._close_watch = None
        transport = self.transport
        buffered = transport.get_write_buffer_size()
        if transport.is_closing() and buffered == 0:
            return  # closed, or about to be: nothing left to watch
        if transport.is_closing() and buffered >= self._buffered_at_last_look >= 0:
            logger.warning(
                "stalled_socket_aborted",
                extra={
                    "fields": {"code": "slow_consumer", "buffered_bytes": buffered, "stalled_s": self.close_timeout_s}
                },
            )
            transport.abort()
            return
        self._buffered_at_last_look = buffered if transport.is_closing() else -1
        self._close_watch = self.loop.call_later(self.close_timeout_s, self._look_at_closing)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_watching()
        if self._close_watch is not None:
            self._close_watch.cancel()
            self._close_watch = None
        super().connection_lost(exc)

    def _awaiting_headers(self) -> bool:
        """Between requests (h11's IDLE), on a connection still ours (not upgraded) and open."""
        return (
            self.conn.their_state is h11.IDLE
            and self.transport.get_protocol() is self
            and not self.transport.is_closing()
        )

    def _watch_headers(self) -> None:
        if not self._awaiting_headers():
            self._stop_watching()
        elif self._header_deadline is None:  # counts from the first byte, not from the last
            self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _stop_watching(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self._awaiting_headers():
            return
        logger.warning("request headers not complete within %s s: connection closed", self.header_timeout_s)
        self.transport.write(_REQUEST_TIMEOUT_RESPONSE)
        self.transport.close()


def header_deadline_protocol(
    header_timeout_s: float, close_timeout_s: float = CLOSE_TIMEOUT_S
) -> type[HeaderDeadlineProtocol]:
    """The protocol class with these deadlines (uvicorn instantiates the class per connection)."""
    for name, value in (("header_timeout_s", header_timeout_s), ("close_timeout_s", close_timeout_s)):
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    deadlines = {"header_timeout_s": header_timeout_s, "close_timeout_s": close_timeout_s}
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), deadlines)


def uvicorn_options(
    header_timeout_s: float = 10.0,
    max_connections: int = 256,
    max_message_bytes: int = _MAX_MESSAGE_BYTES,
    close_timeout_s: float = CLOSE_TIMEOUT_S,
) -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run` / `uvicorn.Config`: the limits of the module docstring."""
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, got {max_connections}")
    if max_message_bytes < 1:
        raise ValueError(f"max_message_bytes must be at least 1, got {max_message_bytes}")
    return {
        "http": header_deadline_protocol(header_timeout_s, close_timeout_s),
        "limit_concurrency": max_connections,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "ws": "websockets-sansio",
        "ws_max_size": max_message_bytes,
        "ws_per_message_deflate": False,
    }
