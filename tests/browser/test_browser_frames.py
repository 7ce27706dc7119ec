"""The page's stream decoders (web/frames.js, run by node) read what the Python encoders write.

Real events of every kind, encoded by `voicestream.wire.speak` for both transports, with the
awkward cases in them: audio bytes that look like a JSON object, multi-byte UTF-8 and U+2028
in text, an empty text. frames_check.mjs decodes them at every split point and in random chunks.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.browser.driver import HERE, missing_requirements
from voicestream.wire.framing import ResponseTransport
from voicestream.wire.speak import (
    AgentStart,
    Done,
    ReplyError,
    ReplyTimings,
    Sentence,
    SentenceAudio,
    SentenceSpoken,
    SpeakEvent,
    TextDelta,
    encode_event,
    event_fields,
)

EVENTS: list[SpeakEvent] = [
    AgentStart(mode="bidi", source="replay", format="pcm", sample_rate=24000, voice="af_heart"),
    TextDelta(text="Naïve café — 日本語 ok\u2028next", t_ms=12.5),
    Sentence(index=0, text="Naïve café — 日本語 ok.", t_ms=20.0),
    SentenceAudio(index=0, data=b'{"event":"done"}', t_ms=30.0),  # audio that parses as JSON
    SentenceAudio(index=0, data=bytes(range(256)) * 3, t_ms=31.0),
    SentenceSpoken(index=0, audio_bytes=784, audio_ms=16.3, server_first_audio_ms=5.0, server_synth_ms=9.5, t_ms=40.0),
    SentenceAudio(index=1, data=b"\x00\x80" * 50, t_ms=41.0),
    ReplyError(code="synthesis_failed", message="[unknown_voice] unknown voice 'xx'", t_ms=50.0, index=1),
    Done(
        status="error",
        timings=ReplyTimings(first_text_ms=12.5, first_sentence_ms=20.0, first_audio_ms=30.0, total_ms=50.0),
        sentences=2,
        audio_bytes=884,
        audio_ms=16.3,
        text="",
        t_ms=50.0,
    ),
]


def expected(event: SpeakEvent, transport: ResponseTransport) -> dict[str, Any]:
    if isinstance(event, SentenceAudio):
        audio = base64.b64encode(event.data).decode()
        if transport == "binary":  # a bare AUDIO frame: index from the stream, no server time
            return {"event": "audio_chunk", "index": event.index, "audio": audio, "bytes": len(event.data)}
        return {"event": "audio_chunk", **event_fields(event), "audio": audio}
    return {"event": event.event, **event_fields(event)}


def fixture(transport: ResponseTransport) -> dict[str, Any]:
    stream = b"".join(encode_event(event, transport) for event in EVENTS)
    return {
        "stream": base64.b64encode(stream).decode(),
        "events": [expected(event, transport) for event in EVENTS],
    }


def run_check(path: Path) -> subprocess.CompletedProcess[str]:
    missing = missing_requirements()
    if missing:
        pytest.fail("the JS decoder check needs: " + "; ".join(missing))
    return subprocess.run(
        ["node", str(HERE / "frames_check.mjs"), str(path)], capture_output=True, text=True, timeout=120, check=False
    )


def test_js_decoders_read_the_python_encoders(tmp_path: Path) -> None:
    path = tmp_path / "streams.json"
    path.write_text(json.dumps({"binary": fixture("binary"), "sse": fixture("sse")}))
    result = run_check(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "checks passed" in result.stdout


def test_the_check_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    streams = {"binary": fixture("binary"), "sse": fixture("sse")}
    streams["sse"]["events"][1]["text"] = "something else"
    path = tmp_path / "streams.json"
    path.write_text(json.dumps(streams))
    result = run_check(path)
    assert result.returncode != 0
    assert "AssertionError" in result.stderr
