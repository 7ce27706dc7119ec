"""`voicestream say` through the real Kokoro server, heard by Whisper (through vLLM-Omni, the
fake, and its mistakes: tests/unit/test_say_command.py)."""

from __future__ import annotations

import wave
from pathlib import Path
from types import ModuleType

from tests.support.server import LiveServer
from voicestream.cli import main

TEXT = "The museum opens at ten in the morning."


def read_wav(path: Path) -> tuple[int, bytes]:
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth()) == (1, 2)
        return wav.getframerate(), wav.readframes(wav.getnframes())


def test_say_through_a_kokoro_server(kokoro_server: LiveServer, asr: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "kokoro.wav"
    assert main(["say", "--upstream", "kokoro", "--url", kokoro_server.http_url, "-o", str(out), TEXT]) == 0
    rate, frames = read_wav(out)
    assert rate == 24_000
    assert asr.word_error_rate(TEXT, asr.transcribe(frames)) <= 0.2
