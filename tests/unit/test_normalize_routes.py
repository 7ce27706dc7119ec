"""`normalize` reaches the engine from the HTTP routes (/invocations, /v1/audio/speech and the
OpenAI body through SageMaker's route attribute); the session's is in test_server_session.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.fakes import ToneEngine
from tests.support.server import start_server
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits
from voicestream.wire.openai_speech import CUSTOM_ATTRIBUTES_HEADER

OPENAI = {"model": "kokoro", "voice": "af_heart", "response_format": "pcm"}


@pytest.mark.parametrize(
    ("path", "headers", "body"),
    [
        ("/invocations", {}, {"text": "Meet at 3:45 PM."}),
        ("/v1/audio/speech", {}, {**OPENAI, "input": "Meet at 3:45 PM."}),
        ("/invocations", {CUSTOM_ATTRIBUTES_HEADER: "route=/v1/audio/speech"}, {**OPENAI, "input": "Meet at 3:45 PM."}),
    ],
)
def test_normalize_is_on_by_default_and_off_when_asked(
    path: str, headers: dict[str, str], body: dict[str, Any]
) -> None:
    engine = ToneEngine()
    with start_server(create_app(engine, Limits())) as server:
        for normalize in (None, False, True):
            sent = body if normalize is None else {**body, "normalize": normalize}
            reply = httpx.post(f"{server.http_url}{path}", json=sent, headers=headers, timeout=30)
            assert reply.status_code == 200, reply.text
    asked = [options for text, options in zip(engine.texts, engine.text_options, strict=True) if "3:45" in text]
    assert [options.normalize for options in asked] == [True, False, True]  # not the server's warm-up


@pytest.mark.parametrize("path", ["/invocations", "/v1/audio/speech"])
def test_a_normalize_that_is_not_a_boolean_is_a_400(path: str) -> None:
    body = {"text": "Hi."} if path == "/invocations" else {**OPENAI, "input": "Hi."}
    with start_server(create_app(ToneEngine(), Limits())) as server:
        reply = httpx.post(f"{server.http_url}{path}", json={**body, "normalize": "no"}, timeout=30)
    assert reply.status_code == 400
    assert "normalize" in reply.text
