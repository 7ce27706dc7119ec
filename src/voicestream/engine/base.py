"""The speech-engine interface that every backend implements.

An engine turns one short text (a sentence or a clause: the chunker upstream does the
sentence splitting) into 24 kHz mono float audio, yielded chunk by chunk as soon as each
chunk exists. Loading is explicit and happens once; `synthesize` may be called from
several worker threads at the same time.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voicestream.engine.text.normalize import normalize_text
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.wire.bidi import DEFAULT_VOICE, SAMPLE_RATE, parse_speed
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError
from voicestream.wire.voices import UnknownVoice, VoiceBlend, parse_voice_spec
from voicestream.wire.words import WordTiming as WordTiming  # the wire's type: engines stamp it on chunks

FloatAudio = npt.NDArray[np.float32]


class EngineError(CodedError):
    """Base class of every error an engine raises on purpose."""


class InvalidRequestError(EngineError, ValueError):
    """The text, voice or speed of a request cannot be synthesized; `code` says which."""

    code = ErrorCode.INVALID_REQUEST
    status = 400


class UnknownVoiceError(InvalidRequestError):
    code = ErrorCode.UNKNOWN_VOICE

    def __init__(self, voice: str, valid: tuple[str, ...]) -> None:
        super().__init__(f"unknown voice {voice!r}; valid voices: {', '.join(valid)}")
        self.voice = voice
        self.valid = valid


class InvalidSpeedError(InvalidRequestError):
    code = ErrorCode.INVALID_SPEED


class EmptyTextError(InvalidRequestError):
    code = ErrorCode.EMPTY_TEXT

    def __init__(self) -> None:
        super().__init__("text is empty: nothing to speak")


class UnsupportedLanguageError(InvalidRequestError):
    code = ErrorCode.UNSUPPORTED_LANGUAGE


class TextTooComplexError(InvalidRequestError):
    """The text is more work than a request may be: too many phonemes, or G2P too slow."""

    code = ErrorCode.TEXT_TOO_COMPLEX
    status = 413


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """A piece of synthesized audio: float32 mono samples at SAMPLE_RATE in [-1, 1].

    `words`: the words this chunk speaks, in seconds from the start of the `synthesize` call's
    audio (not of the chunk); empty when the engine cannot time them."""

    samples: FloatAudio
    words: tuple[WordTiming, ...] = field(default=())

    @property
    def duration_s(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def check_speed(speed: float) -> float:
    try:
        return parse_speed(speed)
    except ProtocolError as error:
        raise InvalidSpeedError(error.message) from None


def check_voice(voice: str, valid: tuple[str, ...]) -> VoiceBlend:
    """The blend `voice` names (wire/voices.py's grammar); UnknownVoiceError or InvalidRequestError."""
    try:
        return parse_voice_spec(voice, valid)
    except UnknownVoice as error:
        raise UnknownVoiceError(error.voice, error.valid) from None
    except ProtocolError as error:
        raise InvalidRequestError(error.message) from None


def check_text(text: str, options: TextOptions | None = None) -> str:
    """The text an engine speaks: normalized (`engine.normalize`; phoneme input is not), stripped,
    not empty."""
    stripped = (text if options is not None and options.phonemes else normalize_text(text)).strip()
    if not stripped:
        raise EmptyTextError()
    return stripped


class SpeechEngine(abc.ABC):
    """A loaded text-to-speech model. Subclasses implement `_load`, `voices` and `_synthesize`."""

    name: str = "engine"
    sample_rate: int = SAMPLE_RATE
    device: str = "cpu"  # where inference runs once loaded ("cpu", "cuda", "cuda:1", ...)

    def __init__(self) -> None:
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        """Load weights, voices and G2P once. Idempotent."""
        if not self._loaded:
            self._load()
            self._loaded = True

    @abc.abstractmethod
    def _load(self) -> None: ...

    @abc.abstractmethod
    def voices(self) -> tuple[str, ...]:
        """The voice ids this engine can speak with (blends of them are accepted too)."""

    def synthesize(
        self,
        text: str,
        voice: str = DEFAULT_VOICE,
        speed: float = 1.0,
        *,
        ahead_s: float = 0.0,
        behind: bool = False,
        text_options: TextOptions = DEFAULT_TEXT_OPTIONS,
    ) -> Iterator[AudioChunk]:
        """Yield the audio of `text` chunk by chunk. Validates before any work is done.

        `ahead_s`: seconds of earlier audio the listener has yet to hear (the sentences before
        this one, still playing). An engine that streams inside a sentence spends them on fewer,
        larger windows (windows.py): the same audio for less compute. `behind`: the listener has
        run out of audio though this text was waiting (the server has more work than workers):
        fewer, larger windows from the first, which cost less per second of audio.
        `text_options`: how the text is read: normalized, a lexicon, or phoneme input (options.py)."""
        if not self._loaded:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        text = check_text(text, text_options)
        speed = check_speed(speed)
        self.validate_voice(voice)
        if not 0.0 <= ahead_s < float("inf"):
            raise ValueError(f"ahead_s must be a finite number of seconds >= 0, got {ahead_s}")
        return self._synthesize(text, voice, speed, ahead_s, behind, text_options)

    def phoneme_vocabulary(self) -> frozenset[str]:
        """The phoneme symbols the model speaks (config.json's vocab); empty when the engine has
        none to tell, and then phonemes a client writes are not checked."""
        return frozenset()

    def validate_voice(self, voice: str) -> None:
        """Raise UnknownVoiceError unless `voice` is a known id or a blend of known ids."""
        check_voice(voice, self.voices())

    @abc.abstractmethod
    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]: ...

    def count_phonemes(
        self, texts: Sequence[str], voice: str = DEFAULT_VOICE, text_options: TextOptions = DEFAULT_TEXT_OPTIONS
    ) -> int:
        """The phonemes `synthesize` would speak for `texts` (a request's sentences): the
        measure of a request's work. Raises what synthesis would (empty text, unknown voice,
        text_too_complex when G2P runs out of time)."""
        if not self._loaded:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        self.validate_voice(voice)
        return self._count_phonemes([check_text(text, text_options) for text in texts], voice, text_options)

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        """Engines with a G2P count its output; this default (no G2P) counts characters. An
        engine that wraps another must delegate here, or the wrapped G2P's work goes unmeasured."""
        return sum(len(text) for text in texts)

    def phonemize(
        self,
        texts: Sequence[str],
        voice: str = DEFAULT_VOICE,
        text_options: TextOptions = DEFAULT_TEXT_OPTIONS,
    ) -> list[str]:
        """What `synthesize` would say for each text, as Kokoro phonemes (POST /v1/audio/phonemize):
        fed back as phoneme input, each says the same. Raises what `count_phonemes` would."""
        if not self._loaded:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        self.validate_voice(voice)
        return self._phonemize([check_text(text, text_options) for text in texts], voice, text_options)

    def _phonemize(self, texts: list[str], voice: str, text_options: TextOptions) -> list[str]:
        """Engines with a G2P return its output; this default (no G2P) returns the texts."""
        return texts

    def close(self) -> None:  # noqa: B027  # a hook: most engines hold nothing but memory
        """Release what the engine holds beyond memory (worker processes). Idempotent."""
