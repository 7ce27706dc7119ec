"""Decode any audio the server sends back to 24 kHz float samples, with PyAV (FFmpeg's decoders).

Independent of our encoders: what FFmpeg can read back (and Whisper then hears) is what a
client of the format would get."""

from __future__ import annotations

import io

import av
import numpy as np

from tests.support.asr import pcm16_to_float
from voicestream.engine.base import FloatAudio
from voicestream.wire.bidi import SAMPLE_RATE

# The FFmpeg demuxer of each format (pcm has no container: it is read as raw samples).
DEMUXERS = {"wav": "wav", "mp3": "mp3", "opus": "ogg", "aac": "aac", "flac": "flac"}


def decode(data: bytes, audio_format: str) -> tuple[FloatAudio, str]:
    """(samples at SAMPLE_RATE, the codec FFmpeg found)."""
    if audio_format == "pcm":
        return pcm16_to_float(data), "pcm_s16le"
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    chunks: list[FloatAudio] = []
    with av.open(io.BytesIO(data), mode="r", format=DEMUXERS[audio_format]) as container:
        stream = container.streams.audio[0]
        codec = str(stream.codec_context.name)
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1).astype(np.float32))
    for out in resampler.resample(None):
        chunks.append(out.to_ndarray().reshape(-1).astype(np.float32))
    return (np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)), codec
