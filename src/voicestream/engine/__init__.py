"""Speech engines behind one small interface (see base.py); `load_engine` picks and loads one."""

from __future__ import annotations

from pathlib import Path

from voicestream.engine.base import (
    AudioChunk,
    EngineError,
    InvalidRequestError,
    SpeechEngine,
    UnknownVoiceError,
    WordTiming,
)
from voicestream.engine.encoders import to_pcm16
from voicestream.engine.g2p import G2PSettings
from voicestream.env import BACKENDS, Backend
from voicestream.wire.bidi import DEFAULT_VOICE, SAMPLE_RATE

__all__ = [
    "BACKENDS",
    "DEFAULT_VOICE",
    "SAMPLE_RATE",
    "AudioChunk",
    "Backend",
    "EngineError",
    "G2PSettings",
    "InvalidRequestError",
    "SpeechEngine",
    "UnknownVoiceError",
    "WordTiming",
    "create_engine",
    "load_engine",
    "to_pcm16",
]


def create_engine(
    backend: Backend = "onnx", model_dir: Path | None = None, threads: int | None = None, g2p: G2PSettings | None = None
) -> SpeechEngine:
    """An engine of `backend`, not loaded yet. `model_dir` None: `voicestream.env.default_model_dir()`;
    `threads` None: the engine's default; `g2p`: the ONNX engine's G2P worker processes."""
    if backend == "onnx":
        from voicestream.engine.onnx import OnnxEngine

        return OnnxEngine(model_dir=model_dir, threads=threads, g2p=g2p)
    if backend == "torch":
        # Imported here: torch is only installed where the torch extra is (the GPU container).
        from voicestream.engine.torch import TorchEngine

        return TorchEngine(model_dir=model_dir, threads=threads)
    raise EngineError(f"unknown engine backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def load_engine(
    backend: Backend = "onnx", model_dir: Path | None = None, threads: int | None = None, g2p: G2PSettings | None = None
) -> SpeechEngine:
    """Create and load an engine: weights verified and loaded, G2P warmed."""
    engine = create_engine(backend, model_dir, threads, g2p)
    engine.load()
    return engine
