"""Reading the speak function's response: bytes as delivered in, typed speak events out.

`SpeakStreamDecoder("sse" | "binary")` is incremental and transport-agnostic for its caller:
feed it whatever chunks the HTTP client delivers, get `voicestream.agent.events` objects
back (audio decoded from base64, or taken from bare AUDIO frames). `speak_events()` does the
whole POST with httpx. The wire format is described in docs/speak.md.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal

import httpx

from voicestream.agent.events import EVENT_TYPES, AudioChunk, SpeakEvent, SynthesisComplete, from_wire
from voicestream.frames import BinaryFrameDecoder, FrameError, FrameKind, SSEDecoder


class SpeakHTTPError(Exception):
    """The speak function refused the request (a 4xx/5xx with a JSON error body)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} [{code}]: {message}")
        self.status = status
        self.code = code
        self.message = message


class SpeakStreamDecoder:
    def __init__(self, transport: Literal["sse", "binary"]) -> None:
        if transport not in ("sse", "binary"):
            raise ValueError(f"transport must be 'sse' or 'binary', not {transport!r}")
        self.transport = transport
        self._sse = SSEDecoder()
        self._frames = BinaryFrameDecoder()
        self._next_index = 0  # the sentence bare AUDIO frames belong to (binary transport)

    def feed(self, chunk: bytes) -> list[SpeakEvent]:
        """Decode one delivered chunk; FrameError when the stream is not a speak stream.

        Events of unknown names are skipped, so a newer server does not break this client."""
        if self.transport == "sse":
            return [
                self._from_sse(event.event, event.json())
                for event in self._sse.feed(chunk)
                if event.event in EVENT_TYPES
            ]
        events: list[SpeakEvent] = []
        for frame in self._frames.feed(chunk):
            if frame.kind is FrameKind.AUDIO:
                events.append(AudioChunk(index=self._next_index, data=frame.payload))
                continue
            body = frame.json()
            name = body.pop("event", None)
            if not isinstance(name, str):
                raise FrameError('EVENT frame has no "event" name')
            if name not in EVENT_TYPES:
                continue
            event = _typed(name, body)
            if isinstance(event, SynthesisComplete):
                self._next_index = event.index + 1
            events.append(event)
        return events

    def close(self) -> None:
        """The response ended; TruncatedStreamError if it ended inside an event or frame."""
        if self.transport == "sse":
            self._sse.close()
        else:
            self._frames.close()

    @staticmethod
    def _from_sse(name: str, body: Any) -> SpeakEvent:
        if not isinstance(body, dict):
            raise FrameError(f"SSE event {name!r} data is not a JSON object")
        audio = b""
        if name == AudioChunk.event:
            try:
                audio = base64.b64decode(body.pop("audio", ""), validate=True)
            except (binascii.Error, TypeError) as exc:
                raise FrameError(f"audio_chunk audio is not base64: {exc}") from None
        return _typed(name, body, audio)


def _typed(name: str, body: dict[str, Any], audio: bytes = b"") -> SpeakEvent:
    try:
        return from_wire(name, body, audio)
    except ValueError as exc:
        raise FrameError(str(exc)) from None


async def speak_events(
    client: httpx.AsyncClient, url: str, request: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
) -> AsyncGenerator[SpeakEvent]:
    """POST `request` to a speak function's /speak (`url` is its base URL) and yield its events.

    The transport is the request's own (`"transport"`, default sse). Raises `SpeakHTTPError`
    for a refused request, `FrameError` for a malformed or truncated stream.
    """
    transport = request.get("transport", "sse")
    decoder = SpeakStreamDecoder(transport)
    async with client.stream("POST", url.rstrip("/") + "/speak", json=dict(request), headers=headers) as response:
        if response.status_code != 200:
            raise _http_error(response.status_code, await response.aread())
        async for chunk in response.aiter_raw():
            for event in decoder.feed(chunk):
                yield event
    decoder.close()


def _http_error(status: int, body: bytes) -> SpeakHTTPError:
    try:
        detail = json.loads(body)
        return SpeakHTTPError(status, str(detail["error"]), str(detail["message"]))
    except (ValueError, KeyError, TypeError):
        return SpeakHTTPError(status, "http_error", body[:200].decode("utf-8", "replace"))
