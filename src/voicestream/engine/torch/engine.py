"""Kokoro-82M on PyTorch through the `kokoro` package (its KModel): the GPU engine.

This is the production container's engine. It loads everything from a local model
directory (see torch_assets.py) and never downloads. One KModel serves every language;
text becomes phonemes in the front end every engine shares (frontend.py: misaki in pooled,
time-bounded worker processes, so one session's pathological text neither stalls another's
nor runs unbounded). Requests from several worker threads overlap on the model.

Streaming inside a sentence (torch_split.py, docs/engine.md): per phoneme piece the encoder runs
once, then the decoder runs over windows of frames (windows.py, the ONNX engine's plan and
stitcher), each window's audio yielded as soon as it is computed. `decoder_windows=None` decodes
each piece in one window: KModel.forward's samples exactly (the same random source noise).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from voicestream.engine.base import AudioChunk, EngineError, SpeechEngine, WordTiming, check_voice
from voicestream.engine.models.assets import default_model_dir
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
from voicestream.engine.streaming.windows import WindowPlan, for_listener
from voicestream.engine.streaming.word_timings import tokenize, words_starting_in
from voicestream.engine.text.frontend import PhonemeSource, TextFrontend
from voicestream.engine.text.g2p import G2PSettings, Phonemes
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.engine.torch.kmodel import import_kmodel, import_kpipeline
from voicestream.engine.torch.split import TorchSplitRuntime
from voicestream.engine.torch.weights import derived_checkpoint, int8_source
from voicestream.wire.bidi import DEFAULT_VOICE, SAMPLE_RATE
from voicestream.wire.voices import OFFICIAL_VOICES

REPO_ID = "hexgrad/Kokoro-82M"  # names the architecture for kokoro; nothing is fetched from it
# One cut (torch_split.py: the whole decoder per window), so no separate frontend context: 16
# context frames cover the decoder's receptive field (14 frames each side, measured on KModel in
# tests/torch/test_torch_streaming.py) with 2 to spare. Windows double: a GPU decodes a long
# window about as fast as a short one, so fewer seams cost nothing.
DEFAULT_WINDOWS = WindowPlan(first=12, growth=2.0, largest=240, context=16, frontend_context=0, crossfade=2)


def import_kokoro() -> tuple[Any, Any]:
    """(KModel, KPipeline); the engine itself needs only KModel (kmodel.py: without misaki)."""
    return import_kmodel(), import_kpipeline()


class TorchEngine(SpeechEngine):
    name = "torch"

    def __init__(
        self,
        model_dir: Path | None = None,
        device: str | None = None,
        threads: int | None = None,
        *,
        decoder_windows: WindowPlan | None = DEFAULT_WINDOWS,
        g2p: G2PSettings | None = None,
        derived_dir: Path | None = None,
        phonemes: PhonemeSource | None = None,
    ) -> None:
        """`device` None picks CUDA when available; `threads` sets torch's (process-wide) CPU threads;
        `decoder_windows` None decodes each piece whole (one chunk per piece); `g2p`: the front
        end's worker processes (each conversion time-bounded: g2p.py). Weights: the model
        directory's kokoro-v1_0.pth (hexgrad's, the production path); without it, weights derived
        once from the directory's int8 ONNX export (torch_weights.py) into `derived_dir` (default:
        `derived-torch/` beside the model when writable, else voicestream's cache). `phonemes`: the
        front end's source in place of the G2P pool (a PhonemeTable: benchmarks/gpu_check.py)."""
        super().__init__()
        self.model_dir = model_dir or default_model_dir()
        self.requested_device = device
        self.threads = threads
        self.decoder_windows = decoder_windows
        self.derived_dir = derived_dir
        self.device = ""
        self._assets: TorchAssets | None = None
        self._model: Any = None
        self._split: TorchSplitRuntime | None = None
        self._frontend = TextFrontend(self.voices(), g2p, source=phonemes)
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
            model = kmodel_class(repo_id=REPO_ID, config=config, model=str(assets.checkpoint))
        check_checkpoint(assets.checkpoint, checkpoint, model)
        self._model = model.to(self.device).eval()
        self._split = TorchSplitRuntime(self._model)
        self._frontend.vocabulary = frozenset(self._model.vocab)
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

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def close(self) -> None:
        self._frontend.close()

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

    def phonemes(self, text: str, voice: str, text_options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[str]:
        """The phoneme pieces (each <= 510) that `synthesize` would speak for `text`."""
        return [piece.text for piece in self._frontend.pieces(text, voice, text_options)]

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        return self._frontend.count(texts, voice, text_options)

    def phoneme_vocabulary(self) -> frozenset[str]:
        return self._frontend.vocabulary

    def _phonemize(self, texts: list[str], voice: str, text_options: TextOptions) -> list[str]:
        return [phonemes.text for phonemes in self._frontend.phonemize(texts, voice, text_options)]

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        # G2P and voice loading happen now, so their errors surface at the call, not mid-stream.
        return self._run(self._prepare(text, voice, speed, text_options), ahead_s, behind)

    def _prepare(
        self, text: str, voice: str, speed: float, text_options: TextOptions = DEFAULT_TEXT_OPTIONS
    ) -> _Request:
        return _Request(self._frontend.pieces(text, voice, text_options), self.voice_tensor(voice), speed)

    def _run(self, request: _Request, ahead_s: float = 0.0, behind: bool = False) -> Iterator[AudioChunk]:
        """Per piece: encode once, then one chunk per decoder window (KPipeline's steps, minus its G2P)."""
        split, offset_s = self.split, 0.0
        frame_s = split.samples_per_frame / SAMPLE_RATE
        for index, piece in enumerate(request.pieces):
            ids, token_words = tokenize(piece, split.model.vocab)
            if not ids:  # nothing the model's vocabulary speaks
                continue
            phonemes = piece.text
            # Only the first piece knows what is ahead of it (windows.py's `ahead`).
            plan = for_listener(self.decoder_windows, frame_s, ahead_s=ahead_s if index == 0 else 0.0, behind=behind)
            # Grad mode is thread-local: inference mode is entered around model calls only, never
            # across a yield into the consumer's code (split.stream does the same per window).
            with torch.inference_mode():
                features = split.encode(phonemes, request.voice[len(phonemes) - 1], request.speed)
            words = words_starting_in(token_words, features.durations.numpy()[None], 0, features.frames, offset_s)
            total = features.frames * split.samples_per_frame
            emitted = 0
            for samples in split.stream(features, plan):
                emitted += len(samples)
                end_s = offset_s + emitted / SAMPLE_RATE
                # Each word goes with the chunk it starts in; the piece's last chunk takes the rest.
                starting, words = _words_starting_before(words, end_s) if emitted < total else (words, ())
                # The contract is [-1, 1]; Kokoro peaks slightly beyond it now and then.
                yield AudioChunk(samples=np.clip(samples, -1.0, 1.0), words=starting)
            offset_s += total / SAMPLE_RATE


class _Request:
    """Everything one synthesis needs after G2P: the model's work."""

    __slots__ = ("pieces", "speed", "voice")

    def __init__(self, pieces: list[Phonemes], voice: torch.Tensor, speed: float) -> None:
        self.pieces = pieces
        self.voice = voice
        self.speed = speed


def _words_starting_before(
    words: tuple[WordTiming, ...], end_s: float
) -> tuple[tuple[WordTiming, ...], tuple[WordTiming, ...]]:
    """(the words, in order, that start before `end_s`; the rest)."""
    count = next((index for index, word in enumerate(words) if word.start_s >= end_s), len(words))
    return words[:count], words[count:]
