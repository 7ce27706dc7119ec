"""The speak function's settings, from the environment (the SAM template sets them in AWS).

Which speech server speaks: `SPEECH_UPSTREAM` picks the protocol, `kokoro` (default: our Kokoro
server's bidi route) or `vllm-omni` (Qwen3-TTS on vLLM-Omni's speech stream, docs/vllm-omni.md).
Where it is: `KOKORO_WS_URL` / `VLLM_OMNI_URL` (a server's URL; local runs, tests) or
`SAGEMAKER_ENDPOINT_NAME` (+ `AWS_REGION`) for the deployed endpoint. Exactly one.
vLLM-Omni's session-level options (voice, language, instructions, reference audio) come from the
`VLLM_OMNI_*` variables. Which model writes replies to a prompt: `BEDROCK_MODEL_ID` (Strands on
Bedrock); without it a prompt is answered by replaying the canned agent reply (offline).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args

from voicestream.env import ConfigError, Env
from voicestream.speech import UPSTREAMS, Upstream
from voicestream.speech.upstream import UpstreamSettings, open_session
from voicestream.speech.vllm_omni import refused_options
from voicestream.wire.bidi import AudioFormat
from voicestream.wire.vllm_omni import DEFAULT_VOICE as VLLM_OMNI_DEFAULT_VOICE
from voicestream.wire.vllm_omni import SessionConfig, SplitGranularity, TaskType, VllmOmniError

from .run import SessionFactory
from .sources import DEFAULT_SYSTEM_PROMPT, BedrockSettings, ReplayPace


def _default_vllm_omni() -> SessionConfig:
    return SessionConfig(voice=VLLM_OMNI_DEFAULT_VOICE, language="Auto")


@dataclass(frozen=True, slots=True)
class SpeakConfig:
    kokoro_ws_url: str | None = None
    sagemaker_endpoint: str | None = None
    region: str | None = None
    upstream: Upstream = "kokoro"
    vllm_omni_url: str | None = None
    vllm_omni: SessionConfig = field(default_factory=_default_vllm_omni)
    bedrock: BedrockSettings | None = None
    replay_pace: ReplayPace = field(default_factory=ReplayPace)
    max_duration_s: float = 300.0
    connect_timeout_s: float = 10.0
    silence_timeout_s: float = 30.0
    close_timeout_s: float = 3.0
    service: str = "voicestream-speak"
    metrics_namespace: str = "voicestream"
    # The HTTP/2 client of each SageMaker session (None: the SDK's awscrt one); tests put a
    # fake of SageMaker's service here, as the validate and benchmark tasks' tests do.
    sagemaker_http_client: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if self.upstream not in UPSTREAMS:
            raise ConfigError(f"SPEECH_UPSTREAM={self.upstream!r} must be one of {', '.join(UPSTREAMS)}")
        url_variable, other = ("KOKORO_WS_URL", "VLLM_OMNI_URL")
        if self.upstream == "vllm-omni":
            url_variable, other = other, url_variable
        if self._url_of(other):
            raise ConfigError(f"{other} is set but SPEECH_UPSTREAM is {self.upstream}: set {url_variable} instead")
        if bool(self._url_of(url_variable)) == bool(self.sagemaker_endpoint):
            raise ConfigError(
                f"set exactly one of {url_variable} (local server) or SAGEMAKER_ENDPOINT_NAME (deployed) "
                f"for the {self.upstream} upstream"
            )
        if self.sagemaker_endpoint and not self.region:
            raise ConfigError("SAGEMAKER_ENDPOINT_NAME needs AWS_REGION")
        for name in ("max_duration_s", "connect_timeout_s", "silence_timeout_s", "close_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")

    def _url_of(self, variable: str) -> str | None:
        return self.kokoro_ws_url if variable == "KOKORO_WS_URL" else self.vllm_omni_url

    @property
    def speech_url(self) -> str | None:
        """The speech server's URL for the chosen upstream (None: the SageMaker endpoint)."""
        return self.vllm_omni_url if self.upstream == "vllm-omni" else self.kokoro_ws_url

    @property
    def tts_description(self) -> str:
        where = (
            f"websocket {self.speech_url}"
            if self.speech_url
            else f"SageMaker endpoint {self.sagemaker_endpoint} ({self.region})"
        )
        return where if self.upstream == "kokoro" else f"vLLM-Omni {where}"

    def check_request(self, speed: float | None, format: AudioFormat, sample_rate: int | None = None) -> None:
        """Refuse (ProtocolError, a 4xx) what the chosen upstream cannot do, before a reply starts."""
        if self.upstream == "vllm-omni":
            refused = refused_options(speed, format, sample_rate)
            if refused is not None:
                raise refused

    @property
    def agent_description(self) -> str:
        return f"bedrock:{self.bedrock.model_id}" if self.bedrock else "replay"

    def session_factory(self) -> SessionFactory:
        """Unopened sessions to the configured speech server, one per reply."""
        settings = UpstreamSettings(
            self.upstream,
            url=self.speech_url,
            endpoint=None if self.speech_url else self.sagemaker_endpoint,
            region=self.region,
            vllm_omni=self.vllm_omni if self.upstream == "vllm-omni" else None,
            connect_timeout=self.connect_timeout_s,
            silence_timeout=self.silence_timeout_s,
            close_timeout=self.close_timeout_s,
            http_client_factory=self.sagemaker_http_client,
        )
        return lambda: open_session(settings)

    @classmethod
    def from_env(cls, env: Env | None = None, *, kokoro_ws_url: str | None = None) -> SpeakConfig:
        """The settings the environment describes (docs/configuration.md). A local stack passes
        its own `kokoro_ws_url`: replies then always go to that server, never to SageMaker."""
        env = env or Env()
        region = env.text("AWS_REGION") or env.text("AWS_DEFAULT_REGION")
        model_id = env.text("BEDROCK_MODEL_ID")
        bedrock = None
        if model_id:
            bedrock = BedrockSettings(
                model_id=model_id,
                region=region or "us-east-1",
                endpoint_url=env.text("BEDROCK_ENDPOINT_URL"),
                system_prompt=env.text("SPEAK_SYSTEM_PROMPT") or DEFAULT_SYSTEM_PROMPT,
                max_tokens=env.integer("BEDROCK_MAX_TOKENS", minimum=1) or 400,
            )
        upstream = env.choice("SPEECH_UPSTREAM", UPSTREAMS) or "kokoro"
        if kokoro_ws_url:
            upstream = "kokoro"  # a local stack speaks to its own Kokoro server
        return cls(
            kokoro_ws_url=kokoro_ws_url or env.text("KOKORO_WS_URL"),
            sagemaker_endpoint=None if kokoro_ws_url else env.text("SAGEMAKER_ENDPOINT_NAME"),
            region=region,
            upstream=upstream,  # type: ignore[arg-type]  # checked against UPSTREAMS by choice()
            vllm_omni_url=None if kokoro_ws_url else env.text("VLLM_OMNI_URL"),
            vllm_omni=vllm_omni_config(env),
            bedrock=bedrock,
            replay_pace=ReplayPace(
                first_token_s=_or(env.number("REPLAY_FIRST_TOKEN_MS"), 300) / 1000,
                tokens_per_s=_or(env.number("REPLAY_TOKENS_PER_S"), 50),
            ),
            max_duration_s=_or(env.number("SPEAK_MAX_DURATION_S"), 300),
            silence_timeout_s=_or(env.number("SPEAK_SILENCE_TIMEOUT_S"), 30),
            service=env.text("POWERTOOLS_SERVICE_NAME") or "voicestream-speak",
            metrics_namespace=env.text("POWERTOOLS_METRICS_NAMESPACE") or "voicestream",
        )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def vllm_omni_config(env: Env) -> SessionConfig:
    """vLLM-Omni's `session.config` from the VLLM_OMNI_* variables (docs/configuration.md)."""
    granularity = env.choice("VLLM_OMNI_SPLIT_GRANULARITY", get_args(SplitGranularity)) or "none"
    task_type = env.choice("VLLM_OMNI_TASK_TYPE", get_args(TaskType))
    try:
        return SessionConfig(
            voice=env.text("VLLM_OMNI_VOICE") or VLLM_OMNI_DEFAULT_VOICE,
            language=env.text("VLLM_OMNI_LANGUAGE") or "Auto",
            instructions=env.text("VLLM_OMNI_INSTRUCTIONS"),
            task_type=task_type,  # type: ignore[arg-type]  # checked by choice()
            ref_audio=env.text("VLLM_OMNI_REF_AUDIO"),
            ref_text=env.text("VLLM_OMNI_REF_TEXT"),
            split_granularity=granularity,  # type: ignore[arg-type]  # checked by choice()
        )
    except VllmOmniError as error:
        raise ConfigError(f"VLLM_OMNI_* settings: {error.message}") from None
