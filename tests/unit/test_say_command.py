"""`voicestream say` through vLLM-Omni (the fake, over a real socket), the WAV it writes checked
byte for byte against what the server sent, and its mistakes (through the real Kokoro server:
tests/integration/test_say_command.py)."""

from __future__ import annotations

import contextlib
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_vllm_omni import FakeVllmOmni, serve_fake
from voicestream.cli import main

TEXT = "The museum opens at ten in the morning."


@contextlib.contextmanager
def fake_server() -> Iterator[tuple[FakeVllmOmni, str]]:
    fake = FakeVllmOmni()
    with serve_fake(fake) as (_live, url):
        yield fake, url


def read_wav(path: Path) -> tuple[int, bytes]:
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth()) == (1, 2)
        return wav.getframerate(), wav.readframes(wav.getnframes())


def test_say_through_vllm_omni(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "qwen.wav"
    with fake_server() as (fake, url):
        base = url.removesuffix("/v1/audio/speech/stream")  # a base URL finds the route
        code = main(["say", "--upstream", "vllm-omni", "--url", base, "--voice", "ryan", "--language", "English",
                     "-o", str(out), TEXT])  # fmt: skip
    assert code == 0
    [record] = fake.sessions
    [generation] = record.generations
    assert (generation.text, generation.voice) == (TEXT, "ryan")
    rate, frames = read_wav(out)
    assert rate == 24_000 and len(frames) == generation.audio_bytes > 2000
    assert [kind for _, kind in record.received] == ["session.config", "input.text", "input.done", "session.close"]
    assert f"{out}: " in capsys.readouterr().out


def test_say_through_vllm_omni_refuses_another_speed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as (fake, url):
        code = main(["say", "--upstream", "vllm-omni", "--url", url, "--speed", "1.5", "-o", str(tmp_path / "x.wav"),
                     TEXT])  # fmt: skip
    assert code == 2
    assert "speed 1.5: vLLM-Omni streams audio only at speed 1.0" in capsys.readouterr().err
    assert [g.text for r in fake.sessions for g in r.generations] == []
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (["--upstream", "vllm-omni"], "exactly one of a server URL or a SageMaker endpoint"),
        (["--upstream", "vllm-omni", "--url", "ws://127.0.0.1:9", "--endpoint", "e"], "exactly one of"),
        (["--url", "ws://127.0.0.1:9"], "--url and --endpoint need --upstream"),
        (["--upstream", "vllm-omni", "--url", "ws://127.0.0.1:9"], "cannot open"),
    ],
)
def test_say_mistakes_are_one_clear_line(
    arguments: list[str], complaint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["say", *arguments, "-o", str(tmp_path / "x.wav"), TEXT]) == 2
    err = capsys.readouterr().err
    assert err.startswith("voicestream: ") and complaint in err and err.count("\n") == 1
