"""WebSocketTransport: straight to a server's `/invocations-bidirectional-stream` route.

By default the client's JSON messages travel as BINARY frames, exactly as SageMaker's sidecar
delivers payloads sent with data_type BINARY, so a local test exercises the same server path
as production. `frames="text"` sends them as text frames instead (both must work).
"""

from __future__ import annotations

from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidHandshake, InvalidURI

from voicestream.wire.bidi import BIDI_PATH

from .errors import ConnectionLostError, SessionClosedError, SessionConnectError
from .transport import FrameMode, Payload

# Audio frames are small (tens of ms of PCM), but a WAV/MP3 request or a future server may
# send bigger ones; 16 MiB bounds memory without rejecting anything sensible.
_MAX_MESSAGE_BYTES = 16 * 2**20


def route_url(base_url: str, path: str) -> str:
    """`ws://host:port` (or an http URL) → the WebSocket URL of `path` there; a full route is kept."""
    url = base_url.rstrip("/")
    if url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    if not url.endswith(path):
        url += path
    return url


def bidi_url(base_url: str) -> str:
    """`ws://host:port` (or an http URL) → the full bidi route URL; a full route is kept."""
    return route_url(base_url, BIDI_PATH)


def http_base_url(url: str) -> str:
    """The inverse of `bidi_url`: a server's `http://host:port` from its bidi URL (or base URL)."""
    base = url.rstrip("/").removesuffix(BIDI_PATH)
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if base.startswith(ws):
            return http + base[len(ws) :]
    return base


# RFC 6455 "try again later": the server refused the session (busy, or its model still loading).
CLOSE_TRY_AGAIN_LATER = 1013


def _describe_close(exc: ConnectionClosed) -> str:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return "connection dropped without a close frame"
    reason = f" {frame.reason!r}" if frame.reason else ""
    return f"close code {frame.code}{reason}"


def _closed_error(description: str, exc: ConnectionClosed) -> ConnectionLostError | SessionConnectError:
    """A refusal (1013, reason = the server's code) is a connect error: worth retrying later."""
    if exc.rcvd is not None and exc.rcvd.code == CLOSE_TRY_AGAIN_LATER:
        return SessionConnectError(
            f"{description} refused the session: {_describe_close(exc)}", server_code=exc.rcvd.reason or None
        )
    return ConnectionLostError(f"{description}: {_describe_close(exc)}")


class WebSocketTransport:
    """One WebSocket connection to a Kokoro server's bidi route (or another route: `path`)."""

    def __init__(
        self,
        url: str,
        *,
        frames: FrameMode = "binary",
        path: str = BIDI_PATH,
        open_timeout: float | None = None,
        ping_interval: float | None = 20.0,
        **connect_options: Any,
    ) -> None:
        """`url` is the server's base URL or the full route (`path`, default the Kokoro bidi
        route); `frames` is how JSON travels.

        `open_timeout` bounds the TCP + WebSocket handshake (the session's connect timeout
        also bounds it); extra keyword arguments go to `websockets.asyncio.client.connect`.
        """
        if frames not in ("binary", "text"):
            raise ValueError(f"frames must be 'binary' or 'text', not {frames!r}")
        self.url = route_url(url, path)
        self.frames: FrameMode = frames
        self._open_timeout = open_timeout
        self._ping_interval = ping_interval
        self._connect_options = connect_options
        self._ws: ClientConnection | None = None
        self._closed = False

    @property
    def description(self) -> str:
        return f"websocket {self.url} ({self.frames} frames)"

    async def connect(self) -> None:
        if self._ws is not None or self._closed:
            raise SessionClosedError(f"{self.description}: connect() may be called once")
        try:
            self._ws = await connect(
                self.url,
                open_timeout=self._open_timeout,
                ping_interval=self._ping_interval,
                max_size=_MAX_MESSAGE_BYTES,
                compression=None,  # audio does not compress; deflate only costs CPU
                **self._connect_options,
            )
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
            raise SessionConnectError(f"cannot open {self.description}: {exc}") from exc

    def _connection(self) -> ClientConnection:
        if self._ws is None or self._closed:
            raise SessionClosedError(f"{self.description} is not open")
        return self._ws

    async def send(self, payload: Payload) -> None:
        ws = self._connection()
        if isinstance(payload, str) and self.frames == "binary":
            payload = payload.encode("utf-8")
        try:
            await ws.send(payload)
        except ConnectionClosed as exc:
            raise _closed_error(self.description, exc) from exc

    async def receive(self) -> Payload | None:
        ws = self._connection()
        try:
            return await ws.recv()
        except ConnectionClosedOK:
            return None
        except ConnectionClosed as exc:
            raise _closed_error(self.description, exc) from exc

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._ws is not None:
            await self._ws.close()
