"""Streaming encoders: what they emit piece by piece concatenates into a valid file."""

from __future__ import annotations

import io
import wave

import av
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.kokoro_server.encoders import (
    AudioEncoder,
    Framer,
    Mp3Encoder,
    PcmEncoder,
    WavEncoder,
    create_encoder,
    to_pcm16,
)
from voicestream.kokoro_server.encoders import to_pcm16 as engine_to_pcm16
from voicestream.wire.bidi import WAV_UNKNOWN_SIZE, wav_header

RATE = 24_000


def tone(seconds: float, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(RATE * seconds), dtype=np.float32) / RATE
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def encode_in_pieces(encoder: AudioEncoder, audio: np.ndarray, pieces: int = 7) -> bytes:
    out = b""
    for part in np.array_split(audio, pieces):
        out += encoder.encode(part)
    return out + encoder.finish()


def test_pcm_is_clipped_little_endian_int16() -> None:
    pcm = to_pcm16(np.array([0.0, 1.0, -1.0, 2.0, -3.0, 0.5, np.nan], dtype=np.float32))
    assert np.frombuffer(pcm, "<i2").tolist() == [0, 32767, -32767, 32767, -32767, 16384, 0]


def test_pcm_matches_the_engine_conversion() -> None:
    audio = tone(0.1)
    assert to_pcm16(audio) == engine_to_pcm16(audio)


def test_pcm_bytes_pass_through_and_odd_lengths_are_rejected() -> None:
    assert PcmEncoder().encode(b"\x01\x02\x03\x04") == b"\x01\x02\x03\x04"
    with pytest.raises(ValueError, match="even"):
        PcmEncoder().encode(b"\x01\x02\x03")


def test_streaming_wav_reads_back_with_the_standard_library() -> None:
    audio = tone(0.5)
    data = encode_in_pieces(WavEncoder(), audio)
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    assert int.from_bytes(data[40:44], "little") == WAV_UNKNOWN_SIZE
    with wave.open(io.BytesIO(data)) as reader:
        assert (reader.getframerate(), reader.getnchannels(), reader.getsampwidth()) == (RATE, 1, 2)
        frames = reader.readframes(10**9)
    assert frames == to_pcm16(audio)


def test_wav_header_is_sent_once_even_for_empty_audio() -> None:
    encoder = WavEncoder()
    assert encoder.finish() == wav_header()
    assert encoder.finish() == b""
    encoder = WavEncoder()
    first = encoder.encode(np.zeros(0, dtype=np.float32))
    assert first == wav_header() and encoder.encode(b"\x00\x00") == b"\x00\x00"


def test_wav_header_with_a_known_size() -> None:
    header = wav_header(data_size=100)
    assert int.from_bytes(header[4:8], "little") == 136


def decode_mp3(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data), mode="r", format="mp3") as container:
        stream = container.streams.audio[0]
        chunks = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
        return np.concatenate(chunks), stream.rate


def test_mp3_decodes_to_the_same_tone() -> None:
    audio = tone(1.0, hz=440.0)
    data = encode_in_pieces(Mp3Encoder(bitrate_kbps=48), audio)
    assert data[:2] in (b"\xff\xf3", b"\xff\xf2", b"ID")  # MPEG-2 Layer III sync (or an ID3 tag)
    assert 4000 < len(data) < 9000  # ~48 kbps for one second
    decoded, rate = decode_mp3(data)
    assert rate == RATE
    assert abs(len(decoded) - len(audio)) < RATE // 10  # the encoder adds priming/padding only
    spectrum = np.abs(np.fft.rfft(decoded[: RATE // 2]))
    peak_hz = np.argmax(spectrum) * RATE / (RATE // 2)
    assert abs(peak_hz - 440) < 10


def test_mp3_bitrate_is_configurable() -> None:
    audio = tone(1.0)
    low = encode_in_pieces(Mp3Encoder(bitrate_kbps=32), audio)
    high = encode_in_pieces(Mp3Encoder(bitrate_kbps=96), audio)
    assert len(high) > 2 * len(low)


def test_create_encoder() -> None:
    assert create_encoder("pcm").format == "pcm"
    assert create_encoder("wav").content_type == "audio/wav"
    assert create_encoder("mp3", mp3_bitrate_kbps=64).bytes_per_second == 8000
    with pytest.raises(ValueError, match="ogg"):
        create_encoder("ogg")


def test_framer_for_40_ms_of_pcm() -> None:
    framer = Framer.for_encoder(PcmEncoder(), 40)
    assert framer.frame_bytes == 1920
    frames = framer.push(bytes(5000))
    assert [len(f) for f in frames] == [1920, 1920]
    assert [len(f) for f in framer.push(bytes(1000))] == [1920]
    assert [len(f) for f in framer.flush()] == [240]
    assert framer.flush() == []


def test_framer_frames_are_even_sized() -> None:
    assert Framer(7).frame_bytes == 8
    with pytest.raises(ValueError):
        Framer(1)


@given(st.lists(st.binary(max_size=500), max_size=20), st.integers(min_value=2, max_value=300))
def test_framer_keeps_every_byte_in_order(pieces: list[bytes], size: int) -> None:
    framer = Framer(size)
    frames = [frame for piece in pieces for frame in framer.push(piece)] + framer.flush()
    assert b"".join(frames) == b"".join(pieces)
    assert all(len(frame) == framer.frame_bytes for frame in frames[:-1])
    assert all(0 < len(frame) <= framer.frame_bytes for frame in frames)
