"""Kokoro-82M on PyTorch through the `kokoro` package (KModel + KPipeline): the GPU engine.

This is the production container's engine. It loads everything from a local model
directory (see torch_assets.py) and never downloads. One KModel serves every language;
one KPipeline (misaki G2P) per language actually used, built on first use.

Threads: G2P (misaki, spaCy, espeak-ng's process-global state) runs under one lock;
inference runs outside it, so requests from several worker threads overlap on the model.

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

from voicestream import env
from voicestream.engine.base import (
    AudioChunk,
    EngineError,
    SpeechEngine,
    UnsupportedLanguageError,
    WordTiming,
    check_voice,
)
from voicestream.engine.models.assets import default_model_dir
from voicestream.engine.models.torch_assets import (
    TorchAssets,
    blend_voices,
    check_checkpoint,
    load_voice_tensor,
    open_checkpoint,
    read_config,
    torch_assets,
)
from voicestream.engine.streaming.windows import WindowPlan, for_listener
from voicestream.engine.text.g2p import MAX_PHONEMES, split_phonemes
from voicestream.engine.torch.split import TorchSplitRuntime
from voicestream.wire.bidi import DEFAULT_VOICE, SAMPLE_RATE
from voicestream.wire.voices import LANGUAGE_OF_PREFIX, OFFICIAL_VOICES

REPO_ID = "hexgrad/Kokoro-82M"  # names the architecture for kokoro; nothing is fetched from it
ENGLISH_CODES = ("a", "b")  # kokoro's lang_codes whose G2P yields word tokens (and so timings)
# One cut (torch_split.py: the whole decoder per window), so no separate frontend context: 16
# context frames cover the decoder's receptive field (14 frames each side, measured on KModel in
# tests/torch/test_torch_streaming.py) with 2 to spare. Windows double: a GPU decodes a long
# window about as fast as a short one, so fewer seams cost nothing.
DEFAULT_WINDOWS = WindowPlan(first=12, growth=2.0, largest=240, context=16, frontend_context=0, crossfade=2)


def import_kokoro() -> tuple[Any, Any]:
    # Every file is passed explicitly, so a download attempt is a bug: fail at once, not after
    # ~25 s of retries. huggingface_hub reads this when first imported, hence before kokoro.
    env.export("HF_HUB_OFFLINE", "1")
    from kokoro import KModel, KPipeline

    return KModel, KPipeline


class TorchEngine(SpeechEngine):
    name = "torch"

    def __init__(
        self,
        model_dir: Path | None = None,
        device: str | None = None,
        threads: int | None = None,
        *,
        decoder_windows: WindowPlan | None = DEFAULT_WINDOWS,
    ) -> None:
        """`device` None picks CUDA when available; `threads` sets torch's (process-wide) CPU threads;
        `decoder_windows` None decodes each piece whole (one chunk per piece)."""
        super().__init__()
        self.model_dir = model_dir or default_model_dir()
        self.requested_device = device
        self.threads = threads
        self.decoder_windows = decoder_windows
        self.device = ""
        self._assets: TorchAssets | None = None
        self._model: Any = None
        self._split: TorchSplitRuntime | None = None
        self._pipeline_class: Any = None
        self._pipelines: dict[str, Any] = {}
        self._g2p_lock = threading.Lock()
        self._voice_lock = threading.Lock()
        self._voice_files: dict[str, torch.Tensor] = {}

    def _load(self) -> None:
        assets = torch_assets(self.model_dir)
        config = read_config(assets.config)
        checkpoint = open_checkpoint(assets.checkpoint)
        self.device = self._resolve_device()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        kmodel_class, self._pipeline_class = import_kokoro()
        with warnings.catch_warnings():
            # torch's deprecation notes about weight_norm and LSTM dropout inside kokoro's modules.
            warnings.simplefilter("ignore", (UserWarning, FutureWarning))
            model = kmodel_class(repo_id=REPO_ID, config=config, model=str(assets.checkpoint))
        check_checkpoint(assets.checkpoint, checkpoint, model)
        self._model = model.to(self.device).eval()
        self._split = TorchSplitRuntime(self._model)
        self._assets = assets
        # Warm the default voice end to end: US G2P, voice file, first-inference kernel setup
        # (seconds on CUDA) happen here instead of in the first request.
        for _chunk in self._run(self._prepare("Hello.", DEFAULT_VOICE, 1.0)):
            pass

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

    def phonemes(self, text: str, voice: str) -> list[str]:
        """The phoneme pieces (each <= 510) that `synthesize` would speak for `text`."""
        return [phonemes for phonemes, _ in self._phonemize(" ".join(text.split()), voice)]

    def _count_phonemes(self, texts: list[str], voice: str) -> int:
        # In-process G2P under the lock (the ONNX engine's runs in time-bounded worker processes).
        return sum(len(piece) for text in texts for piece in self.phonemes(text, voice))

    def _synthesize(self, text: str, voice: str, speed: float, ahead_s: float, behind: bool) -> Iterator[AudioChunk]:
        # G2P and voice loading happen now, so their errors surface at the call, not mid-stream.
        return self._run(self._prepare(text, voice, speed), ahead_s, behind)

    def _prepare(self, text: str, voice: str, speed: float) -> _Request:
        # The chunker sends one sentence: newlines are spaces (KPipeline would split at them).
        pieces = self._phonemize(" ".join(text.split()), voice)
        return _Request(pieces, self.voice_tensor(voice), speed)

    def _phonemize(self, text: str, voice: str) -> list[tuple[str, Any]]:
        """(phonemes, word tokens) pieces of at most 510 phonemes; tokens only for English."""
        code = check_voice(voice, self.voices()).parts[0][0][0]
        with self._g2p_lock:
            pipeline = self._pipeline(code)
            phonemes, tokens = pipeline.g2p(text)
        if code not in ENGLISH_CODES:
            return [(piece, None) for piece in split_phonemes(phonemes) if piece]
        pieces: list[tuple[str, Any]] = []
        # KPipeline's own cutter, at punctuation near 510 phonemes: it keeps each piece's tokens.
        for _, piece, piece_tokens in pipeline.en_tokenize(tokens):
            if len(piece) <= MAX_PHONEMES:
                pieces.append((piece, piece_tokens))
            else:  # one giant token (kokoro would truncate it): cut it, without timings
                pieces.extend((part, None) for part in split_phonemes(piece))
        return [(piece, piece_tokens) for piece, piece_tokens in pieces if piece]

    def _pipeline(self, code: str) -> Any:
        """The KPipeline of one language, built once (the caller holds the G2P lock)."""
        pipeline = self._pipelines.get(code)
        if pipeline is None:
            try:
                pipeline = self._pipeline_class(lang_code=code, repo_id=REPO_ID, model=self._model)
            except ImportError as error:
                language = LANGUAGE_OF_PREFIX.get(code, code)
                raise UnsupportedLanguageError(
                    f"voices of language {language!r} need misaki's extra for it ({error.name} is not "
                    "installed); use an English (a*/b*), Spanish, French, Hindi, Italian or Portuguese voice"
                ) from None
            self._pipelines[code] = pipeline
        return pipeline

    def _run(self, request: _Request, ahead_s: float = 0.0, behind: bool = False) -> Iterator[AudioChunk]:
        """Per piece: encode once, then one chunk per decoder window (KPipeline's steps, minus its G2P)."""
        split, offset_s = self.split, 0.0
        frame_s = split.samples_per_frame / SAMPLE_RATE
        for index, (phonemes, tokens) in enumerate(request.pieces):
            # Only the first piece knows what is ahead of it (windows.py's `ahead`).
            plan = for_listener(self.decoder_windows, frame_s, ahead_s=ahead_s if index == 0 else 0.0, behind=behind)
            # Grad mode is thread-local: inference mode is entered around model calls only, never
            # across a yield into the consumer's code (split.stream does the same per window).
            with torch.inference_mode():
                features = split.encode(phonemes, request.voice[len(phonemes) - 1], request.speed)
            words: tuple[WordTiming, ...] = ()
            if tokens is not None:
                self._pipeline_class.join_timestamps(tokens, features.durations)
                words = _word_timings(tokens, offset_s)
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
    """Everything one synthesis needs after G2P: the work that runs outside the G2P lock."""

    __slots__ = ("pieces", "speed", "voice")

    def __init__(self, pieces: list[tuple[str, Any]], voice: torch.Tensor, speed: float) -> None:
        self.pieces = pieces
        self.voice = voice
        self.speed = speed


def _words_starting_before(
    words: tuple[WordTiming, ...], end_s: float
) -> tuple[tuple[WordTiming, ...], tuple[WordTiming, ...]]:
    """(the words, in order, that start before `end_s`; the rest)."""
    count = next((index for index, word in enumerate(words) if word.start_s >= end_s), len(words))
    return words[:count], words[count:]


def _word_timings(tokens: Any, offset_s: float) -> tuple[WordTiming, ...]:
    """Word timings from misaki tokens that kokoro stamped (start_ts/end_ts, seconds in the piece)."""
    timings = []
    for token in tokens:
        start, end = getattr(token, "start_ts", None), getattr(token, "end_ts", None)
        # Punctuation tokens get stamps too; captions want words.
        if start is None or end is None or not any(char.isalnum() for char in token.text):
            continue
        timings.append(WordTiming(word=token.text, start_s=offset_s + start, end_s=offset_s + end))
    return tuple(timings)
