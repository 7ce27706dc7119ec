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
_TIMEOUT_BODY: Final = b"the request headers took too long"
_REQUEST_TIMEOUT_RESPONSE: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    + f"content-length: {len(_TIMEOUT_BODY)}\r\n\r\n".encode()
    + _TIMEOUT_BODY
)

_MAX_MESSAGE_BYTES: Final = Limits().max_message_bytes

logger = logging.getLogger("voicestream.httpserver")


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline for each request's headers (module docstring)."""

    header_timeout_s: float = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_watching()
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


def header_deadline_protocol(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class with this deadline (uvicorn instantiates the class per connection)."""
    if not header_timeout_s > 0:
        raise ValueError(f"header_timeout_s must be positive, got {header_timeout_s!r}")
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": header_timeout_s})


def uvicorn_options(
    header_timeout_s: float = 10.0,
    max_connections: int = 256,
    max_message_bytes: int = _MAX_MESSAGE_BYTES,
) -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run` / `uvicorn.Config`: the limits of the module docstring."""
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, got {max_connections}")
    if max_message_bytes < 1:
        raise ValueError(f"max_message_bytes must be at least 1, got {max_message_bytes}")
    return {
        "http": header_deadline_protocol(header_timeout_s),
        "limit_concurrency": max_connections,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "ws": "websockets-sansio",
        "ws_max_size": max_message_bytes,
        "ws_per_message_deflate": False,
    }
