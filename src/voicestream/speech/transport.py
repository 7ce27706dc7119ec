"""The one interface every bidi transport implements.

A transport moves whole messages: one `send` is one WebSocket message (or one SageMaker
payload part), one `receive` returns one message from the server. `str` means a text message
(SageMaker data_type UTF8), `bytes` a binary one (data_type BINARY). Transports raise only
`SessionError` subclasses, so the session has one family of failures to handle.
"""

from __future__ import annotations

from typing import Literal, Protocol

Payload = bytes | str

FrameMode = Literal["binary", "text"]
"""How a transport carries the client's JSON messages. "binary" is what SageMaker's sidecar
does with data_type BINARY (its default), so it is the default everywhere."""


class Transport(Protocol):
    """A bidirectional message pipe to a Kokoro server's session route."""

    @property
    def description(self) -> str:
        """Where this transport goes, for error messages and logs."""
        ...

    async def connect(self) -> None:
        """Open the stream. Raises `SessionConnectError` when it cannot."""
        ...

    async def send(self, payload: Payload) -> None:
        """Send one message. `str` travels in the transport's frame mode; `bytes` as binary."""
        ...

    async def receive(self) -> Payload | None:
        """Wait for the next message; None once the server has ended the stream cleanly.

        Only one task may call this at a time, and a pending call must not be cancelled
        (SageMaker's HTTP/2 stream is corrupted by that): sessions run one reader task.
        """
        ...

    async def close(self) -> None:
        """End the stream from our side and release everything. Idempotent."""
        ...
