"""The speak function's settings, from the environment (the SAM template sets them in AWS).

Which speech server: `KOKORO_WS_URL` (a server's base or bidi-route URL; local runs, tests)
or `SAGEMAKER_ENDPOINT_NAME` (+ `AWS_REGION`) for the deployed endpoint. Exactly one.
Which model writes replies to a prompt: `BEDROCK_MODEL_ID` (Strands on Bedrock); without it a
prompt is answered by replaying the canned agent reply (offline), at the replay pace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from voicestream.env import ConfigError, Env
from voicestream.kokoro_client import BidiSession

from .run import SessionFactory
from .sources import DEFAULT_SYSTEM_PROMPT, BedrockSettings, Pace


@dataclass(frozen=True, slots=True)
class SpeakConfig:
    kokoro_ws_url: str | None = None
    sagemaker_endpoint: str | None = None
    region: str | None = None
    bedrock: BedrockSettings | None = None
    replay_pace: Pace = field(default_factory=Pace)
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
        if bool(self.kokoro_ws_url) == bool(self.sagemaker_endpoint):
            raise ConfigError("set exactly one of KOKORO_WS_URL (local server) or SAGEMAKER_ENDPOINT_NAME (deployed)")
        if self.sagemaker_endpoint and not self.region:
            raise ConfigError("SAGEMAKER_ENDPOINT_NAME needs AWS_REGION")
        for name in ("max_duration_s", "connect_timeout_s", "silence_timeout_s", "close_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")

    @property
    def tts_description(self) -> str:
        if self.kokoro_ws_url:
            return f"websocket {self.kokoro_ws_url}"
        return f"SageMaker endpoint {self.sagemaker_endpoint} ({self.region})"

    @property
    def agent_description(self) -> str:
        return f"bedrock:{self.bedrock.model_id}" if self.bedrock else "replay"

    def session_factory(self) -> SessionFactory:
        """Unopened sessions to the configured speech server, one per reply."""
        url, endpoint, region = self.kokoro_ws_url, self.sagemaker_endpoint, self.region
        connect, silence, close = self.connect_timeout_s, self.silence_timeout_s, self.close_timeout_s
        if url:
            return lambda: BidiSession.websocket(
                url, connect_timeout=connect, silence_timeout=silence, close_timeout=close
            )
        assert endpoint and region  # checked in __post_init__
        http_client = self.sagemaker_http_client
        return lambda: BidiSession.sagemaker(
            endpoint, region, connect_timeout=connect, silence_timeout=silence, close_timeout=close,
            **({"http_client": http_client()} if http_client else {}),
        )  # fmt: skip

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
        return cls(
            kokoro_ws_url=kokoro_ws_url or env.text("KOKORO_WS_URL"),
            sagemaker_endpoint=None if kokoro_ws_url else env.text("SAGEMAKER_ENDPOINT_NAME"),
            region=region,
            bedrock=bedrock,
            replay_pace=Pace(
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
