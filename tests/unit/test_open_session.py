"""`open_session`: the one place a speech session is chosen, from `UpstreamSettings`."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from voicestream.speech import BidiSession, UpstreamSettings, VllmOmniSession, open_session
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.vllm_omni import SessionConfig


def test_kokoro_by_url_is_a_bidi_session_with_the_settings() -> None:
    where = UpstreamSettings(url="ws://127.0.0.1:1", words=True, connect_timeout=3.0, silence_timeout=7.0)
    session = open_session(where)
    assert isinstance(session, BidiSession)
    assert session.words and session.connect_timeout == 3.0 and session.silence_timeout == 7.0
    assert "127.0.0.1:1" in session.description


def test_vllm_omni_by_url_carries_its_session_config() -> None:
    config = SessionConfig(voice="vivian", language="English")
    session = open_session(UpstreamSettings("vllm-omni", url="ws://127.0.0.1:1", vllm_omni=config))
    assert isinstance(session, VllmOmniSession)
    assert session.config == config
    # No silence_timeout given: the session keeps its own (longer: torch.compile warms up).
    default = inspect.signature(VllmOmniSession).parameters["silence_timeout"].default
    assert session.silence_timeout == default


@pytest.mark.parametrize("upstream, kind", [("kokoro", BidiSession), ("vllm-omni", VllmOmniSession)])
def test_a_sagemaker_endpoint_opens_the_upstreams_session(upstream: Any, kind: type) -> None:
    session = open_session(UpstreamSettings(upstream, endpoint="tts", region="eu-west-1"))
    assert isinstance(session, kind)
    assert "tts" in session.description


@pytest.mark.parametrize(
    "settings",
    [
        {"upstream": "piper", "url": "ws://x"},
        {"url": "ws://x", "endpoint": "tts", "region": "eu-west-1"},
        {},
        {"endpoint": "tts"},
    ],
)
def test_settings_that_name_no_single_place_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        UpstreamSettings(**settings)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
