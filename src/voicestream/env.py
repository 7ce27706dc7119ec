"""Every environment variable voicestream reads: declared once, parsed from the declaration.

Each `Setting` below names a variable and gives its type (a parser), default, meaning, its
section of docs/configuration.md and who sets it: a user, the platform (Lambda, the XDG base
directories, sam) or our deployment (the SAM template). `Env.get(setting)` is the typed value,
the declared default when unset, so settings classes (`ServerSettings`, `Limits` via `limits`,
`voicestream.speak.config.SpeakConfig`) state no default of their own for a variable.
No other module touches `os.environ`: `Env` reads only declared variables, so the list is
complete by construction, and a malformed value is a `ConfigError` naming the variable, raised
at startup rather than mid-request. docs/configuration.md is generated from this declaration
(`python -m voicestream.env_doc > docs/configuration.md`; a unit test keeps them equal).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar, get_args

from voicestream.wire.bidi import Limits
from voicestream.wire.errors import CodedError
from voicestream.wire.vllm_omni import DEFAULT_VOICE as VLLM_OMNI_DEFAULT_VOICE

Backend = Literal["onnx", "torch"]
BACKENDS: Final[tuple[Backend, ...]] = get_args(Backend)
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LOG_LEVELS: Final[tuple[LogLevel, ...]] = get_args(LogLevel)
DEVICES: Final = ("cpu", "cuda")

# The decoder's windows (onnx): (first frames, growth factor, largest frames), or "off". A
# command-line argument of the server (`--decoder-windows`), no longer an environment variable.
WindowSizes = tuple[int, float, int]
DecoderWindows = WindowSizes | Literal["off"]

T = TypeVar("T")
C = TypeVar("C", bound=str)
# (variable name, its non-empty value) -> the typed value; ConfigError naming the variable when malformed.
Parser = Callable[[str, str], T]
# Who sets a variable: a user; the platform (Lambda, XDG, sam: voicestream only reads it); our deployment.
SetBy = Literal["user", "platform", "deployment"]


class ConfigError(CodedError, ValueError):
    """An environment variable (or a setting) is malformed or missing; the message names it."""

    code = "invalid_config"


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """One environment variable: the single statement of its name, type, default and meaning."""

    name: str
    parse: Parser[T]
    default: T
    doc: str
    section: str  # its section of docs/configuration.md (env_doc.SECTIONS)
    set_by: SetBy = "user"
    # How the docs state the default when the value alone does not say it (computed, or unset).
    shown_default: str | None = None


SETTINGS: Final[list[Setting[Any]]] = []


def declare(
    name: str,
    parse: Parser[T],
    default: T,
    doc: str,
    section: str,
    set_by: SetBy = "user",
    shown_default: str | None = None,
) -> Setting[T]:
    setting = Setting(name, parse, default, doc, section, set_by, shown_default)
    SETTINGS.append(setting)
    return setting


# --- parsers -------------------------------------------------------------------------------


def text(name: str, raw: str) -> str:
    return raw


def lower_text(name: str, raw: str) -> str:
    return raw.lower()


def path(name: str, raw: str) -> Path:
    return Path(raw)


def integer(minimum: int | None = None) -> Parser[int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
        return value

    return parse


def number(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} is not a finite number")
    return value


def seconds(name: str, raw: str) -> float:
    value = number(name, raw)
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive number of seconds")
    return value


def choice(options: tuple[C, ...], normalize: Callable[[str], str] = str) -> Parser[C]:
    def parse(name: str, raw: str) -> C:
        value = normalize(raw)
        for option in options:
            if option == value:
                return option
        raise ConfigError(f"{name}={raw!r} must be one of {', '.join(options)}")

    return parse


def json_object(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not JSON") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{name}={raw!r} must be a JSON object")
    return value


# --- the Kokoro server (container and local) ------------------------------------------------

BACKEND: Final[Setting[Backend]] = declare(
    "VOICESTREAM_BACKEND", choice(BACKENDS), "onnx",
    "speech engine: onnx (int8, CPU) or torch (kokoro on PyTorch, the GPU image)", "server",
)  # fmt: skip
DEVICE: Final[Setting[str | None]] = declare(
    "VOICESTREAM_DEVICE", lower_text, None,
    "cpu, cuda or cuda:N; cuda where CUDA is unusable keeps /ping at 503 with the reason instead of running "
    "on the CPU (the template sets it per instance type)", "server", shown_default="the backend chooses",
)  # fmt: skip
MODEL_DIR: Final[Setting[Path | None]] = declare(
    "VOICESTREAM_MODEL_DIR", path, None, "model files", "server",
    shown_default="`$XDG_CACHE_HOME/voicestream/kokoro-82m`; the image: `/opt/ml/model`",
)  # fmt: skip
THREADS: Final[Setting[int | None]] = declare(
    "VOICESTREAM_THREADS", integer(1), None, "inference threads per synthesis", "server",
    shown_default="onnx min(cores, 4), torch PyTorch's own",
)  # fmt: skip
SYNTH_WORKERS: Final[Setting[int]] = declare(
    "VOICESTREAM_SYNTH_WORKERS", integer(1), 2,
    "syntheses that run at once across all sessions; waiting steps run earliest deadline first, the deadline "
    "being when the step's listener runs out of audio (docs/engine.md)", "server",
)  # fmt: skip
LOG_LEVEL: Final[Setting[LogLevel]] = declare(
    "VOICESTREAM_LOG_LEVEL", choice(LOG_LEVELS, str.upper), "INFO", "DEBUG, INFO, WARNING or ERROR", "server"
)
HOST: Final[Setting[str]] = declare(
    "VOICESTREAM_HOST",
    text,
    "127.0.0.1",
    "address the server binds (the image: 0.0.0.0; 127.0.0.1 under make run-image)",
    "server",
)
PORT: Final[Setting[int]] = declare("VOICESTREAM_PORT", integer(0), 8080, "port the server listens on", "server")
G2P_WORKERS: Final[Setting[int]] = declare(
    "VOICESTREAM_G2P_WORKERS", integer(1), 2,
    "G2P worker processes of the ONNX engine: text conversions that run at once", "server",
)  # fmt: skip
G2P_TIMEOUT_S: Final[Setting[float]] = declare(
    "VOICESTREAM_G2P_TIMEOUT_S", seconds, 5.0,
    "seconds one request's G2P may take; past it the worker is stopped and the request refused with "
    "`text_too_complex`", "server",
)  # fmt: skip
HEADER_TIMEOUT_S: Final[Setting[float]] = declare(
    "VOICESTREAM_HEADER_TIMEOUT_S", seconds, 10.0,
    "seconds a connection may take to send a request's headers; then 408 and closed", "server",
)  # fmt: skip
MAX_CONNECTIONS: Final[Setting[int]] = declare(
    "VOICESTREAM_MAX_CONNECTIONS", integer(1), 256,
    "open HTTP connections before new requests get 503 (uvicorn's `limit_concurrency`). WebSocket sessions "
    "are capped by `VOICESTREAM_MAX_SESSIONS`", "server",
)  # fmt: skip

METRICS_ENDPOINT: Final[Setting[str | None]] = declare(
    "VOICESTREAM_METRICS_ENDPOINT", text, None,
    "endpoint name: log open sessions every 10 s as a CloudWatch EMF line with this EndpointName "
    "dimension (the template sets it on SageMaker)", "server",
    set_by="deployment", shown_default="unset: no metric lines",
)  # fmt: skip
ALLOWED_ORIGINS: Final[Setting[str | None]] = declare(
    "VOICESTREAM_ALLOWED_ORIGINS", text, None,
    "web page origins (`scheme://host[:port]`, comma-separated) whose WebSocket handshakes the server "
    "accepts; a handshake that carries an `Origin` header is otherwise refused 403 (SageMaker's sidecar and "
    "SDK clients send none; docs/protocol.md)", "server", shown_default="none",
)  # fmt: skip

# --- session and request limits (wire.bidi.Limits: the defaults are its fields') -------------

_LIMITS: Final = Limits()
# The limits a user sets, with their meaning; the other fields of `Limits` are constructor arguments.
_LIMIT_DOCS: Final[dict[str, str]] = {
    "max_text_chars": "characters per synthesis request",
    "max_queued": "unfinished requests per session",
    "max_session_s": "seconds a session may last",
    "idle_timeout_s": "seconds without a message before a session is closed",
    "max_sessions": "sessions open at once per server",
    "max_message_bytes": "bytes per client message or request body",
    "max_phonemes": "phonemes per synthesis request, the measure of its work; more is refused with `text_too_complex`",
    "body_timeout_s": "seconds a client may take to send a POST body (every route); then 408 `request_timeout`",
    "max_g2p_queue": "requests waiting for or in their G2P work check, server-wide; more are refused `server_busy`",
    "max_consumer_lag_s": "seconds a client may fall behind real time reading audio before it is closed with "
    "`slow_consumer`",
}
_LIMIT_TYPES: Final = {spec.name: spec.type for spec in fields(Limits)}
LIMIT_SETTINGS: Final[dict[str, Setting[float]]] = {
    field: declare(
        f"VOICESTREAM_{field.upper()}",
        integer() if _LIMIT_TYPES[field] in ("int", int) else number,
        getattr(_LIMITS, field),
        doc,
        "limits",
    )
    for field, doc in _LIMIT_DOCS.items()
}
# The variable of each limit a user sets.
LIMIT_VARIABLES: Final[dict[str, str]] = {field: setting.name for field, setting in LIMIT_SETTINGS.items()}

# --- the speak function ---------------------------------------------------------------------

SPEECH_UPSTREAM: Final[Setting[str]] = declare(
    "SPEECH_UPSTREAM", text, "kokoro",
    "the speech server's protocol: kokoro (our Kokoro server) or vllm-omni (Qwen3-TTS on vLLM-Omni, "
    "docs/vllm-omni.md)", "speak",
)  # fmt: skip
KOKORO_WS_URL: Final[Setting[str | None]] = declare(
    "KOKORO_WS_URL", text, None,
    "the Kokoro server's base or bidi URL (local runs); exclusive with SAGEMAKER_ENDPOINT_NAME", "speak",
)  # fmt: skip
VLLM_OMNI_URL: Final[Setting[str | None]] = declare(
    "VLLM_OMNI_URL", text, None,
    "a vLLM-Omni server's base or /v1/audio/speech/stream URL (local runs), for SPEECH_UPSTREAM=vllm-omni; "
    "exclusive with SAGEMAKER_ENDPOINT_NAME", "speak",
)  # fmt: skip
SAGEMAKER_ENDPOINT_NAME: Final[Setting[str | None]] = declare(
    "SAGEMAKER_ENDPOINT_NAME", text, None,
    "the deployed speech endpoint (Kokoro, or vLLM-Omni with SPEECH_UPSTREAM=vllm-omni); needs AWS_REGION",
    "speak",
)  # fmt: skip
BEDROCK_MODEL_ID: Final[Setting[str | None]] = declare(
    "BEDROCK_MODEL_ID", text, None,
    "the Bedrock model that answers prompts; unset: prompts get the replayed canned reply", "speak",
)  # fmt: skip
BEDROCK_MAX_TOKENS: Final[Setting[int]] = declare(
    "BEDROCK_MAX_TOKENS", integer(1), 400, "the reply's token limit", "speak"
)
SPEAK_SYSTEM_PROMPT: Final[Setting[str | None]] = declare(
    "SPEAK_SYSTEM_PROMPT", text, None, "the agent's system prompt", "speak",
    shown_default="a short voice agent's prompt (speak/sources.py)",
)  # fmt: skip
SPEAK_MAX_DURATION_S: Final[Setting[float]] = declare(
    "SPEAK_MAX_DURATION_S", seconds, 300.0, "seconds a whole reply may take", "speak"
)
SPEAK_SILENCE_TIMEOUT_S: Final[Setting[float]] = declare(
    "SPEAK_SILENCE_TIMEOUT_S", seconds, 30.0,
    "seconds without a frame from the speech server before a reply fails", "speak",
)  # fmt: skip

# --- vLLM-Omni's session options (sent in `session.config`) ---------------------------------

VLLM_OMNI_VOICE: Final[Setting[str]] = declare(
    "VLLM_OMNI_VOICE", text, VLLM_OMNI_DEFAULT_VOICE,
    "the voice (a Qwen3-TTS CustomVoice speaker); a request's `voice` overrides it", "vllm-omni",
)  # fmt: skip
VLLM_OMNI_LANGUAGE: Final[Setting[str]] = declare(
    "VLLM_OMNI_LANGUAGE", text, "Auto", "the language (English, Chinese, Japanese, ... as Qwen3-TTS names them)",
    "vllm-omni",
)  # fmt: skip
VLLM_OMNI_SESSION_CONFIG: Final[Setting[dict[str, Any]]] = declare(
    "VLLM_OMNI_SESSION_CONFIG", json_object, {},
    "further `session.config` fields as a JSON object, e.g. `{\"task_type\": \"VoiceDesign\", \"instructions\": "
    "\"Calm and slow.\"}`, `{\"task_type\": \"Base\", \"ref_audio\": URL, \"ref_text\": TRANSCRIPT}` (cloning) or "
    "`{\"split_granularity\": \"sentence\"}` (servers up to v0.21); docs/vllm-omni.md lists the fields",
    "vllm-omni", shown_default="`{}` (split_granularity none: one request per piece voicestream sends)",
)  # fmt: skip

# --- the deploy commands --------------------------------------------------------------------

SAM_CLI_TELEMETRY: Final[Setting[str]] = declare(
    "SAM_CLI_TELEMETRY", text, "0", "passed to sam (0: no telemetry)", "deploy", set_by="platform"
)

# --- set by the platform or our deployment: voicestream reads them ----------------------------

XDG_CACHE_HOME: Final[Setting[Path | None]] = declare(
    "XDG_CACHE_HOME", path, None,
    "where the default model directory and derived graphs live (the image: /var/cache/voicestream, the only "
    "directory its user writes)", "platform",
    set_by="platform", shown_default="~/.cache",
)  # fmt: skip
AWS_REGION: Final[Setting[str | None]] = declare(
    "AWS_REGION", text, None, "the AWS region (Lambda sets it)", "platform", set_by="platform"
)
AWS_DEFAULT_REGION: Final[Setting[str | None]] = declare(
    "AWS_DEFAULT_REGION", text, None, "the AWS region when AWS_REGION is unset", "platform", set_by="platform"
)
LAMBDA_TASK_ROOT: Final[Setting[str | None]] = declare(
    "LAMBDA_TASK_ROOT", text, None, "present in Lambda: the speak app then forwards the X-Ray trace header",
    "platform", set_by="platform",
)  # fmt: skip
POWERTOOLS_SERVICE_NAME: Final[Setting[str]] = declare(
    "POWERTOOLS_SERVICE_NAME", text, "voicestream-speak", "service name in logs and metrics (the template: "
    "each function's name)", "platform", set_by="deployment",
)  # fmt: skip
POWERTOOLS_METRICS_NAMESPACE: Final[Setting[str]] = declare(
    "POWERTOOLS_METRICS_NAMESPACE", text, "voicestream", "CloudWatch metrics namespace",
    "platform", set_by="deployment",
)  # fmt: skip

# Variables voicestream no longer reads, and what replaced each (docs/configuration.md lists them).
RETIRED: Final[dict[str, str]] = {
    "VOICESTREAM_DECODER_WINDOWS": "the server's `--decoder-windows` argument (`off` or `first,growth,largest`); "
    "benchmarks construct the engine with `OnnxStrategy(decoder_windows=...)`",
    "VOICESTREAM_DERIVED_DIR": "`XDG_CACHE_HOME` (derived graphs go beside a writable model, else to the cache); "
    "`OnnxEngine(derived_dir=...)` in code",
    "VOICESTREAM_FRAME_MS": "`Limits(frame_ms=...)`; clients choose their frame length per session",
    "VOICESTREAM_MP3_BITRATE_KBPS": "`Limits(mp3_bitrate_kbps=...)`",
    "VOICESTREAM_KEEPALIVE_S": "`Limits(keepalive_s=...)`",
    "VOICESTREAM_MAX_BUFFERED_AUDIO_S": "`Limits(max_buffered_audio_s=...)`",
    "VOICESTREAM_PYTHON": "`PATH`: container/serve runs the first `python3` on it",
    "VOICESTREAM_SAM": "`PATH`: the deploy commands run the first `sam` on it (the Makefile puts .venv-sam's first)",
    "REPLAY_FIRST_TOKEN_MS": "`SpeakConfig(replay_pace=ReplayPace(first_token_s=...))` (tests and benchmarks)",
    "REPLAY_TOKENS_PER_S": "`SpeakConfig(replay_pace=ReplayPace(tokens_per_s=...))` (tests and benchmarks)",
    "BEDROCK_ENDPOINT_URL": "the AWS SDK's own `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`; "
    "`BedrockSettings(endpoint_url=...)` in code",
    "VLLM_OMNI_INSTRUCTIONS": '`VLLM_OMNI_SESSION_CONFIG` `{"instructions": ...}`',
    "VLLM_OMNI_TASK_TYPE": '`VLLM_OMNI_SESSION_CONFIG` `{"task_type": ...}`',
    "VLLM_OMNI_REF_AUDIO": '`VLLM_OMNI_SESSION_CONFIG` `{"ref_audio": ...}`',
    "VLLM_OMNI_REF_TEXT": '`VLLM_OMNI_SESSION_CONFIG` `{"ref_text": ...}`',
    "VLLM_OMNI_SPLIT_GRANULARITY": '`VLLM_OMNI_SESSION_CONFIG` `{"split_granularity": ...}`',
}

# Name -> meaning of every declared variable (the container's and template's variables must be among them).
VARIABLES: Final[dict[str, str]] = {setting.name: setting.doc for setting in SETTINGS}
_DECLARED: Final[dict[str, Setting[Any]]] = {setting.name: setting for setting in SETTINGS}


class Env:
    """Typed access to declared environment variables; empty values count as unset."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def text(self, name: str) -> str | None:
        """The raw value of a declared variable (None: unset or empty)."""
        if name not in _DECLARED:
            raise KeyError(f"{name} is not declared in voicestream.env")
        value = self._environ.get(name, "").strip()
        return value or None

    def get(self, setting: Setting[T]) -> T:
        """The setting's typed value: its declared default when unset; ConfigError when malformed."""
        raw = self.text(setting.name)
        return setting.default if raw is None else setting.parse(setting.name, raw)

    def retired(self) -> list[str]:
        """Retired variables still set here (the server logs them: a setting that no longer works)."""
        return sorted(name for name in RETIRED if self._environ.get(name, "").strip())


def cache_dir(env: Env | None = None) -> Path:
    """voicestream's cache: $XDG_CACHE_HOME (or ~/.cache)/voicestream."""
    return ((env or Env()).get(XDG_CACHE_HOME) or Path.home() / ".cache") / "voicestream"


def default_model_dir(env: Env | None = None) -> Path:
    """$VOICESTREAM_MODEL_DIR, else the cache's kokoro-82m."""
    env = env or Env()
    return env.get(MODEL_DIR) or cache_dir(env) / "kokoro-82m"


def aws_region(env: Env | None = None, default: str = "us-east-1") -> str:
    """$AWS_REGION (Lambda sets it), else $AWS_DEFAULT_REGION, else `default`."""
    return region(env) or default


def region(env: Env | None = None) -> str | None:
    """$AWS_REGION, else $AWS_DEFAULT_REGION, else None."""
    env = env or Env()
    return env.get(AWS_REGION) or env.get(AWS_DEFAULT_REGION)


def limits(env: Env | None = None) -> Limits:
    """`Limits` with every VOICESTREAM_* limit variable applied; ConfigError for a bad one."""
    env = env or Env()
    values = {field: env.get(setting) for field, setting in LIMIT_SETTINGS.items()}
    try:
        return Limits(**values)  # type: ignore[arg-type]  # each parsed as its field's type
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def allowed_origins(env: Env | None = None) -> tuple[str, ...]:
    """VOICESTREAM_ALLOWED_ORIGINS, split (`voicestream.origins`); ConfigError for one that is
    not scheme://host[:port]."""
    value = (env or Env()).get(ALLOWED_ORIGINS) or ""
    origins = tuple(part.strip() for part in value.split(",") if part.strip())
    for origin in origins:
        scheme, _, rest = origin.partition("://")
        if scheme not in ("http", "https") or not rest or "/" in rest.rstrip("/"):
            raise ConfigError(f"VOICESTREAM_ALLOWED_ORIGINS: {origin!r} is not an origin (scheme://host[:port])")
    return origins


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """How the Kokoro server process is set up (request and session limits are `Limits`).
    Each default is its variable's declared one."""

    host: str = HOST.default
    port: int = PORT.default
    backend: Backend = BACKEND.default
    model_dir: Path | None = MODEL_DIR.default  # None: default_model_dir()
    threads: int | None = THREADS.default  # None: the engine's default
    synth_workers: int = SYNTH_WORKERS.default
    log_level: LogLevel = LOG_LEVEL.default
    # None: the backend chooses (torch takes CUDA when it can). "cuda": no GPU means no service
    # (/ping stays 503 and the log says why) rather than a silent fall back to the CPU.
    device: str | None = DEVICE.default
    # Not environment variables: command-line arguments and code (RETIRED says why).
    derived_dir: Path | None = None  # None: the engine's default (beside the model, else the cache)
    decoder_windows: DecoderWindows | None = None  # None: the engine's default plan
    g2p_workers: int = G2P_WORKERS.default
    g2p_timeout_s: float = G2P_TIMEOUT_S.default
    header_timeout_s: float = HEADER_TIMEOUT_S.default
    max_connections: int = MAX_CONNECTIONS.default

    def __post_init__(self) -> None:
        if self.device is not None and self.device.split(":", 1)[0] not in DEVICES:
            raise ConfigError(f"VOICESTREAM_DEVICE={self.device!r}: use cpu, cuda or cuda:<index>")
        for name in ("synth_workers", "g2p_workers", "max_connections"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be at least 1, got {self.threads}")
        for name in ("g2p_timeout_s", "header_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")


def server_settings(env: Env | None = None) -> ServerSettings:
    env = env or Env()
    return ServerSettings(
        host=env.get(HOST),
        port=env.get(PORT),
        backend=env.get(BACKEND),
        model_dir=env.get(MODEL_DIR),
        threads=env.get(THREADS),
        synth_workers=env.get(SYNTH_WORKERS),
        log_level=env.get(LOG_LEVEL),
        device=env.get(DEVICE),
        g2p_workers=env.get(G2P_WORKERS),
        g2p_timeout_s=env.get(G2P_TIMEOUT_S),
        header_timeout_s=env.get(HEADER_TIMEOUT_S),
        max_connections=env.get(MAX_CONNECTIONS),
    )


def decoder_windows(raw: str, name: str = "--decoder-windows") -> DecoderWindows:
    """The server's `--decoder-windows` argument: "off", or first,growth,largest."""
    if raw.strip().lower() == "off":
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


def export_default(name: str, value: str) -> None:
    """`export` where the variable is unset: a value the user set wins (libgomp's wait policy)."""
    os.environ.setdefault(name, value)
