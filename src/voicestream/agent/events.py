"""What POST /speak streams back: typed events and their JSON form (docs/speak.md).

Times (`t_ms`) are milliseconds since `agent_start`, on the speak function's clock. Audio
lives in `AudioChunk.data`; each transport carries it its own way (base64 in SSE JSON, a bare
binary AUDIO frame), so `to_wire` leaves it out. Pure standard library: the
client-side decoder and the Lambda function import this without numpy or the engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Literal, TypeAlias

Mode = Literal["bidi", "batch"]
Status = Literal["complete", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class AgentStart:
    """The reply begins: how it is produced and what the audio will be."""

    mode: str
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
class AudioChunk:
    """Audio of sentence `index`; all chunks in order concatenate to one playable stream.

    `t_ms` is None when it came over the binary transport, which sends audio as bare AUDIO
    frames (no per-chunk JSON: with MP3 that would add ~20 % to the stream)."""

    index: int
    data: bytes = field(repr=False)
    t_ms: float | None = None
    event: ClassVar[str] = "audio_chunk"


@dataclass(frozen=True, slots=True)
class SynthesisComplete:
    """Sentence `index` is fully spoken; `audio_ms` of audio, server-side timings in ms."""

    index: int
    audio_bytes: int
    audio_ms: float
    server_first_audio_ms: float | None
    server_synth_ms: float
    t_ms: float
    event: ClassVar[str] = "synthesis_complete"


@dataclass(frozen=True, slots=True)
class Error:
    """Something upstream failed (`code` is stable); `done` follows at once."""

    code: str
    message: str
    t_ms: float
    index: int | None = None
    event: ClassVar[str] = "error"


@dataclass(frozen=True, slots=True)
class Timings:
    """The reply's milestones in ms since agent_start (None: it never happened)."""

    first_text_ms: float | None = None
    first_sentence_ms: float | None = None
    first_audio_ms: float | None = None
    total_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Done:
    """The last event of every stream."""

    status: str  # one of Status
    timings: Timings
    sentences: int
    audio_bytes: int
    audio_ms: float
    text: str = field(repr=False, default="")
    t_ms: float = 0.0
    event: ClassVar[str] = "done"


SpeakEvent: TypeAlias = AgentStart | TextDelta | Sentence | AudioChunk | SynthesisComplete | Error | Done

EVENT_TYPES: dict[str, type[SpeakEvent]] = {
    cls.event: cls for cls in (AgentStart, TextDelta, Sentence, AudioChunk, SynthesisComplete, Error, Done)
}


def to_wire(event: SpeakEvent) -> dict[str, Any]:
    """The event's JSON fields, without the event name and without audio bytes."""
    body = asdict(event)
    if isinstance(event, AudioChunk):
        body.pop("data")
        body["bytes"] = len(event.data)
    return body


class EventFormatError(ValueError):
    """A JSON object that is not a valid speak event."""


def from_wire(name: str, body: dict[str, Any], audio: bytes = b"") -> SpeakEvent:
    """The typed event for a decoded JSON object (`audio` fills an audio_chunk's data)."""
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise EventFormatError(f"unknown speak event {name!r}")
    known = {spec.name for spec in fields(cls)}
    values = {key: value for key, value in body.items() if key in known}
    try:
        if cls is AudioChunk:
            values["data"] = audio
        if cls is Done:
            values["timings"] = Timings(**(values.get("timings") or {}))
        return cls(**values)
    except TypeError as exc:
        raise EventFormatError(f"malformed {name} event: {exc}") from None
