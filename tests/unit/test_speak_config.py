"""SpeakConfig picks the speech upstream from the environment: Kokoro (default) or vLLM-Omni."""

from __future__ import annotations

import json

import pytest

from voicestream.env import ConfigError, Env
from voicestream.speak.config import SpeakConfig
from voicestream.speech import BidiSession, VllmOmniSession
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.vllm_omni import SessionConfig


def test_kokoro_is_the_default_upstream() -> None:
    config = SpeakConfig.from_env(Env({"KOKORO_WS_URL": "ws://127.0.0.1:8080"}))
    assert config.upstream == "kokoro" and config.speech_url == "ws://127.0.0.1:8080"
    assert isinstance(config.session_factory()(), BidiSession)
    config.check_request(1.5, "mp3")  # Kokoro does both


def test_vllm_omni_from_the_environment() -> None:
    env = Env(
        {
            "SPEECH_UPSTREAM": "vllm-omni",
            "VLLM_OMNI_URL": "ws://127.0.0.1:8000",
            "VLLM_OMNI_VOICE": "ryan",
            "VLLM_OMNI_LANGUAGE": "German",
            "VLLM_OMNI_SESSION_CONFIG": json.dumps(
                {"instructions": "Calm and slow.", "task_type": "CustomVoice", "split_granularity": "sentence"}
            ),
        }
    )
    config = SpeakConfig.from_env(env)
    assert config.upstream == "vllm-omni" and config.speech_url == "ws://127.0.0.1:8000"
    assert config.vllm_omni == SessionConfig(
        voice="ryan", language="German", instructions="Calm and slow.", task_type="CustomVoice",
        split_granularity="sentence",
    )  # fmt: skip
    session = config.session_factory()()
    assert isinstance(session, VllmOmniSession) and session.config == config.vllm_omni
    assert session.description.endswith("ws://127.0.0.1:8000/v1/audio/speech/stream (text frames)")
    assert config.tts_description == "vLLM-Omni websocket ws://127.0.0.1:8000"


def test_vllm_omni_on_sagemaker() -> None:
    env = Env({"SPEECH_UPSTREAM": "vllm-omni", "SAGEMAKER_ENDPOINT_NAME": "voicestream-tts", "AWS_REGION": "us-west-2"})
    config = SpeakConfig.from_env(env)
    assert config.vllm_omni.voice == "vivian" and config.vllm_omni.language == "Auto"
    session = config.session_factory()()
    assert isinstance(session, VllmOmniSession)
    assert session.description == "vLLM-Omni on SageMaker endpoint 'voicestream-tts' in us-west-2"


@pytest.mark.parametrize(
    ("variables", "complaint"),
    [
        ({"SPEECH_UPSTREAM": "vllm-omni"}, "exactly one of VLLM_OMNI_URL"),
        ({"SPEECH_UPSTREAM": "vllm-omni", "KOKORO_WS_URL": "ws://x"}, "KOKORO_WS_URL is set but SPEECH_UPSTREAM"),
        ({"VLLM_OMNI_URL": "ws://x"}, "VLLM_OMNI_URL is set but SPEECH_UPSTREAM is kokoro"),
        ({"SPEECH_UPSTREAM": "qwen"}, "SPEECH_UPSTREAM='qwen' must be one of kokoro, vllm-omni"),
        ({"SPEECH_UPSTREAM": "vllm-omni", "VLLM_OMNI_URL": "ws://x",
          "VLLM_OMNI_SESSION_CONFIG": '{"split_granularity": "word"}'},
         "VLLM_OMNI_* settings: split_granularity must be one of"),
        ({"SPEECH_UPSTREAM": "vllm-omni", "VLLM_OMNI_URL": "ws://x",
          "VLLM_OMNI_SESSION_CONFIG": '{"ref_audio": "\\ud800"}'},
         "VLLM_OMNI_* settings: ref_audio is not valid Unicode"),
        ({"SPEECH_UPSTREAM": "vllm-omni", "VLLM_OMNI_URL": "ws://x", "VLLM_OMNI_SESSION_CONFIG": '{"voice": "ryan"}'},
         "VLLM_OMNI_SESSION_CONFIG: unknown field"),
        ({"SPEECH_UPSTREAM": "vllm-omni", "VLLM_OMNI_URL": "ws://x", "VLLM_OMNI_SESSION_CONFIG": "[1]"},
         "VLLM_OMNI_SESSION_CONFIG='\\[1\\]' must be a JSON object"),
        ({"SPEECH_UPSTREAM": "vllm-omni", "VLLM_OMNI_URL": "ws://x", "VLLM_OMNI_SESSION_CONFIG": "{task"},
         "VLLM_OMNI_SESSION_CONFIG='{task' is not JSON"),
    ],
)  # fmt: skip
def test_misconfigurations_name_the_variable(variables: dict[str, str], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint.replace("*", r"\*")):
        SpeakConfig.from_env(Env(variables))


@pytest.mark.parametrize(
    ("speed", "format", "code"), [(1.5, "pcm", ErrorCode.INVALID_SPEED), (None, "mp3", ErrorCode.INVALID_FORMAT)]
)
def test_vllm_omni_refuses_speed_and_mp3_before_a_reply_starts(speed: float | None, format: str, code: str) -> None:
    config = SpeakConfig(upstream="vllm-omni", vllm_omni_url="ws://127.0.0.1:8000")
    with pytest.raises(ProtocolError) as refused:
        config.check_request(speed, format)  # type: ignore[arg-type]  # the formats a request may name
    assert refused.value.code == code and refused.value.status == 400
    config.check_request(1.0, "wav")  # PCM and WAV at speed 1 are fine
