"""The speak function's stream (POST /speak, docs/speak.md): typed events and both codecs.

Times (`t_ms`) are milliseconds since `agent_start`, on the speak function's clock. Audio
lives in `SentenceAudio.data`; each transport carries it its own way, so `event_fields` leaves
it out:

- SSE: one event per speak event, its fields as JSON; an `audio_chunk` carries its audio as
  base64 in `audio`.
- Binary (docs/frames.md): an EVENT frame per event, except audio, which travels as bare AUDIO
  frames of raw bytes; an AUDIO frame belongs to the sentence after the last
  `synthesis_complete` (sentences are spoken in order and their audio never interleaves).

`encode_event` writes either; `SpeakStreamDecoder` reads either, incrementally, from whatever
chunks an HTTP client delivers. Standard library only: the Lambda function and every client
import this without numpy or the engine.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_args

from voicestream.wire.errors import CodedError, ErrorCode
from voicestream.wire.framing import (
    BINARY_FRAMES_CONTENT_TYPE,
    BinaryFrameDecoder,
    FrameError,
    FrameKind,
    ResponseTransport,
    SSEDecoder,
    encode_binary_frame,
    encode_event_frame,
    encode_sse,
)
from voicestream.wire.words import WordTiming, parse_words, word_dicts

Mode = Literal["bidi", "batch"]
"""bidi: each sentence is spoken the moment it is cut; batch: the whole reply once written."""
Status = Literal["complete", "error", "cancelled"]

CONTENT_TYPES: Final[dict[ResponseTransport, str]] = {
    "sse": "text/event-stream; charset=utf-8",
    "binary": BINARY_FRAMES_CONTENT_TYPE,
}


@dataclass(frozen=True, slots=True)
class AgentStart:
    """The reply begins: how it is produced and what the audio will be."""

    mode: Mode
    source: str
    format: str
    sample_rate: int
    voice: str | None = None
    t_ms: float = 0.0
    event: ClassVar[str] = "agent_start"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text as the model wrote it."""

    text: str
    t_ms: float
    event: ClassVar[str] = "text_delta"


@dataclass(frozen=True, slots=True)
class Sentence:
    """A speakable piece cut from the text and sent to synthesis (batch: the whole reply)."""

    index: int
    text: str
    t_ms: float
    event: ClassVar[str] = "sentence"


@dataclass(frozen=True, slots=True)
class SentenceAudio:
    """Audio of sentence `index`; all of it in order concatenates to one playable stream.

    `t_ms` is None when it came over the binary transport, which sends audio as bare AUDIO
    frames (no per-chunk JSON: with MP3 that would add ~20 % to the stream)."""

    index: int
    data: bytes = field(repr=False)
    t_ms: float | None = None
    event: ClassVar[str] = "audio_chunk"


@dataclass(frozen=True, slots=True)
class SentenceWords:
    """Word timings of sentence `index`, in seconds of ITS audio; sent before the audio they cover.

    `offset_s`: where that sentence's audio starts in the reply's audio (the sentences before
    it, back to back), so `offset_s + start_s` places a word on the reply's timeline."""

    index: int
    words: tuple[WordTiming, ...]
    offset_s: float
    t_ms: float
    event: ClassVar[str] = "words"


@dataclass(frozen=True, slots=True)
class SentenceSpoken:
    """Sentence `index` is fully spoken; `audio_ms` of audio, server-side timings in ms."""

    index: int
    audio_bytes: int
    audio_ms: float
    server_first_audio_ms: float | None
    server_synth_ms: float
    t_ms: float
    event: ClassVar[str] = "synthesis_complete"


@dataclass(frozen=True, slots=True)
class ReplyError:
    """Something upstream failed (`code` is an `ErrorCode` value); `done` follows at once."""

    code: str
    message: str
    t_ms: float
    index: int | None = None
    event: ClassVar[str] = "error"


@dataclass(frozen=True, slots=True)
class ReplyTimings:
    """The reply's milestones in ms since agent_start (None: it never happened)."""

    first_text_ms: float | None = None
    first_sentence_ms: float | None = None
    first_audio_ms: float | None = None
    total_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Done:
    """The last event of every stream."""

    status: Status
    timings: ReplyTimings
    sentences: int
    audio_bytes: int
    audio_ms: float
    text: str = field(repr=False, default="")
    t_ms: float = 0.0
    event: ClassVar[str] = "done"


SpeakEvent: TypeAlias = (
    AgentStart | TextDelta | Sentence | SentenceAudio | SentenceWords | SentenceSpoken | ReplyError | Done
)

EVENT_TYPES: Final[dict[str, type[SpeakEvent]]] = {
    cls.event: cls
    for cls in (AgentStart, TextDelta, Sentence, SentenceAudio, SentenceWords, SentenceSpoken, ReplyError, Done)
}
_CHOICES: Final[dict[str, tuple[str, ...]]] = {"mode": get_args(Mode), "status": get_args(Status)}


class EventFormatError(FrameError):
    """A JSON object that is not a valid speak event."""

    code = ErrorCode.INVALID_REQUEST


def event_fields(event: SpeakEvent) -> dict[str, Any]:
    """The event's JSON fields, without the event name and without audio bytes."""
    body = asdict(event)
    if isinstance(event, SentenceAudio):
        body.pop("data")
        body["bytes"] = len(event.data)
    if isinstance(event, SentenceWords):
        body["words"] = word_dicts(event.words)
    return body


def event_from_fields(name: str, body: dict[str, Any], audio: bytes = b"") -> SpeakEvent:
    """The typed event for a decoded JSON object (`audio` fills an audio_chunk's data).

    Unknown fields are ignored (a newer server may add some); a known field with a value the
    contract does not allow is an `EventFormatError`."""
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise EventFormatError(f"unknown speak event {name!r}")
    known = {spec.name for spec in fields(cls)}
    values = {key: value for key, value in body.items() if key in known}
    for key, allowed in _CHOICES.items():
        if key in values and values[key] not in allowed:
            raise EventFormatError(f"{name} event has {key} {values[key]!r}; expected one of {', '.join(allowed)}")
    try:
        if cls is SentenceAudio:
            values["data"] = audio
        if cls is Done:
            values["timings"] = ReplyTimings(**(values.get("timings") or {}))
        if cls is SentenceWords:
            try:
                values["words"] = parse_words(values.get("words"), f"{name} event's words")
            except CodedError as error:
                raise EventFormatError(error.message) from None
        return cls(**values)
    except TypeError as exc:
        raise EventFormatError(f"malformed {name} event: {exc}") from None


def encode_event(event: SpeakEvent, transport: ResponseTransport) -> bytes:
    """One event as the bytes `transport` carries it."""
    if transport == "binary":
        if isinstance(event, SentenceAudio):
            return encode_binary_frame(FrameKind.AUDIO, event.data)
        return encode_event_frame(event.event, event_fields(event))
    body = event_fields(event)
    if isinstance(event, SentenceAudio):
        body["audio"] = base64.b64encode(event.data).decode("ascii")
    return encode_sse(event.event, body)


class SpeakStreamDecoder:
    """Bytes as delivered in, typed speak events out (either transport, any chunking)."""

    def __init__(self, transport: ResponseTransport) -> None:
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
                events.append(SentenceAudio(index=self._next_index, data=frame.payload))
                continue
            body = frame.json()
            name = body.pop("event", None)
            if not isinstance(name, str):
                raise FrameError('EVENT frame has no "event" name')
            if name not in EVENT_TYPES:
                continue
            event = event_from_fields(name, body)
            if isinstance(event, SentenceSpoken):
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
        if name == SentenceAudio.event:
            try:
                audio = base64.b64decode(body.pop("audio", ""), validate=True)
            except (binascii.Error, TypeError) as exc:
                raise FrameError(f"audio_chunk audio is not base64: {exc}") from None
        return event_from_fields(name, body, audio)
