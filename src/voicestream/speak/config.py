"""The speak function's settings, from the environment (the SAM template sets them in AWS).

Which speech server speaks: `SPEECH_UPSTREAM` picks the protocol, `kokoro` (default: our Kokoro
server's bidi route) or `vllm-omni` (Qwen3-TTS on vLLM-Omni's speech stream, docs/vllm-omni.md).
Where it is: `KOKORO_WS_URL` / `VLLM_OMNI_URL` (a server's URL; local runs, tests) or
`SAGEMAKER_ENDPOINT_NAME` (+ `AWS_REGION`) for the deployed endpoint. Exactly one.
vLLM-Omni's session-level options come from `VLLM_OMNI_VOICE`, `VLLM_OMNI_LANGUAGE` and
`VLLM_OMNI_SESSION_CONFIG` (a JSON object of further `session.config` fields). Which model
writes replies to a prompt: `BEDROCK_MODEL_ID` (Strands on Bedrock); without it a prompt is
answered by replaying the canned agent reply (offline).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, cast

from voicestream import env as settings
from voicestream.env import ConfigError, Env
from voicestream.speech import UPSTREAMS, Upstream
from voicestream.speech.upstream import UpstreamSettings, open_session
from voicestream.speech.vllm_omni import refused_options
from voicestream.wire.bidi import AudioFormat
from voicestream.wire.vllm_omni import SessionConfig, VllmOmniError

from .run import SessionFactory
from .sources import DEFAULT_SYSTEM_PROMPT, BedrockSettings, ReplayPace

# `session.config` fields VLLM_OMNI_SESSION_CONFIG may set: not those with their own variable,
# nor the streamed PCM format the client decodes.
SESSION_CONFIG_FIELDS: Final = frozenset(spec.name for spec in dataclasses.fields(SessionConfig)) - {
    "voice", "language", "response_format", "stream_audio",
}  # fmt: skip


DEFAULT_UPSTREAM: Final = cast(Upstream, settings.SPEECH_UPSTREAM.default)  # checked in __post_init__


def _default_vllm_omni() -> SessionConfig:
    return SessionConfig(voice=settings.VLLM_OMNI_VOICE.default, language=settings.VLLM_OMNI_LANGUAGE.default)


@dataclass(frozen=True, slots=True)
class SpeakConfig:
    kokoro_ws_url: str | None = None
    sagemaker_endpoint: str | None = None
    region: str | None = None
    upstream: Upstream = DEFAULT_UPSTREAM
    vllm_omni_url: str | None = None
    vllm_omni: SessionConfig = field(default_factory=_default_vllm_omni)
    bedrock: BedrockSettings | None = None
    replay_pace: ReplayPace = field(default_factory=ReplayPace)
    max_duration_s: float = settings.SPEAK_MAX_DURATION_S.default
    connect_timeout_s: float = 10.0
    silence_timeout_s: float = settings.SPEAK_SILENCE_TIMEOUT_S.default
    close_timeout_s: float = 3.0
    service: str = settings.POWERTOOLS_SERVICE_NAME.default
    metrics_namespace: str = settings.POWERTOOLS_METRICS_NAMESPACE.default
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
        region = settings.region(env)
        model_id = env.get(settings.BEDROCK_MODEL_ID)
        bedrock = None
        if model_id:
            bedrock = BedrockSettings(
                model_id=model_id,
                region=region or "us-east-1",
                system_prompt=env.get(settings.SPEAK_SYSTEM_PROMPT) or DEFAULT_SYSTEM_PROMPT,
                max_tokens=env.get(settings.BEDROCK_MAX_TOKENS),
            )
        upstream = "kokoro" if kokoro_ws_url else env.get(settings.SPEECH_UPSTREAM)  # a local stack: its own server
        return cls(
            kokoro_ws_url=kokoro_ws_url or env.get(settings.KOKORO_WS_URL),
            sagemaker_endpoint=None if kokoro_ws_url else env.get(settings.SAGEMAKER_ENDPOINT_NAME),
            region=region,
            upstream=cast(Upstream, upstream),  # checked against UPSTREAMS in __post_init__
            vllm_omni_url=None if kokoro_ws_url else env.get(settings.VLLM_OMNI_URL),
            vllm_omni=vllm_omni_config(env),
            bedrock=bedrock,
            max_duration_s=env.get(settings.SPEAK_MAX_DURATION_S),
            silence_timeout_s=env.get(settings.SPEAK_SILENCE_TIMEOUT_S),
            service=env.get(settings.POWERTOOLS_SERVICE_NAME),
            metrics_namespace=env.get(settings.POWERTOOLS_METRICS_NAMESPACE),
        )


def vllm_omni_config(env: Env) -> SessionConfig:
    """vLLM-Omni's `session.config` from VLLM_OMNI_VOICE, _LANGUAGE and _SESSION_CONFIG."""
    name = settings.VLLM_OMNI_SESSION_CONFIG.name
    extra = env.get(settings.VLLM_OMNI_SESSION_CONFIG)
    unknown = sorted(set(extra) - SESSION_CONFIG_FIELDS)
    if unknown:
        raise ConfigError(
            f"{name}: unknown field(s) {', '.join(unknown)}; use {', '.join(sorted(SESSION_CONFIG_FIELDS))}"
        )
    try:
        return SessionConfig(
            voice=env.get(settings.VLLM_OMNI_VOICE), language=env.get(settings.VLLM_OMNI_LANGUAGE), **extra
        )
    except VllmOmniError as error:
        raise ConfigError(f"VLLM_OMNI_* settings: {error.message}") from None
