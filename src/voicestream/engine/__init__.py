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
from voicestream.engine.text.g2p import G2PSettings
from voicestream.env import BACKENDS, Backend, DecoderWindows
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
    "derive_torch_weights",
    "load_engine",
]


def create_engine(
    backend: Backend = "onnx",
    model_dir: Path | None = None,
    threads: int | None = None,
    device: str | None = None,
    *,
    derived_dir: Path | None = None,
    decoder_windows: DecoderWindows | None = None,
    g2p: G2PSettings | None = None,
) -> SpeechEngine:
    """An engine of `backend`, not loaded yet. `model_dir` None: `voicestream.env.default_model_dir()`;
    `threads` None: the engine's default. `device` None lets the backend choose (torch: CUDA when
    available); "cuda" makes loading fail when CUDA is not usable, instead of quietly running on
    the CPU. `derived_dir`: where derived files live (onnx: the split graphs; torch: weights derived
    from the int8 export, in its `derived-torch/`). `decoder_windows` (onnx): the
    decoder's window sizes (first, growth, largest) or "off"; None: the engine's defaults. `g2p`:
    the G2P worker processes of the shared front end (frontend.py)."""
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise EngineError(f"the onnx backend runs on the CPU only, not on {device!r}: use torch for CUDA")
        from voicestream.engine.onnx.engine import PRODUCTION, OnnxEngine, OnnxStrategy, window_plan

        strategy = PRODUCTION if decoder_windows is None else OnnxStrategy(window_plan(decoder_windows))
        return OnnxEngine(model_dir=model_dir, threads=threads, strategy=strategy, derived_dir=derived_dir, g2p=g2p)
    if backend == "torch":
        # Imported here: torch is only installed where the torch extra is (the GPU container).
        from voicestream.engine.torch.engine import TorchEngine
        from voicestream.engine.torch.weights import DERIVED_DIR

        # Without hexgrad's checkpoint it derives one from the int8 export (torch_weights.py).
        torch_derived = derived_dir / DERIVED_DIR if derived_dir is not None else None
        return TorchEngine(model_dir=model_dir, device=device, threads=threads, g2p=g2p, derived_dir=torch_derived)
    raise EngineError(f"unknown engine backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def load_engine(
    backend: Backend = "onnx",
    model_dir: Path | None = None,
    threads: int | None = None,
    device: str | None = None,
    *,
    g2p: G2PSettings | None = None,
) -> SpeechEngine:
    """Create and load an engine: weights verified and loaded, G2P warmed."""
    engine = create_engine(backend, model_dir, threads, device, g2p=g2p)
    engine.load()
    return engine


def derive_torch_weights(model_dir: Path | None = None) -> Path | None:
    """Where the torch engine is installed, its checkpoint derived now (once) from the model
    directory's int8 export, where the engine looks for it, rather than at its first load; the
    checkpoint's path. None: torch or kokoro is not installed, or the directory holds hexgrad's
    own checkpoint (used as it is) or no int8 export."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("kokoro") is None:
        return None
    from voicestream.engine.models.torch_assets import CHECKPOINT_FILE, CONFIG_FILE
    from voicestream.engine.torch.weights import derived_checkpoint, int8_source
    from voicestream.env import default_model_dir

    root = model_dir or default_model_dir()
    source = int8_source(root)
    if source is None or (root / CHECKPOINT_FILE).is_file():
        return None
    return derived_checkpoint(source, root / CONFIG_FILE)
