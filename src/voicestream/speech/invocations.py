"""A small client for POST /invocations: one text in, its audio streamed back.

Both response transports of the contract: "binary" (the encoded audio itself, chunked) and
"sse" (`audio_stream_start`, base64 `audio_chunk`s, `audio_stream_end` or `error`), whose
events are reassembled across delivery chunks by `frames.SSEDecoder`. A response that ends
early (the server aborts the body on a mid-stream failure) raises instead of returning a short
file that looks complete.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from voicestream.wire.bidi import INVOCATIONS_PATH, SAMPLE_RATE, AudioFormat
from voicestream.wire.errors import CodedError, ErrorCode, read_error_body
from voicestream.wire.framing import FrameError, ResponseTransport, SSEDecoder


class InvocationError(CodedError):
    """The server refused or failed the invocation; `code` is the contract's error code."""

    code = ErrorCode.HTTP_ERROR
    status = 502


@dataclass
class InvocationResult:
    """The audio of one invocation and when it arrived (`time.perf_counter()` seconds)."""

    audio: bytes = field(repr=False)
    format: str
    sample_rate: int
    request_id: str | None
    sent_at: float
    first_audio_at: float | None
    completed_at: float
    server_timings: dict[str, Any] = field(default_factory=dict)

    @property
    def first_audio_s(self) -> float | None:
        return None if self.first_audio_at is None else self.first_audio_at - self.sent_at

    @property
    def total_s(self) -> float:
        return self.completed_at - self.sent_at


async def invoke(
    base_url: str,
    text: str,
    *,
    voice: str | None = None,
    speed: float | None = None,
    format: AudioFormat = "pcm",
    sample_rate: int | None = None,
    transport: ResponseTransport = "binary",
    read_timeout: float = 120.0,
    on_audio: Callable[[bytes], None] | None = None,
    client: httpx.AsyncClient | None = None,
) -> InvocationResult:
    """POST `text` to `base_url`/invocations and collect the streamed audio.

    `on_audio` sees each audio chunk as it arrives (to play it while the rest streams);
    `read_timeout` bounds the connect and each read (not the whole response; wrap the call in
    `asyncio.timeout` for that). Raises `InvocationError`.
    """
    if transport not in ("binary", "sse"):
        raise ValueError(f"transport must be 'binary' or 'sse', not {transport!r}")
    body: dict[str, Any] = {"text": text, "format": format, "transport": transport}
    if voice is not None:
        body["voice"] = voice
    if speed is not None:
        body["speed"] = speed
    if sample_rate is not None:
        body["sample_rate"] = sample_rate
    url = base_url.rstrip("/") + INVOCATIONS_PATH
    owned = client is None
    http = client or httpx.AsyncClient(timeout=read_timeout)
    try:
        sent_at = time.perf_counter()
        async with http.stream("POST", url, json=body, timeout=read_timeout) as response:
            if response.status_code != 200:
                raise await _refusal(response)
            reader = _SSEReader(on_audio) if transport == "sse" else _BinaryReader(on_audio)
            async for chunk in response.aiter_bytes():
                reader.feed(chunk)
            result = reader.finish(response.headers)
        result.sent_at = sent_at
        return result
    except httpx.HTTPError as exc:
        raise InvocationError(f"POST {url} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if owned:
            await http.aclose()


async def _refusal(response: httpx.Response) -> InvocationError:
    raw = await response.aread()
    try:
        error = read_error_body(response.json()) if raw else None
    except ValueError:
        error = None
    if error is None:
        message = raw[:200].decode("utf-8", "replace") or response.reason_phrase
        return InvocationError(f"HTTP {response.status_code}: {message}", status=response.status_code)
    return InvocationError(
        f"HTTP {response.status_code}: {error.message}", status=response.status_code, code=error.code
    )


class _BinaryReader:
    def __init__(self, on_audio: Callable[[bytes], None] | None) -> None:
        self._on_audio = on_audio
        self._chunks: list[bytes] = []
        self._first_audio_at: float | None = None

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._first_audio_at is None:
            self._first_audio_at = time.perf_counter()
        self._chunks.append(chunk)
        if self._on_audio is not None:
            self._on_audio(chunk)

    def finish(self, headers: httpx.Headers) -> InvocationResult:
        return InvocationResult(
            audio=b"".join(self._chunks),
            format=headers.get("x-audio-format", "pcm"),
            sample_rate=int(headers.get("x-sample-rate", str(SAMPLE_RATE))),
            request_id=headers.get("x-request-id"),
            sent_at=0.0,
            first_audio_at=self._first_audio_at,
            completed_at=time.perf_counter(),
        )


class _SSEReader:
    def __init__(self, on_audio: Callable[[bytes], None] | None) -> None:
        self._on_audio = on_audio
        self._decoder = SSEDecoder()
        self._chunks: list[bytes] = []
        self._first_audio_at: float | None = None
        self._start: dict[str, Any] | None = None
        self._end: dict[str, Any] | None = None

    def feed(self, chunk: bytes) -> None:
        try:
            events = self._decoder.feed(chunk)
            for event in events:
                self._handle(event.event, event.json())
        except FrameError as exc:
            raise InvocationError(f"malformed SSE stream: {exc}") from exc

    def _handle(self, name: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise InvocationError(f"SSE event {name!r} does not carry a JSON object")
        if name == "audio_stream_start":
            self._start = data
        elif name == "audio_chunk":
            try:
                audio = base64.b64decode(data["data"], validate=True)
            except (KeyError, TypeError, binascii.Error) as exc:
                raise InvocationError(f"audio_chunk without valid base64 data: {exc}") from exc
            if self._first_audio_at is None:
                self._first_audio_at = time.perf_counter()
            self._chunks.append(audio)
            if self._on_audio is not None:
                self._on_audio(audio)
        elif name == "audio_stream_end":
            self._end = data
        elif name == "error":
            code = data.get("code")
            raise InvocationError(
                f"server error [{code}]: {data.get('message')}", code=code if isinstance(code, str) else None
            )

    def finish(self, headers: httpx.Headers) -> InvocationResult:
        try:
            self._decoder.close()
        except FrameError as exc:
            raise InvocationError(f"SSE stream ended early: {exc}") from exc
        if self._end is None:
            raise InvocationError("SSE stream ended without audio_stream_end")
        start = self._start or {}
        return InvocationResult(
            audio=b"".join(self._chunks),
            format=str(start.get("format", headers.get("x-audio-format", "pcm"))),
            sample_rate=int(start.get("sample_rate", SAMPLE_RATE)),
            request_id=start.get("request_id"),
            sent_at=0.0,
            first_audio_at=self._first_audio_at,
            completed_at=time.perf_counter(),
            server_timings=self._end,
        )
