"""POST /speak bodies: defaults, every field, and the configuration from the environment."""

from __future__ import annotations

import json

import pytest

from voicestream.env import ConfigError, Env
from voicestream.speak.config import SpeakConfig
from voicestream.speak.request import SpeakRequest, parse_speak_request
from voicestream.speak.run import WholeReply
from voicestream.speak.sources import ReplayPace
from voicestream.wire.errors import ProtocolError


def parse(body: object) -> SpeakRequest:
    return parse_speak_request(json.dumps(body).encode())


def test_defaults() -> None:
    assert parse({"text": "Hello."}) == SpeakRequest(text="Hello.", mode="bidi", transport="sse", format="pcm")


def test_every_field() -> None:
    request = parse(
        {
            "prompt": "Plan my day.",
            "mode": "batch",
            "transport": "binary",
            "format": "mp3",
            "voice": "af_bella:0.5,af_heart:0.5",
            "speed": 1.25,
            "pace": {"first_token_ms": 0, "tokens_per_s": 20},
        }
    )
    assert request == SpeakRequest(
        prompt="Plan my day.",
        mode="batch",
        transport="binary",
        format="mp3",
        voice="af_bella:0.5,af_heart:0.5",
        speed=1.25,
        pace=ReplayPace(first_token_s=0.0, tokens_per_s=20),
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"prompt": ""}, "empty_prompt"),
        ({"prompt": ["hi"]}, "invalid_prompt"),
        ({"prompt": "x" * 8001}, "prompt_too_long"),
        ({"text": "hi", "speed": 0.4}, "invalid_speed"),
        ({"text": "hi", "speed": "fast"}, "invalid_speed"),
        ({"text": "hi", "voice": 7}, "invalid_voice"),
        ({"text": "hi", "pace": {"first_token_ms": -1}}, "invalid_pace"),
        ({"text": "hi", "pace": {"tokens_per_s": "many"}}, "invalid_pace"),
        ({"text": "hi", "pace": {"burst": 3}}, "invalid_pace"),
        ({"text": "hi", "mode": None}, "invalid_mode"),
        ({"text": "hi", "speed": 10**400}, "invalid_speed"),
        ({"text": "hi", "pace": {"tokens_per_s": 10**400}}, "invalid_pace"),
        ({"text": "hi", "pace": {"first_token_ms": -(10**400)}}, "invalid_pace"),
    ],
)
def test_rejections(body: dict[str, object], code: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse(body)
    assert caught.value.code == code and 400 <= caught.value.status < 500 and caught.value.message


def test_whole_reply_waits_for_the_end() -> None:
    chunker = WholeReply()
    assert chunker.feed("Hello there. ") == [] and chunker.feed("How are you?") == []
    assert chunker.flush() == "Hello there. How are you?"
    assert chunker.flush() is None  # ready for the next reply
    assert chunker.feed(" ... ") == [] and chunker.flush() is None


def test_config_local_and_deployed() -> None:
    local = SpeakConfig.from_env(Env({"KOKORO_WS_URL": "ws://127.0.0.1:8080"}))
    assert local.kokoro_ws_url == "ws://127.0.0.1:8080" and local.bedrock is None
    assert local.agent_description == "replay" and local.replay_pace == ReplayPace(0.3, 50)
    deployed = SpeakConfig.from_env(
        Env(
            {
                "SAGEMAKER_ENDPOINT_NAME": "kokoro",
                "AWS_REGION": "eu-west-1",
                "BEDROCK_MODEL_ID": "eu.amazon.nova-lite-v1:0",
                "POWERTOOLS_SERVICE_NAME": "speak",
            }
        )
    )
    assert deployed.bedrock is not None and deployed.bedrock.region == "eu-west-1"
    assert deployed.replay_pace == ReplayPace() and deployed.service == "speak"
    assert "kokoro" in deployed.tts_description


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"KOKORO_WS_URL": "ws://x", "SAGEMAKER_ENDPOINT_NAME": "kokoro", "AWS_REGION": "us-east-1"},
        {"SAGEMAKER_ENDPOINT_NAME": "kokoro"},
        {"KOKORO_WS_URL": "ws://x", "SPEAK_SILENCE_TIMEOUT_S": "lots"},
        {"KOKORO_WS_URL": "ws://x", "SPEAK_MAX_DURATION_S": "0"},
    ],
)
def test_config_errors_are_clear(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        SpeakConfig.from_env(Env(env))
