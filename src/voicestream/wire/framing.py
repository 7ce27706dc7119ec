"""Framing on the wire: control frame vs audio, SSE, and the length-prefixed binary transport.

Three independent codecs, each pure and incremental (bytes in, whole messages out):

- The bidi session's one rule (docs/protocol.md): a frame is control iff its WHOLE payload is UTF-8
  that parses as a JSON object; everything else is audio. `parse_control_frame` applies it on the
  receiving side; `make_audio_frames_safe` lets the server keep its promise that no audio frame
  it sends could be read as control by any reasonable receiver.
- Server-sent events: `encode_sse` and `SSEDecoder`, which reassembles events across arbitrary
  delivery chunks (a chunk may end mid-line, mid-``\\r\\n`` or mid-UTF-8 sequence).
- The speak function's binary transport (docs/frames.md): ``kind (1 byte) | length (4 bytes,
  big-endian) | payload``, decoded by `BinaryFrameDecoder`.

Decoders never drop data silently: `close()` raises `TruncatedStreamError` when the stream ends
inside a message, and garbage raises `FrameError` with a message that says what was wrong.
"""

from __future__ import annotations

import codecs
import enum
import json
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError

ResponseTransport = Literal["binary", "sse"]
"""How a streamed HTTP response carries its content: POST /invocations and POST /speak both
offer raw bytes or length-prefixed frames ("binary") and server-sent events ("sse")."""
RESPONSE_TRANSPORTS: Final[tuple[ResponseTransport, ...]] = ("binary", "sse")

# JSON's insignificant whitespace (RFC 8259, section 2); nothing else may surround a JSON text.
_JSON_WS: Final = b" \t\n\r"
_UTF8_BOM: Final = b"\xef\xbb\xbf"


class FrameError(CodedError, ValueError):
    """A byte stream or payload is not valid in the format that was expected."""

    code = ErrorCode.INVALID_REQUEST


class TruncatedStreamError(FrameError):
    """A stream ended inside a message: the last message would otherwise be lost silently."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode_json_object(payload: bytes | str, what: str = "message") -> dict[str, Any]:
    """The JSON object a client sent (a bidi message, a request body); `ProtocolError` with
    invalid_utf8, invalid_json or not_an_object otherwise. `what` names it in the message."""
    if isinstance(payload, bytes | bytearray | memoryview):
        try:
            text = bytes(payload).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(ErrorCode.INVALID_UTF8, f"{what} is not valid UTF-8: {exc.reason}") from None
    elif isinstance(payload, str):
        text = payload
    else:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{what} must be bytes or str, got {type(payload).__name__}")
    try:
        body = json.loads(text)  # NaN is let through: the field it sits in says why it is wrong
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"{what} is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ProtocolError(ErrorCode.NOT_AN_OBJECT, f"{what} must be a JSON object, got {type(body).__name__}")
    return body


def json_number(value: Any) -> float | None:
    """A JSON number as a finite float, or None for anything else (bools, strings, NaN, and the
    integers JSON allows that no float can hold: those would raise OverflowError downstream)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# --------------------------------------------------------------------------------------------
# Control frame vs audio (bidi session)


def parse_control_frame(payload: bytes | str) -> dict[str, Any] | None:
    """The JSON object a control frame carries, or None when the payload is audio.

    Strict by design: the whole payload must be valid UTF-8 (no BOM) holding one JSON object
    (RFC 8259, so NaN/Infinity are not JSON). JSON arrays, numbers, strings, invalid UTF-8 and
    PCM that merely starts with ``{`` are all audio.
    """
    if isinstance(payload, bytes | bytearray | memoryview):
        raw = bytes(payload)
        # Fast path: a JSON object starts with "{" and ends with "}" (after whitespace), which
        # rules out nearly every audio frame without decoding it.
        if raw.lstrip(_JSON_WS)[:1] != b"{" or raw.rstrip(_JSON_WS)[-1:] != b"}":
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    else:
        text = payload
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and NaN/Infinity; RecursionError is absurd nesting.
        return None
    return value if isinstance(value, dict) else None


def _json_object_verdict(payload: bytes) -> bool | None:
    """Could SOME reasonable receiver read `payload` as a JSON object? None: too deep to tell.

    Deliberately more lenient than `parse_control_frame`, so that False is a guarantee: it
    tolerates a leading BOM and replaces invalid UTF-8 (as browsers' TextDecoder does), and
    accepts NaN and raw control characters in strings.
    """
    raw = payload.lstrip(_JSON_WS)
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :].lstrip(_JSON_WS)
    if raw[:1] != b"{" or raw.rstrip(_JSON_WS)[-1:] != b"}":
        return False
    try:
        value = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
    except ValueError:
        return False
    except RecursionError:
        return None
    return isinstance(value, dict)


def audio_frame_is_safe(payload: bytes) -> bool:
    """True when no receiver could mistake this audio payload for a control frame."""
    return _json_object_verdict(bytes(payload)) is False


def make_audio_frames_safe(payload: bytes, *, sample_width: int = 2) -> list[bytes]:
    """Audio frames that carry `payload` and that no receiver could read as a JSON object.

    Almost always ``[payload]`` unchanged (``[]`` for no bytes). A payload that could parse as
    an object is split into two frames at a multiple of `sample_width` (2 for 16-bit PCM, 1 for
    byte formats such as MP3), which keeps every frame whole samples and the bytes identical.

    Why the split works except for one tiny family: let j be the offset of the object's final
    ``}``, the brace that closes the top level. Cut at k = the largest multiple of
    `sample_width` with k <= j (so k > 0 unless the object starts with ``{}``):
    - the first frame P[:k] lacks that brace. JSON is lexed left to right, so P[:k] yields P's
      tokens up to the cut; in P the depth returns to zero only at offset j, so in P[:k] it
      never does (a token cut in half is an unterminated string or a bare literal inside the
      object, both errors): not an object.
    - the second frame P[k:] starts at most `sample_width - 1` bytes before that brace. With
      width 1 it starts with ``}``: not an object. With width 2 it is one byte plus the brace
      (plus trailing whitespace); that is an object only if the byte is ``{``, and a ``{``
      directly before the closing brace is the opening one, i.e. P is ``{}`` with whitespace.
    That family (``{}`` plus whitespace, at most a few samples) cannot be split at an even
    offset without one half holding ``{}``, so its ``{`` byte, the low byte of a little-endian
    sample, is changed to ``z``: that sample moves by one least significant bit, inaudible.
    Each half is still checked with the lenient parser wherever its nesting is shallow enough
    to parse, so the guarantee does not rest on the argument alone.
    """
    if sample_width not in (1, 2):
        raise ValueError(f"sample_width must be 1 or 2, got {sample_width}")
    data = bytes(payload)
    if len(data) % sample_width:
        raise ValueError(f"audio payload of {len(data)} bytes is not whole {sample_width}-byte samples")
    if not data:
        return []  # nothing to send: an empty frame would carry nothing
    if _json_object_verdict(data) is False:
        return [data]
    closing = len(data.rstrip(_JSON_WS)) - 1  # the top-level "}" (the verdict checked it is there)
    cut = closing - closing % sample_width
    if cut > 0:
        head, tail = data[:cut], data[cut:]
        if _json_object_verdict(head) is not True and _json_object_verdict(tail) is not True:
            return [head, tail]
    opening = data.find(b"{")
    nudged = data[:opening] + b"z" + data[opening + 1 :]
    if _json_object_verdict(nudged) is not False:  # pragma: no cover - unreachable by the argument
        raise AssertionError(f"could not make audio frame safe: {data!r}")
    return [nudged]


# --------------------------------------------------------------------------------------------
# Server-sent events


DEFAULT_MAX_EVENT_CHARS: Final = 8 * 1024 * 1024
# Line breaks that str.splitlines() honours and json.dumps(ensure_ascii=False) leaves raw. They
# can only sit inside JSON strings, where the \uXXXX escape means the same character.
_ESCAPE_UNICODE_BREAKS: Final = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}
_LINE_END: Final = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched server-sent event (WHATWG HTML, "event stream interpretation")."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        """The data field parsed as JSON; FrameError when it is not JSON."""
        try:
            return json.loads(self.data, parse_constant=_reject_constant)
        except ValueError as exc:
            raise FrameError(f"SSE event {self.event!r} data is not JSON: {exc}") from None


def encode_sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One SSE event: ``event: <event>``, then `data` as compact JSON on one ``data:`` line."""
    if not event or len(event.splitlines()) != 1 or event.splitlines()[0] != event:
        raise ValueError(f"SSE event name must be non-empty and single-line, got {event!r}")
    # json.dumps escapes \r, \n and other C0 controls; escape the Unicode line breaks too, so
    # that even a client splitting with str.splitlines() sees one data line.
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    body = body.translate(_ESCAPE_UNICODE_BREAKS)
    return f"event: {event}\ndata: {body}\n\n".encode()


class SSEDecoder:
    """Reassembles server-sent events from a byte stream delivered in arbitrary chunks.

    Follows the WHATWG parsing rules: lines end in ``\\r\\n``, ``\\n`` or ``\\r``; ``:`` starts a
    comment; ``data`` lines of one event are joined with ``\\n``; a blank line dispatches; an
    event without data is not dispatched; unknown fields are ignored; a leading BOM is dropped.
    Deliberate differences: invalid UTF-8 and an event over `max_event_chars` raise
    `FrameError` instead of being patched over, and `close()` raises for a truncated last event
    where a browser would drop it silently.
    """

    def __init__(self, *, max_event_chars: int = DEFAULT_MAX_EVENT_CHARS) -> None:
        self._max_event_chars = max_event_chars
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._line: list[str] = []  # the unfinished line, in pieces (a line may span many chunks)
        self._line_chars = 0
        self._after_cr = False  # the last line ended in \r: a \n that follows belongs to it
        self._at_start = True  # a BOM is dropped only at the very start of the stream
        self._event = ""
        self._data: list[str] = []
        self._data_chars = 0
        self._id: str | None = None
        self._last_id: str | None = None
        self._pending_fields = False  # fields seen since the last dispatch

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one delivered chunk; return the events it completed, in order."""
        try:
            text = self._utf8.decode(bytes(chunk))
        except UnicodeDecodeError as exc:
            raise FrameError(f"SSE stream is not valid UTF-8: {exc}") from None
        if self._at_start and text:
            self._at_start = False
            text = text.removeprefix("\ufeff")
        pos = 0
        if self._after_cr and text:
            self._after_cr = False
            pos = 1 if text[0] == "\n" else 0
        events: list[SSEEvent] = []
        for match in _LINE_END.finditer(text, pos):
            self._append(text[pos : match.start()])
            self._after_cr = match.group() == "\r" and match.end() == len(text)
            event = self._process_line("".join(self._line))
            self._line, self._line_chars = [], 0
            if event is not None:
                events.append(event)
            pos = match.end()
        self._append(text[pos:])
        return events

    def close(self) -> None:
        """Declare the end of the stream; raises TruncatedStreamError if it ended mid-event."""
        try:
            self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise TruncatedStreamError("SSE stream ended inside a UTF-8 sequence") from None
        if self._line_chars:
            line = "".join(self._line)
            raise TruncatedStreamError(f"SSE stream ended inside a line: {line[:80]!r}")
        if self._pending_fields:
            raise TruncatedStreamError("SSE stream ended before the blank line that ends an event")

    def _append(self, piece: str) -> None:
        if not piece:
            return
        self._line.append(piece)
        self._line_chars += len(piece)
        if self._line_chars + self._data_chars > self._max_event_chars:
            raise FrameError(f"SSE event exceeds the limit of {self._max_event_chars} characters")

    def _process_line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        self._pending_fields = True
        if field == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
        elif field == "event":
            self._event = value
        elif field == "id" and "\x00" not in value:
            self._id = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        if self._id is not None:
            self._last_id = self._id
        event = None
        if self._data:
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._last_id)
        self._event, self._data, self._data_chars, self._id = "", [], 0, None
        self._pending_fields = False
        return event


# --------------------------------------------------------------------------------------------
# Length-prefixed binary frames (the speak function's binary transport, docs/frames.md)


class FrameKind(enum.IntEnum):
    EVENT = 0x01  # UTF-8 JSON object: {"event": <name>, ...fields}
    AUDIO = 0x02  # raw audio bytes in the stream's format


BINARY_FRAME_HEADER: Final = struct.Struct(">BI")
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
BINARY_FRAMES_CONTENT_TYPE: Final = "application/vnd.voicestream.wire.framing"


@dataclass(frozen=True, slots=True)
class BinaryFrame:
    kind: FrameKind
    payload: bytes

    def json(self) -> dict[str, Any]:
        """The JSON object of an EVENT frame (the decoder has already validated it)."""
        if self.kind is not FrameKind.EVENT:
            raise FrameError(f"a {self.kind.name} frame carries no JSON")
        value = parse_control_frame(self.payload)
        if value is None:
            raise FrameError("EVENT frame payload is not a UTF-8 JSON object")
        return value


def encode_binary_frame(
    kind: FrameKind | int, payload: bytes, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> bytes:
    """``kind | big-endian uint32 length | payload``; ValueError for an unknown kind or oversize."""
    frame_kind = _frame_kind(kind)
    if len(payload) > max_frame_bytes:
        raise ValueError(f"frame payload of {len(payload)} bytes exceeds the limit of {max_frame_bytes}")
    return BINARY_FRAME_HEADER.pack(frame_kind, len(payload)) + bytes(payload)


def encode_event_frame(event: str, data: Mapping[str, Any]) -> bytes:
    """An EVENT frame holding ``{"event": event, **data}`` as compact UTF-8 JSON."""
    if "event" in data:
        raise ValueError("event data must not have its own 'event' key")
    body = json.dumps({"event": event, **data}, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return encode_binary_frame(FrameKind.EVENT, body.encode())


def _frame_kind(kind: int) -> FrameKind:
    try:
        return FrameKind(kind)
    except ValueError:
        raise FrameError(f"unknown binary frame kind 0x{kind:02x}") from None


class BinaryFrameDecoder:
    """Reassembles binary frames from a byte stream delivered in arbitrary chunks."""

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[BinaryFrame]:
        """Decode one delivered chunk; return the frames it completed, in order.

        Raises FrameError on an unknown kind, a length over the limit, or an EVENT frame that
        is not a JSON object; the stream cannot be resynchronised after that.
        """
        self._buffer += chunk
        frames: list[BinaryFrame] = []
        pos = 0
        header = BINARY_FRAME_HEADER.size
        while len(self._buffer) - pos >= header:
            kind_byte, length = BINARY_FRAME_HEADER.unpack_from(self._buffer, pos)
            kind = _frame_kind(kind_byte)
            if length > self._max_frame_bytes:
                raise FrameError(f"binary frame of {length} bytes exceeds the limit of {self._max_frame_bytes}")
            end = pos + header + length
            if end > len(self._buffer):
                break
            frame = BinaryFrame(kind, bytes(self._buffer[pos + header : end]))
            if kind is FrameKind.EVENT and parse_control_frame(frame.payload) is None:
                raise FrameError("EVENT frame payload is not a UTF-8 JSON object")
            frames.append(frame)
            pos = end
        del self._buffer[:pos]
        return frames

    def close(self) -> None:
        """Declare the end of the stream; raises TruncatedStreamError if it ended mid-frame."""
        if self._buffer:
            raise TruncatedStreamError(
                f"binary frame stream ended with {len(self._buffer)} bytes of an incomplete frame"
            )
