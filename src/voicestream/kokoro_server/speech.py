"""A validated speech request, and its audio: sentences synthesized in turn, encoded, framed.

POST /invocations, the bidirectional session and /v1/audio/speech stream requests through this.
First the request's work is measured: the phonemes of all its sentences (one G2P task,
time-bounded), and a request over `Limits.max_phonemes` is refused with text_too_complex before
any audio. Then `frames()` yields the encoded audio, `items()` also the word timings of what
comes next (a `WordTiming` tuple, in seconds of the request's audio, yielded before the frames
that speak them). Each engine step (one inference) runs in a synthesis worker thread and the
frames are yielded as soon as they exist; a consumer that stops iterating stops the work after
the step in flight, so a cancelled or disconnected request costs at most one step. A step also
resamples and encodes the chunk it made (`_next_encoded`): encoding (mp3, opus, flac ...) never
runs on the event loop, where it would delay every other session's frames and pings. The steps
of one request run one after another, so its stateful resampler and encoder see the chunks in
order, one thread at a time.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass

from voicestream.chunker import split_sentences
from voicestream.engine.base import (
    AudioChunk,
    EmptyTextError,
    InvalidRequestError,
    SpeechEngine,
    TextTooComplexError,
    WordTiming,
)
from voicestream.engine.text.normalize import normalize_text
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.engine.text.pronunciation import check_request, split_phoneme_sentences
from voicestream.kokoro_server.encoders import AudioEncoder, EncodedFormat, Framer
from voicestream.kokoro_server.playback import PlaybackClock
from voicestream.kokoro_server.resample import StreamResampler
from voicestream.kokoro_server.runtime import ServerRuntime
from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.errors import ProtocolError

AudioItem = bytes | tuple[WordTiming, ...]
"""An encoded audio frame, or the word timings of the audio that follows."""


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    """A validated request with every option resolved."""

    request_id: str
    text: str
    voice: str
    speed: float
    format: EncodedFormat
    received_at: float  # time.perf_counter() when the server received it
    words: bool = False  # the client asked for word timings
    sample_rate: int = SAMPLE_RATE  # Hz of the delivered audio (Kokoro's 24 kHz is resampled to it)
    text_options: TextOptions = DEFAULT_TEXT_OPTIONS  # how the text is read (normalize, lexicon, phoneme input)


@dataclass(slots=True)
class StreamStats:
    audio_bytes: int = 0  # encoded bytes produced
    audio_samples: int = 0  # samples synthesized (24 kHz, before any resampling)
    synth_s: float = 0.0  # time spent in engine steps (with the encoding of their chunks)
    sentences: int = 0
    phonemes: int = 0  # the request's work, counted before synthesis

    @property
    def audio_ms(self) -> float:
        return round(self.audio_samples * 1000 / SAMPLE_RATE, 1)

    def audio_s(self) -> float:
        """Seconds of audio synthesized so far."""
        return self.audio_samples / SAMPLE_RATE


def check_pronunciation(engine: SpeechEngine, text: str, options: TextOptions, request_id: str | None) -> None:
    """What a request wrote in phonemes (lexicon, markup, phoneme input), checked against the
    model's vocabulary before it is queued: a `ProtocolError` naming the symbol otherwise."""
    try:
        check_request(text, options, engine.phoneme_vocabulary())
    except InvalidRequestError as error:
        raise ProtocolError(error.code, error.message, request_id) from None


def _next_encoded(
    chunks: Iterator[AudioChunk], resampler: StreamResampler, encoder: AudioEncoder
) -> tuple[AudioChunk | None, bytes]:
    """One engine step and its chunk encoded (in a synthesis worker); (None, b"") at the end."""
    chunk = next(chunks, None)
    if chunk is None:
        return None, b""
    return chunk, encoder.encode(resampler.push(chunk.samples))


def _encoded_tail(resampler: StreamResampler, encoder: AudioEncoder) -> bytes:
    """What the resampler and the encoder still hold, once the request's audio has all come."""
    return encoder.encode(resampler.finish()) + encoder.finish()


class AudioStream:
    """Iterate `frames()` once; `stats` fills in as it goes."""

    def __init__(self, runtime: ServerRuntime, request: SpeechRequest, playback: PlaybackClock | None = None) -> None:
        """`playback`: the listener's clock when this request's audio follows earlier audio to
        the same listener (a bidi session's requests); a clock of its own otherwise."""
        self.runtime = runtime
        self.request = request
        self.stats = StreamStats()
        self.playback = playback or PlaybackClock()
        self.bytes_per_second = 1  # the encoder's, once `items()` has begun

    async def frames(self) -> AsyncGenerator[bytes, None]:
        async for item in self.items():
            if isinstance(item, bytes):
                yield item

    async def items(self) -> AsyncGenerator[AudioItem, None]:
        limits = self.runtime.limits
        engine = self.runtime.engine
        request = self.request
        encoder = self.runtime.encoders(request.format, request.sample_rate, limits.mp3_bitrate_kbps)
        self.bytes_per_second = encoder.bytes_per_second
        # One resampler for the whole request: its state carries over every chunk and sentence.
        resampler = StreamResampler(SAMPLE_RATE, request.sample_rate)
        framer = Framer.for_encoder(encoder, limits.frame_ms)
        split = split_phoneme_sentences if request.text_options.phonemes else split_sentences
        sentences = (split(request.text) if self.runtime.policy.split_requests else []) or [request.text]
        sentences = await self._check_work(sentences)
        # Since when this request's next sentence has been waiting for the engine: a listener who
        # ran out of audio after that was left waiting by the server (PlaybackClock.ran_dry_since),
        # and its steps are due when the listener runs dry (scheduler.py).
        waiting_since = request.received_at
        for sentence in sentences:
            self.stats.sentences += 1
            self.runtime.stats.sentences_started += 1
            sentence_offset_s = self.stats.audio_samples / SAMPLE_RATE  # engine words count from the sentence
            started = sentence_started = time.perf_counter()
            chunks = await self.runtime.in_worker_by(
                self.playback.runs_dry_at(waiting_since),
                engine.synthesize,
                sentence,
                request.voice,
                request.speed,
                ahead_s=self.playback.ahead_s(),
                behind=self.playback.ran_dry_since(waiting_since),
                text_options=request.text_options,
            )
            self.stats.synth_s += time.perf_counter() - started
            while True:
                started = time.perf_counter()
                chunk, encoded = await self.runtime.in_worker_by(
                    self.playback.runs_dry_at(waiting_since), _next_encoded, chunks, resampler, encoder
                )
                self.stats.synth_s += time.perf_counter() - started
                if chunk is None:
                    break
                if chunk.words:
                    yield tuple(word.shifted(sentence_offset_s) for word in chunk.words)
                self.stats.audio_samples += len(chunk.samples)
                self.playback.produced(len(chunk.samples) / SAMPLE_RATE)
                for frame in framer.push(encoded):
                    self.stats.audio_bytes += len(frame)
                    yield frame
            waiting_since = max(waiting_since, sentence_started)
        tail = await self.runtime.in_worker_by(
            self.playback.runs_dry_at(waiting_since), _encoded_tail, resampler, encoder
        )
        for frame in [*framer.push(tail), *framer.flush()]:
            self.stats.audio_bytes += len(frame)
            yield frame

    async def _check_work(self, sentences: list[str]) -> list[str]:
        """The sentences there is something to say in, once the request's work is known to be
        within `max_phonemes`; TextTooComplexError (before any audio) otherwise."""
        options = self.request.text_options
        spoken = [
            sentence for sentence in sentences if (sentence if options.phonemes else normalize_text(sentence)).strip()
        ]
        if not spoken:
            raise EmptyTextError()
        engine, limit = self.runtime.engine, self.runtime.limits.max_phonemes
        # Phoneme input is checked whole, so that a bad symbol's position is the request's.
        counted = [self.request.text] if options.phonemes else spoken
        self.stats.phonemes = await self.runtime.in_g2p(engine.count_phonemes, counted, self.request.voice, options)
        if self.stats.phonemes > limit:
            raise TextTooComplexError(
                f"the text is {self.stats.phonemes} phonemes of speech; one request may have at most {limit}: "
                "split it into several requests"
            )
        return spoken
