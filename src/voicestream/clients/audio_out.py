"""Where a client's audio goes as it arrives: a WAV file, raw bytes on stdout or in a file, or a player.

Every sink takes mono audio piece by piece (16-bit PCM at the sink's rate, 24 kHz unless told;
raw sinks also take G.711 codes) and never holds more than a piece:
a WAV file gets a streaming header first and its sizes filled in at the end; a player
(`aplay`, `ffplay`, `pw-play`: the first on PATH, or one given) reads PCM from its stdin, so
sound starts with the first piece.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO, Protocol

from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.errors import CodedError


def players(sample_rate: int = SAMPLE_RATE) -> tuple[tuple[str, ...], ...]:
    """Players that read raw 16-bit mono PCM at `sample_rate` from stdin, in order of preference."""
    rate = str(sample_rate)
    return (
        ("aplay", "-q", "-t", "raw", "-f", "S16_LE", "-c", "1", "-r", rate),
        ("pw-play", "--format", "s16", "--rate", rate, "--channels", "1", "-"),
        ("ffplay", "-nodisp", "-autoexit", "-loglevel", "quiet", "-f", "s16le", "-ar", rate, "-i", "-"),
    )


PLAYERS: tuple[tuple[str, ...], ...] = players()


class AudioOutError(CodedError):
    code = "audio_output"
    status = 400


class AudioSink(Protocol):
    def write(self, pcm: bytes) -> None: ...

    def close(self) -> None: ...


class WavFileSink:
    """A WAV file written as the audio arrives; its RIFF and data sizes are set on close."""

    def __init__(self, path: Path, sample_rate: int = SAMPLE_RATE) -> None:
        from voicestream.wire.bidi import wav_header

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("wb")
        self._file.write(wav_header(sample_rate))
        self._bytes = 0

    def write(self, pcm: bytes) -> None:
        self._file.write(pcm)
        self._file.flush()
        self._bytes += len(pcm)

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.seek(4)
        self._file.write(struct.pack("<I", 36 + self._bytes))
        self._file.seek(40)
        self._file.write(struct.pack("<I", self._bytes))
        self._file.close()


class RawSink:
    """Raw bytes (PCM or G.711) to a byte stream (stdout: pipe it into a player or a file)."""

    def __init__(self, stream: BinaryIO | None = None, *, owned: bool = False) -> None:
        self._stream = stream or sys.stdout.buffer
        self._owned = owned  # a file opened for this sink: closed with it

    def write(self, pcm: bytes) -> None:
        self._stream.write(pcm)
        self._stream.flush()

    def close(self) -> None:
        if self._stream.closed:
            return
        self._stream.flush()
        if self._owned:
            self._stream.close()


class PlayerSink:
    """A player process reading PCM from its stdin."""

    def __init__(self, command: tuple[str, ...] | None = None, sample_rate: int = SAMPLE_RATE) -> None:
        command = command or find_player(sample_rate)
        self.command = command
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE)

    def write(self, pcm: bytes) -> None:
        stdin = self._process.stdin
        if stdin is None or self._process.poll() is not None:
            raise AudioOutError(f"the player {self.command[0]} exited (code {self._process.returncode})")
        stdin.write(pcm)
        stdin.flush()

    def close(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        self._process.wait(timeout=600)


def find_player(sample_rate: int = SAMPLE_RATE) -> tuple[str, ...]:
    for command in players(sample_rate):
        if shutil.which(command[0]):
            return command
    names = ", ".join(command[0] for command in PLAYERS)
    raise AudioOutError(f"no audio player found (looked for {names}): write to a file with --out instead")


class Tee:
    """Several sinks at once (a file and the speakers)."""

    def __init__(self, sinks: list[AudioSink]) -> None:
        self.sinks = sinks

    def write(self, pcm: bytes) -> None:
        for sink in self.sinks:
            sink.write(pcm)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def open_sink(
    out: str | None,
    play: bool,
    player: str | None = None,
    *,
    audio_format: str = "pcm",
    sample_rate: int = SAMPLE_RATE,
) -> AudioSink:
    """`out`: a .wav path, or "-" for raw PCM on stdout; `play`: also play it. G.711
    (`audio_format` mulaw or alaw) is written raw, to the file or stdout, and not played."""
    sinks: list[AudioSink] = []
    if audio_format != "pcm" and play:
        raise AudioOutError(f"--play plays 16-bit PCM: {audio_format} can only be written (--out)")
    if out == "-":
        sinks.append(RawSink())
    elif out and audio_format != "pcm":
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        sinks.append(RawSink(path.open("wb"), owned=True))
    elif out:
        sinks.append(WavFileSink(Path(out), sample_rate))
    if play:
        sinks.append(PlayerSink(tuple(player.split()) if player else None, sample_rate))
    if not sinks:
        raise AudioOutError("nowhere to put the audio: give --out FILE.wav, --out - (raw PCM) or --play")
    return Tee(sinks)
