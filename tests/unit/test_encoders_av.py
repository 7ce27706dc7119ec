"""Opus (Ogg), AAC (ADTS) and FLAC through PyAV: what is incremental, and what decodes.

Each encoder is fed 100 ms pieces of a tone, as the engine delivers audio; FFmpeg decodes the
concatenated output back to the same duration and pitch. "Incremental" is measured, not
assumed: after the header, a piece in yields bytes out (Ogg's default page duration of one
second would hold a whole second back; ours is 20 ms)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.audio_decode import decode
from voicestream.kokoro_server.encoders import CONTENT_TYPES, AvEncoder, Framer, create_encoder

RATE = 24_000
PIECE = RATE // 10  # 100 ms


def tone(seconds: float, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(RATE * seconds), dtype=np.float32) / RATE
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def dominant_hz(samples: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * RATE / len(samples))


@pytest.mark.parametrize(("audio_format", "codec"), [("opus", "opus"), ("aac", "aac"), ("flac", "flac")])
def test_streamed_pieces_decode_to_the_same_tone(audio_format: str, codec: str) -> None:
    encoder = create_encoder(audio_format)
    assert isinstance(encoder, AvEncoder) and encoder.content_type == CONTENT_TYPES[audio_format]
    audio = tone(2.0)
    outputs = [encoder.encode(audio[start : start + PIECE]) for start in range(0, len(audio), PIECE)]
    outputs.append(encoder.finish())
    assert encoder.finish() == b""  # idempotent
    samples, found = decode(b"".join(outputs), audio_format)
    assert found == codec
    # Lossy codecs pad (priming, final frame): the duration is right within 100 ms.
    assert abs(len(samples) - len(audio)) < PIECE, (len(samples), len(audio))
    assert dominant_hz(samples[RATE // 2 : RATE // 2 + RATE]) == pytest.approx(440, abs=3)
    # Incremental: after the first pieces (header, encoder lookahead) every piece yields bytes.
    assert all(outputs[3:-1]), [len(out) for out in outputs]


def test_float_and_pcm_input_encode_alike() -> None:
    audio = tone(0.5)
    pcm = (audio * 32767).round().astype("<i2").tobytes()
    as_float = create_encoder("flac")
    as_pcm = create_encoder("flac")
    assert as_float.encode(audio) + as_float.finish() == as_pcm.encode(pcm) + as_pcm.finish()
    assert create_encoder("flac").encode(b"") == b""


def test_framer_sizes_frames_from_the_nominal_bitrate() -> None:
    framer = Framer.for_encoder(create_encoder("opus"), frame_ms=40)
    assert framer.frame_bytes == 32_000 // 8 * 40 // 1000


def test_unknown_format_is_refused_with_the_list() -> None:
    with pytest.raises(ValueError, match="pcm, wav, mp3, mulaw, alaw, opus, aac, flac"):
        create_encoder("ogg")
