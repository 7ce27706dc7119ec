"""How the server process is set up: engine backend, threads, workers (from env or arguments).

Request and session limits are part of the wire contract and live in protocol.Limits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEVICES = ("cpu", "cuda")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Process-level settings. Environment: VOICESTREAM_BACKEND, VOICESTREAM_DEVICE,
    VOICESTREAM_MODEL_DIR, VOICESTREAM_THREADS, VOICESTREAM_SYNTH_WORKERS, VOICESTREAM_LOG_LEVEL."""

    backend: str | None = None  # None: the engine package's default ($VOICESTREAM_BACKEND, else onnx)
    model_dir: Path | None = None
    threads: int | None = None  # inference threads per synthesis
    # Syntheses that run at once across all sessions (each in its own worker thread).
    synth_workers: int = 2
    log_level: str = "INFO"
    # None: the backend chooses (torch takes CUDA when it can). "cuda": no GPU means no service
    # (/ping stays 503 and the log says why) rather than a silent fall back to the CPU.
    device: str | None = None

    def __post_init__(self) -> None:
        if self.synth_workers < 1:
            raise ValueError(f"synth_workers must be at least 1, got {self.synth_workers}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be at least 1, got {self.threads}")
        if self.device is not None and self.device.split(":", 1)[0] not in DEVICES:
            raise ValueError(f"VOICESTREAM_DEVICE={self.device!r}: use cpu, cuda or cuda:<index>")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerConfig:
        env = os.environ if environ is None else environ
        model_dir = env.get("VOICESTREAM_MODEL_DIR")
        workers = _int(env, "VOICESTREAM_SYNTH_WORKERS")
        return cls(
            backend=env.get("VOICESTREAM_BACKEND") or None,
            device=(env.get("VOICESTREAM_DEVICE") or "").strip().lower() or None,
            model_dir=Path(model_dir) if model_dir else None,
            threads=_int(env, "VOICESTREAM_THREADS"),
            synth_workers=2 if workers is None else workers,
            log_level=(env.get("VOICESTREAM_LOG_LEVEL") or "INFO").upper(),
        )


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
