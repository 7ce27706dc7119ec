"""sox (Debian's package) as the standard G.711 codec our output is checked against: an
implementation of its own (the CCITT reference's algorithm), not FFmpeg's that the server uses."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import numpy.typing as npt

# sox's names of the raw G.711 file types
SOX_TYPES = {"mulaw": "ul", "alaw": "al"}
_PCM = ["-t", "raw", "-e", "signed-integer", "-b", "16", "-c", "1"]


def _sox(arguments: list[str], data: bytes) -> bytes:
    sox = shutil.which("sox")
    assert sox, "sox is not installed: make ffmpeg installs it (on Debian: apt-get install sox)"
    return subprocess.run([sox, "-V1", *arguments], input=data, capture_output=True, check=True).stdout


def decode(data: bytes, audio_format: str, sample_rate: int) -> npt.NDArray[np.int16]:
    """Raw G.711 codes to 16-bit samples."""
    rate = ["-r", str(sample_rate)]
    pcm = _sox(["-t", SOX_TYPES[audio_format], *rate, "-c", "1", "-", *_PCM, *rate, "-"], data)
    return np.frombuffer(pcm, dtype="<i2")


def decode_float(data: bytes, audio_format: str, sample_rate: int) -> npt.NDArray[np.float32]:
    return decode(data, audio_format, sample_rate).astype(np.float32) / 32768.0
