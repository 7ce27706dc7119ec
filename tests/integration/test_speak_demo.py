"""`voicestream demo` (what `make demo` runs), against the session's real Kokoro server."""

from __future__ import annotations

import re
import wave
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.support.server import LiveServer
from voicestream.demo import run_demo
from voicestream.texts import agent_reply


@pytest.mark.slow
def test_demo_prints_the_table_and_writes_the_bidi_reply(
    kokoro_server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], asr: ModuleType
) -> None:
    assert run_demo(tmp_path, kokoro_url=kokoro_server.ws_url, repeats=1) == 0
    out = capsys.readouterr().out

    rows = {line.split()[0]: line for line in out.splitlines() if re.match(r"(bidi|batch)\s+\d+ ms", line)}
    assert set(rows) == {"bidi", "batch"}
    for row in rows.values():
        assert len(re.findall(r"\d+ ms", row)) == 4 and len(re.findall(r"\d+\.\d s", row)) == 2
    ratio = re.search(r"bidi is (\d+\.\d)x faster", out)
    assert ratio is not None
    bidi_ms, batch_ms = (float(v) for v in re.findall(r"(?:bidi|batch) (\d+) ms", out)[:2])
    assert float(ratio.group(1)) == pytest.approx(batch_ms / bidi_ms, abs=0.06)
    assert '"_aws"' not in out and '"level"' not in out  # no logs or metrics in the table

    wav_path = Path(re.findall(r"bidi audio:\s+(\S+)", out)[0])
    assert wav_path == (tmp_path / "demo_bidi.wav").resolve()
    with wave.open(str(wav_path)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24_000, 1, 2)
        pcm = wav.readframes(wav.getnframes())
    assert np.abs(np.frombuffer(pcm, dtype="<i2")).max() > 1000  # not silence
    heard = asr.transcribe(pcm)
    assert asr.word_error_rate(agent_reply(), heard) <= 0.25, heard
