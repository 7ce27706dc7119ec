"""/v1/audio/speech: the words of its SSE stream come before the audio they cover, on a tone engine
whose timings the test can compute (the route with the real model and the `openai` package:
tests/integration/test_openai_speech.py)."""

from __future__ import annotations

import base64

import httpx

from tests.support.fakes import ToneEngine
from tests.support.server import start_server
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import SSEDecoder


def test_words_come_in_sse_before_the_audio_they_cover() -> None:
    engine = ToneEngine(ms_per_char=20, words=True)  # words at times the test can compute
    text = "Words are timed before their audio."
    with start_server(create_app(engine, Limits())) as server:
        body = {"model": "kokoro", "voice": "af_heart", "input": text, "response_format": "pcm"}
        response = httpx.post(
            f"{server.http_url}/v1/audio/speech", json={**body, "stream_format": "sse", "words": True}
        )
        plain = httpx.post(f"{server.http_url}/v1/audio/speech", json={**body, "stream_format": "sse"})
    events = [event.json() for event in SSEDecoder().feed(response.content)]
    assert not any(e["type"] == "speech.audio.words" for e in (ev.json() for ev in SSEDecoder().feed(plain.content)))
    audio_s = 0.0
    words: list[str] = []
    for event in events:
        if event["type"] == "speech.audio.delta":
            audio_s += len(base64.b64decode(event["audio"])) / 48_000
        elif event["type"] == "speech.audio.words":
            assert all(w["start_s"] >= audio_s for w in event["words"])
            words.extend(w["word"] for w in event["words"])
    assert " ".join(words) == text
