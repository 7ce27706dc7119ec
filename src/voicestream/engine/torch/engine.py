"""Kokoro-82M on PyTorch through the `kokoro` package (its KModel): the GPU engine.

This is the production container's engine. It loads everything from a local model
directory (see torch_assets.py) and never downloads. One KModel serves every language;
text becomes phonemes in the front end every engine shares (frontend.py: misaki in pooled,
time-bounded worker processes, so one session's pathological text neither stalls another's
nor runs unbounded). Requests from several worker threads overlap on the model.

Streaming inside a sentence: the pipeline every engine shares (streaming/pipeline.py,
docs/engine.md) over the KModel split (split.py): per phoneme piece the encoder runs once (a long
piece's head first, joined to the whole piece's encoding: lookahead.py, split.py `join`), then
the decoder runs over windows of frames (windows.py), each window's audio yielded as soon as it
is computed, paced to the listener, the leading silence cut. `decoder_windows=None` decodes each
piece in one window: KModel.forward's samples exactly (the same random source noise).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from voicestream.engine.base import AudioChunk, EngineError, check_voice
from voicestream.engine.kokoro import KokoroEngine
from voicestream.engine.models.torch_assets import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    TorchAssets,
    blend_voices,
    check_checkpoint,
    load_voice_tensor,
    open_checkpoint,
    read_config,
    torch_assets,
)
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.lookahead import LookaheadPlan
from voicestream.engine.streaming.pipeline import LEAD_IN_FRAMES, Pipeline, Streaming
from voicestream.engine.streaming.windows import WindowPlan
from voicestream.engine.text.frontend import PhonemeSource
from voicestream.engine.text.g2p import G2PSettings, Phonemes
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.engine.torch.fused import fold_weight_norms, with_fused_gelu
from voicestream.engine.torch.kmodel import REPO_ID, import_kmodel, import_kpipeline
from voicestream.engine.torch.plan import DEFAULT_LOOKAHEAD, DEFAULT_WINDOWS, PACING_MARGIN
from voicestream.engine.torch.split import TorchSentenceFeatures, TorchSplitRuntime
from voicestream.engine.torch.weights import derived_checkpoint, int8_source
from voicestream.env import default_model_dir
from voicestream.wire.bidi import DEFAULT_VOICE


def import_kokoro() -> tuple[Any, Any]:
    """(KModel, KPipeline); the engine itself needs only KModel (kmodel.py: without misaki)."""
    return import_kmodel(), import_kpipeline()


class TorchEngine(KokoroEngine):
    name = "torch"

    def __init__(
        self,
        model_dir: Path | None = None,
        device: str | None = None,
        threads: int | None = None,
        *,
        decoder_windows: WindowPlan | None = DEFAULT_WINDOWS,
        lookahead: LookaheadPlan | None = DEFAULT_LOOKAHEAD,
        g2p: G2PSettings | None = None,
        derived_dir: Path | None = None,
        pacing: bool = True,
        lead_in_frames: int | None = LEAD_IN_FRAMES,
        phonemes: PhonemeSource | None = None,
        fused: bool = True,
    ) -> None:
        """`device` None picks CUDA when available; `threads` sets torch's (process-wide) CPU threads;
        `decoder_windows` None decodes each piece whole, leading silence included (one chunk per
        piece: KModel.forward's samples); `lookahead`: how a long piece's head is encoded first
        (lookahead.py; None: every piece encoded whole); with windows, the leading silence is cut to
        `lead_in_frames` (None: kept) and, with `pacing`, later windows are cut to what this
        engine decodes while the listener's audio plays (streaming/pacing.py); `g2p`: the front
        end's worker processes (each conversion time-bounded: g2p.py). Weights: the model
        directory's kokoro-v1_0.pth (hexgrad's, the production path); without it, weights derived
        once from the directory's int8 ONNX export (torch_weights.py) into `derived_dir` (default:
        `derived-torch/` beside the model when writable, else voicestream's cache). `phonemes`: the
        front end's source in place of the G2P pool (a PhonemeTable: benchmarks/gpu_check.py).
        `fused`: the generator's blocks in fewer passes over memory (fused.py); False runs kokoro's
        own modules (KModel.forward's samples bit for bit, ~1.3x the decoding time on a CPU)."""
        super().__init__(g2p, phonemes)
        self.model_dir = model_dir or default_model_dir()
        self.requested_device = device
        self.threads = threads
        self.decoder_windows = decoder_windows
        self.lookahead = lookahead
        self.pacing = pacing
        self.lead_in_frames = lead_in_frames
        self.derived_dir = derived_dir
        self.fused = fused
        self.device = ""
        self._assets: TorchAssets | None = None
        self._model: Any = None
        self._split: TorchSplitRuntime | None = None
        self._pipeline: Pipeline[TorchSentenceFeatures, torch.Tensor] | None = None
        self._voice_lock = threading.Lock()
        self._voice_files: dict[str, torch.Tensor] = {}

    def _load(self) -> None:
        assets = self._locate_assets()
        config = read_config(assets.config)
        checkpoint = open_checkpoint(assets.checkpoint)
        self.device = self._resolve_device()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        kmodel_class = import_kmodel()
        with warnings.catch_warnings():
            # torch's deprecation notes about weight_norm and LSTM dropout inside kokoro's modules.
            warnings.simplefilter("ignore", (UserWarning, FutureWarning))
            model = kmodel_class(repo_id=REPO_ID, config=with_fused_gelu(config), model=str(assets.checkpoint))
        check_checkpoint(assets.checkpoint, checkpoint, model)
        self._model = model.to(self.device).eval()
        fold_weight_norms(self._model)  # after the checkpoint's check: it reads weight_g and weight_v
        self._split = TorchSplitRuntime(self._model, fused=self.fused)
        self._frontend.vocabulary = frozenset(self._model.vocab)
        self._pipeline = Pipeline(self._split, self._model.vocab, self.streaming(), join=self._split.join)
        self._assets = assets
        # Warm the default voice end to end: G2P workers, voice file, first-inference kernel
        # setup (seconds on CUDA) happen here instead of in the first request.
        self._frontend.warm()
        for _chunk in self._run(self._prepare("Hello.", DEFAULT_VOICE, 1.0)):
            pass

    def _locate_assets(self) -> TorchAssets:
        """hexgrad's checkpoint when the directory holds it; else one derived from the int8 export."""
        root = self.model_dir
        source = int8_source(root)
        if not (root / CHECKPOINT_FILE).is_file() and source is not None and (root / CONFIG_FILE).is_file():
            checkpoint = derived_checkpoint(source, root / CONFIG_FILE, self.derived_dir)
            return TorchAssets(root=root, config=root / CONFIG_FILE, checkpoint=checkpoint)
        return torch_assets(root)

    def streaming(self) -> Streaming:
        """What the shared pipeline (streaming/pipeline.py) is told."""
        windows = self.decoder_windows
        return Streaming(
            windows=windows,
            lookahead=self.lookahead,
            lead_in_frames=None if windows is None else self.lead_in_frames,
            pacing=self.pacing,
            pacing_margin=PACING_MARGIN,
        )

    @property
    def assets(self) -> TorchAssets:
        """The files the loaded model came from."""
        if self._assets is None:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        return self._assets

    @property
    def split(self) -> TorchSplitRuntime:
        """The loaded model as encoder + window decoder."""
        if self._split is None:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        return self._split

    def _resolve_device(self) -> str:
        device = self.requested_device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            # Refuse instead of falling back: a GPU endpoint on the CPU passes every check but
            # speaks several times slower, at GPU prices.
            raise EngineError(
                f"device {device!r} requested but CUDA is not available to torch {torch.__version__} "
                f"(built for CUDA {torch.version.cuda}): no GPU is visible, or the NVIDIA driver is older "
                "than that CUDA needs (on SageMaker: the endpoint config's InferenceAmiVersion, "
                "docs/deploy.md). Set VOICESTREAM_DEVICE=cpu to run on the CPU on purpose."
            )
        return device

    def voice_tensor(self, spec: str) -> torch.Tensor:
        """The (blended) style table [510, 1, 256] of a voice spec, on the model's device."""
        assets = self._assets
        if assets is None:
            raise EngineError("torch engine is not loaded: call load() first")
        blend = check_voice(spec, self.voices())
        # Blends are computed per request (microseconds): caching them would let clients grow
        # memory without bound with ever new weights. Voice files are read once.
        return blend_voices([(self._voice_file(assets, name), weight) for name, weight in blend.parts])

    def _voice_file(self, assets: TorchAssets, name: str) -> torch.Tensor:
        with self._voice_lock:
            tensor = self._voice_files.get(name)
            if tensor is None:
                tensor = self._voice_files[name] = load_voice_tensor(assets.voice_path(name)).to(self.device)
            return tensor

    def _synthesize(
        self, text: str, voice: str, speed: float, listener: Listener, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        # G2P and voice loading happen now, so their errors surface at the call, not mid-stream.
        return self._run(self._prepare(text, voice, speed, text_options), listener)

    def _prepare(
        self, text: str, voice: str, speed: float, text_options: TextOptions = DEFAULT_TEXT_OPTIONS
    ) -> _Request:
        return _Request(self.phoneme_pieces(text, voice, text_options), self.voice_tensor(voice), speed)

    def _run(self, request: _Request, listener: Listener | None = None) -> Iterator[AudioChunk]:
        """The shared pipeline over the KModel split (KPipeline's steps, minus its G2P)."""
        pipeline = self._pipeline
        if pipeline is None:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        voice = request.voice

        def style_of(piece: Phonemes, _ids: list[int]) -> torch.Tensor:
            return voice[len(piece.text) - 1]  # KPipeline's row: by the phoneme string's length

        chunks = pipeline.run(request.pieces, style_of, request.speed, listener or Listener())
        # The contract is [-1, 1]; Kokoro peaks slightly beyond it now and then.
        return (AudioChunk(samples=np.clip(chunk.samples, -1.0, 1.0), words=chunk.words) for chunk in chunks)


class _Request:
    """Everything one synthesis needs after G2P: the model's work."""

    __slots__ = ("pieces", "speed", "voice")

    def __init__(self, pieces: list[Phonemes], voice: torch.Tensor, speed: float) -> None:
        self.pieces = pieces
        self.voice = voice
        self.speed = speed
