"""Streaming audio encoders behind one interface, and a fixed-size framer.

Every encoder takes audio at its own `sample_rate` (float32 samples in [-1, 1], or 16-bit
little-endian PCM bytes; kokoro_server/resample.py brings Kokoro's 24 kHz to that rate) and returns
the encoded bytes that can be sent now; `finish()` returns whatever the encoder still holds.
Concatenating every output gives a valid file.

- pcm, wav (streaming header): written here, they are just PCM;
- mulaw, alaw (G.711): FFmpeg's pcm_mulaw / pcm_alaw encoders through PyAV, raw 8-bit codes
  with no header (what telephony media streams carry); checked against sox's decoder over
  every code in tests/integration/test_g711.py;
- mp3: LAME (lameenc), constant bitrate, frames out as they are encoded;
- opus (in Ogg), aac (ADTS), flac: FFmpeg's encoders and muxers through PyAV, writing into a
  non-seekable sink that is drained after every `encode`. What that makes incremental is
  checked in tests/unit/test_encoders_av.py: ADTS writes every AAC frame at once (after the
  encoder's ~1024-sample lookahead); Ogg writes a page per `page_duration` (set to 20 ms
  here, FFmpeg's default of 1 s would hold a second of audio back); FLAC writes its header
  (with ~8 KiB of padding) first and each frame as it is encoded, but cannot go back to fill
  in STREAMINFO's total-samples and MD5 fields on a stream, so those stay 0 ("unknown"), which
  the format allows and decoders accept.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from voicestream.wire.bidi import (
    DEFAULT_FORMAT,
    G711_SAMPLE_RATE,
    PCM_SAMPLE_WIDTH,
    SAMPLE_RATE,
    default_sample_rate,
    wav_header,
)

FloatAudio = npt.NDArray[np.float32]
AudioInput = FloatAudio | bytes

PCM_BYTES_PER_SAMPLE = PCM_SAMPLE_WIDTH
CONTENT_TYPES: dict[str, str] = {
    "pcm": f"audio/pcm;rate={SAMPLE_RATE};channels=1;encoding=s16le",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg; codecs=opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    # RFC 3551's names for G.711 (audio/basic would imply 8 kHz mu-law only)
    "mulaw": f"audio/PCMU;rate={G711_SAMPLE_RATE}",
    "alaw": f"audio/PCMA;rate={G711_SAMPLE_RATE}",
}
EncodedFormat = Literal["pcm", "wav", "mp3", "mulaw", "alaw", "opus", "aac", "flac"]
"""Every format an encoder exists for (the bidi session offers the first five)."""
ENCODED_FORMATS: tuple[EncodedFormat, ...] = ("pcm", "wav", "mp3", "mulaw", "alaw", "opus", "aac", "flac")


def content_type(audio_format: str, sample_rate: int) -> str:
    """The media type of `audio_format` delivered at `sample_rate` (raw formats name the rate)."""
    if audio_format == "pcm":
        return f"audio/pcm;rate={sample_rate};channels=1;encoding=s16le"
    if audio_format in _G711_CODECS:
        return CONTENT_TYPES[audio_format].split(";")[0] + f";rate={sample_rate}"
    return CONTENT_TYPES[audio_format]


def to_pcm16(audio: AudioInput) -> bytes:
    """Float samples to 16-bit little-endian PCM (clipped, never wrapped); PCM bytes pass through."""
    if isinstance(audio, (bytes, bytearray, memoryview)):
        data = bytes(audio)
        if len(data) % PCM_BYTES_PER_SAMPLE:
            raise ValueError(f"16-bit PCM must have an even number of bytes, got {len(data)}")
        return data
    samples = np.asarray(audio, dtype=np.float32).reshape(-1)
    clipped = np.clip(np.nan_to_num(samples, nan=0.0), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


class AudioEncoder(Protocol):
    """One encoded stream: call `encode` for each piece of audio, then `finish` once."""

    format: str
    content_type: str

    @property
    def bytes_per_second(self) -> int:
        """Nominal encoded bytes per second of audio: what frame sizes are computed from."""
        ...

    def encode(self, audio: AudioInput) -> bytes: ...

    def finish(self) -> bytes: ...


class PcmEncoder:
    """Raw 16-bit little-endian mono PCM: no header, every byte is audio."""

    format = "pcm"

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self.sample_rate = sample_rate
        self.content_type = content_type(self.format, sample_rate)

    @property
    def bytes_per_second(self) -> int:
        return self.sample_rate * PCM_BYTES_PER_SAMPLE

    def encode(self, audio: AudioInput) -> bytes:
        return to_pcm16(audio)

    def finish(self) -> bytes:
        return b""


class WavEncoder(PcmEncoder):
    """A streaming WAV: the header (sizes unknown) with the first bytes, then raw PCM."""

    format = "wav"

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        super().__init__(sample_rate)
        self._header_sent = False

    def _header(self) -> bytes:
        if self._header_sent:
            return b""
        self._header_sent = True
        return wav_header(self.sample_rate)

    def encode(self, audio: AudioInput) -> bytes:
        return self._header() + to_pcm16(audio)

    def finish(self) -> bytes:
        return self._header()  # a stream with no audio is still a (empty) WAV file


_G711_CODECS: dict[str, str] = {"mulaw": "pcm_mulaw", "alaw": "pcm_alaw"}


class G711Encoder:
    """G.711 mu-law or A-law (FFmpeg's encoders via PyAV): one 8-bit code per sample, no header.

    Stateless per sample, so every output byte can go out at once."""

    def __init__(self, audio_format: str, sample_rate: int = G711_SAMPLE_RATE) -> None:
        import av

        self.format = audio_format
        self.sample_rate = sample_rate
        self.content_type = content_type(audio_format, sample_rate)
        codec: Any = av.CodecContext.create(_G711_CODECS[audio_format], "w")
        codec.sample_rate = sample_rate
        codec.layout = "mono"
        codec.format = "s16"
        codec.open()
        self._codec = codec
        self._frame_type: Any = av.AudioFrame

    @property
    def bytes_per_second(self) -> int:
        return self.sample_rate

    def encode(self, audio: AudioInput) -> bytes:
        pcm = np.frombuffer(to_pcm16(audio), dtype="<i2")
        if not len(pcm):
            return b""
        frame = self._frame_type.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.sample_rate
        return b"".join(bytes(packet) for packet in self._codec.encode(frame))

    def finish(self) -> bytes:
        return b""


class Mp3Encoder:
    """MP3 via LAME (lameenc): mono, constant bitrate (MPEG-2 Layer III at 24 kHz and below)."""

    format = "mp3"
    content_type = CONTENT_TYPES["mp3"]

    def __init__(self, sample_rate: int = SAMPLE_RATE, bitrate_kbps: int = 48, quality: int = 2) -> None:
        import lameenc

        self.bitrate_kbps = bitrate_kbps
        self._encoder = lameenc.Encoder()
        self._encoder.set_bit_rate(bitrate_kbps)
        self._encoder.set_in_sample_rate(sample_rate)
        self._encoder.set_out_sample_rate(sample_rate)
        self._encoder.set_channels(1)
        self._encoder.set_quality(quality)
        self._finished = False

    @property
    def bytes_per_second(self) -> int:
        return self.bitrate_kbps * 1000 // 8

    def encode(self, audio: AudioInput) -> bytes:
        pcm = to_pcm16(audio)
        return bytes(self._encoder.encode(pcm)) if pcm else b""

    def finish(self) -> bytes:
        if self._finished:
            return b""
        self._finished = True
        return bytes(self._encoder.flush())


class _Drain(io.RawIOBase):
    """A write-only, non-seekable file for PyAV's muxer: `take()` returns what it wrote so far."""

    def __init__(self) -> None:
        super().__init__()
        self._written = bytearray()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._written += chunk
        return len(chunk)

    def take(self) -> bytes:
        out = bytes(self._written)
        self._written.clear()
        return out


# format -> (muxer, encoder, nominal bitrate in bits/s, muxer options)
_AV_FORMATS: dict[str, tuple[str, str, int, dict[str, str]]] = {
    "opus": ("ogg", "libopus", 32_000, {"page_duration": "20000"}),  # µs: a page per Opus frame
    "aac": ("adts", "aac", 64_000, {}),
    "flac": ("flac", "flac", 24_000 * 16 * 6 // 10, {}),  # lossless: ~60 % of PCM for speech
}


class AvEncoder:
    """Opus (Ogg), AAC (ADTS) or FLAC via PyAV (FFmpeg), streamed: see the module docstring."""

    def __init__(self, audio_format: str, sample_rate: int = SAMPLE_RATE) -> None:
        import av

        muxer, codec, bit_rate, options = _AV_FORMATS[audio_format]
        self.format = audio_format
        self.content_type = CONTENT_TYPES[audio_format]
        self.sample_rate = sample_rate
        self._bit_rate = bit_rate
        self._sink = _Drain()
        self._container: Any = av.open(self._sink, mode="w", format=muxer, options=options)
        self._stream: Any = self._container.add_stream(codec, rate=sample_rate, layout="mono")
        if audio_format != "flac":
            self._stream.codec_context.bit_rate = bit_rate
        self._frame_type: Any = av.AudioFrame
        self._pts = 0
        self._finished = False

    @property
    def bytes_per_second(self) -> int:
        return self._bit_rate // 8

    def encode(self, audio: AudioInput) -> bytes:
        pcm = np.frombuffer(to_pcm16(audio), dtype="<i2")
        if not len(pcm):
            return b""
        frame = self._frame_type.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.sample_rate
        frame.pts = self._pts
        self._pts += len(pcm)
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._sink.take()

    def finish(self) -> bytes:
        if self._finished:
            return b""
        self._finished = True
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        return self._sink.take()


def create_encoder(
    audio_format: str = DEFAULT_FORMAT, sample_rate: int | None = None, mp3_bitrate_kbps: int = 48
) -> AudioEncoder:
    """A fresh encoder for one stream at `sample_rate` (default: the format's, wire/bidi.py);
    raises ValueError for an unknown format."""
    sample_rate = sample_rate or default_sample_rate(audio_format)
    if audio_format in _G711_CODECS:
        return G711Encoder(audio_format, sample_rate)
    if audio_format == "pcm":
        return PcmEncoder(sample_rate)
    if audio_format == "wav":
        return WavEncoder(sample_rate)
    if audio_format == "mp3":
        return Mp3Encoder(sample_rate, mp3_bitrate_kbps)
    if audio_format in _AV_FORMATS:
        return AvEncoder(audio_format, sample_rate)
    raise ValueError(f"unknown audio format {audio_format!r}; choose one of {', '.join(ENCODED_FORMATS)}")


EncoderFactory = Callable[[str, int, int], AudioEncoder]
"""(format, sample rate, mp3 bitrate in kbit/s) -> a fresh encoder: `create_encoder`, or a test's."""


class Framer:
    """Cuts a byte stream into frames of `frame_bytes` (the last one may be shorter).

    Frame sizes are even, so PCM frames always hold whole samples.
    """

    def __init__(self, frame_bytes: int) -> None:
        if frame_bytes < 2:
            raise ValueError(f"frame_bytes must be at least 2, got {frame_bytes}")
        self.frame_bytes = frame_bytes + frame_bytes % 2
        self._pending = bytearray()

    @classmethod
    def for_encoder(cls, encoder: AudioEncoder, frame_ms: int) -> Framer:
        return cls(max(2, encoder.bytes_per_second * frame_ms // 1000))

    def push(self, data: bytes) -> list[bytes]:
        self._pending += data
        size = self.frame_bytes
        whole = len(self._pending) // size * size
        frames = [bytes(self._pending[start : start + size]) for start in range(0, whole, size)]
        del self._pending[:whole]
        return frames

    def flush(self) -> list[bytes]:
        rest = bytes(self._pending)
        self._pending.clear()
        return [rest] if rest else []


def write_wav(path: Path, audio: AudioInput, sample_rate: int = SAMPLE_RATE) -> Path:
    """A 16-bit mono WAV file of float samples or PCM bytes (parent folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(to_pcm16(audio))
    return path
