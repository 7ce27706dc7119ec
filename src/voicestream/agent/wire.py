"""Speak events on the wire: server-sent events or length-prefixed binary frames (docs/speak.md).

SSE: one event per speak event, its fields as JSON; an audio_chunk carries its audio as
base64 in `audio`. Binary (docs/frames.md): an EVENT frame per event, except audio, which
travels as bare AUDIO frames of raw bytes; an AUDIO frame belongs to the sentence after the
last `synthesis_complete` (sentences are spoken in order and their audio never interleaves).
`voicestream.client.speak_stream` decodes both.
"""

from __future__ import annotations

import base64
from typing import Final

from voicestream.frames import (
    BINARY_FRAMES_CONTENT_TYPE,
    FrameKind,
    encode_binary_frame,
    encode_event_frame,
    encode_sse,
)

from .events import AudioChunk, SpeakEvent, to_wire
from .request import StreamTransport

CONTENT_TYPES: Final[dict[str, str]] = {
    "sse": "text/event-stream; charset=utf-8",
    "binary": BINARY_FRAMES_CONTENT_TYPE,
}


def encode_event(event: SpeakEvent, transport: StreamTransport) -> bytes:
    if transport == "binary":
        if isinstance(event, AudioChunk):
            return encode_binary_frame(FrameKind.AUDIO, event.data)
        return encode_event_frame(event.event, to_wire(event))
    body = to_wire(event)
    if isinstance(event, AudioChunk):
        body["audio"] = base64.b64encode(event.data).decode("ascii")
    return encode_sse(event.event, body)
