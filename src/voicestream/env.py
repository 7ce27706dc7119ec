"""Every environment variable voicestream reads, declared and parsed in one place.

No other module touches `os.environ`: they take settings objects built from an `Env`, a typed
view of an environment (the process's by default, or any mapping in tests). `Env` reads only
the variables declared in `VARIABLES`, so the list below is complete by construction, and a
malformed value is a `ConfigError` naming the variable, raised at startup rather than mid-request.
docs/configuration.md lists the same variables (a unit test keeps the two equal).

Settings of the Kokoro server (`server_settings`, `limits`) and the model directory are built
here; the speak function's (`voicestream.speak.config.SpeakConfig.from_env`) and the deploy
commands' read their variables through `Env`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final, Literal, get_args

from voicestream.wire.bidi import Limits
from voicestream.wire.errors import CodedError

Backend = Literal["onnx", "torch"]
BACKENDS: Final[tuple[Backend, ...]] = get_args(Backend)
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
DEVICES: Final = ("cpu", "cuda")

# VOICESTREAM_DECODER_WINDOWS: (first frames, growth factor, largest frames), or "off".
WindowSizes = tuple[int, float, int]
DecoderWindows = WindowSizes | Literal["off"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8080

VARIABLES: Final[dict[str, str]] = {
    # the Kokoro server (container and local)
    "VOICESTREAM_BACKEND": "speech engine: onnx (int8, CPU; default) or torch (kokoro on PyTorch, the GPU image)",
    "VOICESTREAM_DEVICE": "cpu, cuda or cuda:N (default: the backend chooses); cuda where CUDA is unusable keeps /ping "
    "at 503 with the reason instead of running on the CPU (the template sets it per instance type)",
    "VOICESTREAM_MODEL_DIR": "model files (default: $XDG_CACHE_HOME/voicestream/kokoro-82m; the image: /opt/ml/model)",
    "VOICESTREAM_THREADS": "inference threads per synthesis (default: onnx min(cores, 4), torch PyTorch's own)",
    "VOICESTREAM_DERIVED_DIR": "where the onnx backend keeps the graphs it derives from the model (default: derived/ "
    "in the model directory when writable or already holding them, else $XDG_CACHE_HOME/voicestream/derived/)",
    "VOICESTREAM_DECODER_WINDOWS": "onnx backend: decoder windows in frames of 25 ms, `first,growth,largest` (default "
    "16,2,144), or off (each sentence decoded whole: first audio waits for the whole sentence)",
    "VOICESTREAM_SYNTH_WORKERS": "syntheses that run at once across all sessions (default 2)",
    "VOICESTREAM_LOG_LEVEL": "DEBUG, INFO (default), WARNING or ERROR",
    "VOICESTREAM_HOST": "address the server binds (default 127.0.0.1; 0.0.0.0 in the image, 127.0.0.1 under "
    "make run-image)",
    "VOICESTREAM_PORT": "port the server listens on (default 8080)",
    "VOICESTREAM_PYTHON": "the interpreter container/serve runs the server with (default python3)",
    "VOICESTREAM_G2P_WORKERS": "G2P worker processes: text conversions that run at once (default 2)",
    "VOICESTREAM_G2P_TIMEOUT_S": "seconds one request's G2P may take; longer is text_too_complex (default 5)",
    "VOICESTREAM_HEADER_TIMEOUT_S": "seconds a connection may take to send a request's headers (default 10)",
    "VOICESTREAM_MAX_CONNECTIONS": (
        "open HTTP connections before new requests get 503 (default 256; WebSocket sessions: VOICESTREAM_MAX_SESSIONS)"
    ),
    "VOICESTREAM_ALLOWED_ORIGINS": "web page origins (scheme://host[:port], comma-separated) whose WebSocket "
    "handshakes the server accepts (default none: a handshake that carries an Origin is refused 403)",
    "XDG_CACHE_HOME": "where the default model directory lives (default ~/.cache; the image: /var/cache/voicestream, "
    "the only directory its user writes)",
    # the session and request limits (wire.bidi.Limits), each named after its field
    "VOICESTREAM_MAX_TEXT_CHARS": "characters per synthesis request (default 2000)",
    "VOICESTREAM_MAX_QUEUED": "unfinished requests per session (default 16)",
    "VOICESTREAM_MAX_SESSION_S": "seconds a session may last (default 3600)",
    "VOICESTREAM_IDLE_TIMEOUT_S": "seconds without a message before a session is closed (default 300)",
    "VOICESTREAM_MAX_SESSIONS": "sessions open at once per server (default 32)",
    "VOICESTREAM_FRAME_MS": "milliseconds of audio per frame (default 40)",
    "VOICESTREAM_MAX_MESSAGE_BYTES": "bytes per client message or request body (default 65536)",
    "VOICESTREAM_MAX_BUFFERED_AUDIO_S": "seconds of audio buffered ahead of a slow client per request (default 30)",
    "VOICESTREAM_MP3_BITRATE_KBPS": "MP3 bitrate (default 48)",
    "VOICESTREAM_MAX_PHONEMES": "phonemes per synthesis request: its work (default 5000)",
    "VOICESTREAM_KEEPALIVE_S": "seconds of silence with requests unfinished before the server sends queued (default 5)",
    "VOICESTREAM_BODY_TIMEOUT_S": "seconds a client may take to send a POST body (default 10)",
    "VOICESTREAM_MAX_G2P_QUEUE": "requests waiting for or in their G2P work check, server-wide; more: server_busy "
    "(default 32)",
    "VOICESTREAM_MAX_CONSUMER_LAG_S": "seconds a client may fall behind real time reading audio before it is closed "
    "with slow_consumer (default 20)",
    # the speak function
    "SPEECH_UPSTREAM": "the speech server's protocol: kokoro (default; our Kokoro server) or vllm-omni (Qwen3-TTS)",
    "KOKORO_WS_URL": "the Kokoro server's base or bidi URL (local runs); exclusive with SAGEMAKER_ENDPOINT_NAME",
    "VLLM_OMNI_URL": "a vLLM-Omni server's base or /v1/audio/speech/stream URL, for SPEECH_UPSTREAM=vllm-omni",
    "SAGEMAKER_ENDPOINT_NAME": "the deployed speech endpoint (Kokoro or vLLM-Omni: SPEECH_UPSTREAM); needs AWS_REGION",
    "VLLM_OMNI_VOICE": "vLLM-Omni: the voice (default vivian, a Qwen3-TTS CustomVoice speaker)",
    "VLLM_OMNI_LANGUAGE": "vLLM-Omni: the language (default Auto; English, Chinese, ... as Qwen3-TTS names them)",
    "VLLM_OMNI_INSTRUCTIONS": "vLLM-Omni: style instructions (VoiceDesign: the voice description)",
    "VLLM_OMNI_TASK_TYPE": "vLLM-Omni: CustomVoice, VoiceDesign or Base (cloning); default: the server infers it",
    "VLLM_OMNI_REF_AUDIO": "vLLM-Omni: reference audio to clone (URL, data URL or file:// on the server)",
    "VLLM_OMNI_REF_TEXT": "vLLM-Omni: the transcript of VLLM_OMNI_REF_AUDIO",
    "VLLM_OMNI_SPLIT_GRANULARITY": "vLLM-Omni: none (default: one request per piece), sentence or clause",
    "AWS_REGION": "the AWS region (Lambda sets it)",
    "AWS_DEFAULT_REGION": "the AWS region when AWS_REGION is unset",
    "BEDROCK_MODEL_ID": "the Bedrock model that answers prompts; unset: prompts get the replayed canned reply",
    "BEDROCK_ENDPOINT_URL": "a Bedrock endpoint URL (VPC endpoints, tests)",
    "BEDROCK_MAX_TOKENS": "the reply's token limit (default 400)",
    "SPEAK_SYSTEM_PROMPT": "the agent's system prompt",
    "REPLAY_FIRST_TOKEN_MS": "replayed text: delay before the first token (default 300)",
    "REPLAY_TOKENS_PER_S": "replayed text: tokens per second after it (default 50)",
    "SPEAK_MAX_DURATION_S": "seconds a whole reply may take (default 300)",
    "SPEAK_SILENCE_TIMEOUT_S": "seconds without a frame from the speech server before a reply fails (default 30)",
    "POWERTOOLS_SERVICE_NAME": "service name in logs and metrics (default voicestream-speak)",
    "POWERTOOLS_METRICS_NAMESPACE": "CloudWatch metrics namespace (default voicestream)",
    "LAMBDA_TASK_ROOT": "set by Lambda: the speak app then forwards the X-Ray trace header",
    # the deploy commands
    "VOICESTREAM_SAM": "the sam executable the deploy commands run (default: sam on PATH)",
    "SAM_CLI_TELEMETRY": "passed to sam (default 0: no telemetry)",
}

# The limit each VOICESTREAM_* limit variable sets.
LIMIT_VARIABLES: Final[dict[str, str]] = {spec.name: f"VOICESTREAM_{spec.name.upper()}" for spec in fields(Limits)}


class ConfigError(CodedError, ValueError):
    """An environment variable (or a setting) is malformed or missing; the message names it."""

    code = "invalid_config"


class Env:
    """Typed access to declared environment variables; empty values count as unset."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def text(self, name: str) -> str | None:
        if name not in VARIABLES:
            raise KeyError(f"{name} is not declared in voicestream.env.VARIABLES")
        value = self._environ.get(name, "").strip()
        return value or None

    def integer(self, name: str, minimum: int | None = None) -> int | None:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
        return value

    def number(self, name: str) -> float | None:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ConfigError(f"{name}={raw!r} is not a finite number")
        return value

    def path(self, name: str) -> Path | None:
        raw = self.text(name)
        return None if raw is None else Path(raw)

    def choice(self, name: str, allowed: tuple[str, ...]) -> str | None:
        raw = self.text(name)
        if raw is not None and raw not in allowed:
            raise ConfigError(f"{name}={raw!r} must be one of {', '.join(allowed)}")
        return raw


def cache_dir(env: Env | None = None) -> Path:
    """voicestream's cache: $XDG_CACHE_HOME (or ~/.cache)/voicestream."""
    return ((env or Env()).path("XDG_CACHE_HOME") or Path.home() / ".cache") / "voicestream"


def default_model_dir(env: Env | None = None) -> Path:
    """$VOICESTREAM_MODEL_DIR, else the cache's kokoro-82m."""
    env = env or Env()
    return env.path("VOICESTREAM_MODEL_DIR") or cache_dir(env) / "kokoro-82m"


def aws_region(env: Env | None = None, default: str = "us-east-1") -> str:
    """$AWS_REGION (Lambda sets it), else $AWS_DEFAULT_REGION, else `default`."""
    env = env or Env()
    return env.text("AWS_REGION") or env.text("AWS_DEFAULT_REGION") or default


def limits(env: Env | None = None) -> Limits:
    """`Limits` with every VOICESTREAM_* limit variable applied; ConfigError for a bad one."""
    env = env or Env()
    values: dict[str, float] = {}
    for spec in fields(Limits):
        name = LIMIT_VARIABLES[spec.name]
        value = env.integer(name) if spec.type in ("int", int) else env.number(name)
        if value is not None:
            values[spec.name] = value
    try:
        return Limits(**values)  # type: ignore[arg-type]  # each field got its declared type above
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def allowed_origins(env: Env | None = None) -> tuple[str, ...]:
    """VOICESTREAM_ALLOWED_ORIGINS, split (`voicestream.origins`); ConfigError for one that is
    not scheme://host[:port]."""
    value = (env or Env()).text("VOICESTREAM_ALLOWED_ORIGINS") or ""
    origins = tuple(part.strip() for part in value.split(",") if part.strip())
    for origin in origins:
        scheme, _, rest = origin.partition("://")
        if scheme not in ("http", "https") or not rest or "/" in rest.rstrip("/"):
            raise ConfigError(f"VOICESTREAM_ALLOWED_ORIGINS: {origin!r} is not an origin (scheme://host[:port])")
    return origins


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """How the Kokoro server process is set up (request and session limits are `Limits`)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    backend: Backend = "onnx"
    model_dir: Path | None = None  # None: default_model_dir()
    threads: int | None = None  # inference threads per synthesis; None: the engine's default
    synth_workers: int = 2  # syntheses that run at once across all sessions
    log_level: LogLevel = "INFO"
    # None: the backend chooses (torch takes CUDA when it can). "cuda": no GPU means no service
    # (/ping stays 503 and the log says why) rather than a silent fall back to the CPU.
    device: str | None = None
    derived_dir: Path | None = None  # None: the engine's default (beside the model, else the cache)
    decoder_windows: DecoderWindows | None = None  # None: the engine's default plan
    g2p_workers: int = 2  # G2P worker processes of the ONNX engine
    g2p_timeout_s: float = 5.0  # one request's G2P, at most
    header_timeout_s: float = 10.0  # a request's headers must arrive within this
    max_connections: int = 256  # uvicorn's limit_concurrency: beyond it, 503

    def __post_init__(self) -> None:
        if self.device is not None and self.device.split(":", 1)[0] not in DEVICES:
            raise ConfigError(f"VOICESTREAM_DEVICE={self.device!r}: use cpu, cuda or cuda:<index>")
        if self.synth_workers < 1:
            raise ConfigError(f"synth_workers must be at least 1, got {self.synth_workers}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be at least 1, got {self.threads}")
        for name in ("g2p_workers", "max_connections"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("g2p_timeout_s", "header_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")


def server_settings(env: Env | None = None) -> ServerSettings:
    env = env or Env()
    backend = env.choice("VOICESTREAM_BACKEND", BACKENDS) or "onnx"
    level = (env.text("VOICESTREAM_LOG_LEVEL") or "INFO").upper()
    if level not in get_args(LogLevel):
        raise ConfigError(f"VOICESTREAM_LOG_LEVEL={level!r} must be one of {', '.join(get_args(LogLevel))}")
    workers = env.integer("VOICESTREAM_SYNTH_WORKERS", minimum=1)
    defaults = ServerSettings()
    g2p_timeout = env.number("VOICESTREAM_G2P_TIMEOUT_S")
    header_timeout = env.number("VOICESTREAM_HEADER_TIMEOUT_S")
    if g2p_timeout is not None and g2p_timeout <= 0:
        raise ConfigError(f"VOICESTREAM_G2P_TIMEOUT_S={g2p_timeout!r} must be positive")
    if header_timeout is not None and header_timeout <= 0:
        raise ConfigError(f"VOICESTREAM_HEADER_TIMEOUT_S={header_timeout!r} must be positive")
    return ServerSettings(
        host=env.text("VOICESTREAM_HOST") or DEFAULT_HOST,
        port=env.integer("VOICESTREAM_PORT", minimum=0) or DEFAULT_PORT,
        backend=backend,  # type: ignore[arg-type]  # checked against BACKENDS by choice()
        model_dir=env.path("VOICESTREAM_MODEL_DIR"),
        threads=env.integer("VOICESTREAM_THREADS", minimum=1),
        synth_workers=2 if workers is None else workers,
        log_level=level,  # type: ignore[arg-type]  # checked above
        device=(env.text("VOICESTREAM_DEVICE") or "").lower() or None,
        derived_dir=env.path("VOICESTREAM_DERIVED_DIR"),
        decoder_windows=decoder_windows(env),
        g2p_workers=env.integer("VOICESTREAM_G2P_WORKERS", minimum=1) or defaults.g2p_workers,
        g2p_timeout_s=defaults.g2p_timeout_s if g2p_timeout is None else g2p_timeout,
        header_timeout_s=defaults.header_timeout_s if header_timeout is None else header_timeout,
        max_connections=env.integer("VOICESTREAM_MAX_CONNECTIONS", minimum=1) or defaults.max_connections,
    )


def decoder_windows(env: Env | None = None) -> DecoderWindows | None:
    """VOICESTREAM_DECODER_WINDOWS: None when unset, "off", or (first, growth, largest)."""
    name = "VOICESTREAM_DECODER_WINDOWS"
    raw = (env or Env()).text(name)
    if raw is None:
        return None
    if raw.lower() == "off":
        return "off"
    parts = [part.strip() for part in raw.split(",")]
    usage = f"{name}={raw!r}: use off, or first,growth,largest (frames of 25 ms, e.g. 16,2,144)"
    if len(parts) != 3:
        raise ConfigError(usage)
    try:
        first, growth, largest = int(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise ConfigError(usage) from None
    if first < 1 or largest < first or not (math.isfinite(growth) and growth >= 1.0):
        raise ConfigError(f"{usage}; need 1 <= first <= largest and growth >= 1")
    return first, growth, largest


def child_environment(defaults: Mapping[str, str]) -> dict[str, str]:
    """This process's environment for a child process (sam), with `defaults` where unset."""
    return {**defaults, **os.environ}


def export(name: str, value: str) -> None:
    """Set a variable that a library reads from the process environment (Hugging Face's offline
    switch, X-Ray's trace id): the one place voicestream writes the environment."""
    os.environ[name] = value
