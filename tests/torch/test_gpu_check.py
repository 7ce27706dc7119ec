"""benchmarks/gpu_check.py, the prepared GPU check, run here on the CPU with tiny counts.

The check is meant for a lent GPU machine (docs/engine.md, "The prepared GPU check"); this test
runs the same code with `--device cpu --quick` so that it cannot rot between loans: `prepare`
builds the directory that travels, `run` measures from it and writes the JSON. Only the report's
structure is checked, and that every measurement is present and finite: no timing thresholds.
`run` goes without misaki, spaCy and phonemizer (they do not fit in what travels): here they are
made unimportable for it, so a run that needed them fails.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
QUICK_LENGTHS = ("5", "15")  # --quick's sentence lengths (words): the shortest two of the real run's
# The G2P's packages, absent where the check runs (docs/engine.md, "The prepared GPU check").
NOT_THERE = ("misaki", "spacy", "phonemizer", "espeakng_loader", "en_core_web_sm")


def unimportable(directory: Path, names: tuple[str, ...]) -> Path:
    """A directory that, first on the path, makes importing each of `names` fail."""
    for name in names:
        (directory / name).mkdir(parents=True)
        (directory / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not installed on the GPU machine')\n"
        )
    return directory


def gpu_check(*args: str, before: Path | None = None) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT / "src"), str(ROOT)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*([str(before)] if before else []), *paths])}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def is_finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def test_quick_cpu_run_writes_every_measurement(source_dir: Path, tmp_path: Path) -> None:
    prepared = tmp_path / "prepared"
    done = gpu_check("prepare", "--source", str(source_dir), "--out", str(prepared))
    assert done.returncode == 0, done.stderr
    # What travels to the GPU machine: the real config, one voice and the phoneme table, well under a megabyte.
    assert sum(f.stat().st_size for f in prepared.rglob("*") if f.is_file()) < 1_000_000
    assert (prepared / "phonemes.json").is_file()
    out = tmp_path / "gpu_check.json"
    blocked = unimportable(tmp_path / "blocked", NOT_THERE)
    done = gpu_check(
        "run",
        "--device",
        "cpu",
        "--quick",
        "--threads",
        "2",
        "--model-dir",
        str(prepared),
        "--out",
        str(out),
        before=blocked,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(out.read_text())

    assert report["benchmark"] == "gpu_check"
    assert report["quick"] is True
    assert report["device"]["requested"] == "cpu"
    assert report["device"]["name"] == "cpu"
    assert report["device"]["torch"]
    assert report["machine"]["cpu"] is not None
    assert report["machine"]["whole_sentence_rtf"] is None  # machine(calibrate=False)

    first = report["first_audio"]
    assert sorted(first["first_audio_ms_p50"], key=int) == list(QUICK_LENGTHS)
    assert all(is_finite(first["first_audio_ms_p50"][words]) for words in QUICK_LENGTHS)
    assert all(is_finite(first["by_words"][words]["audio_s"]) for words in QUICK_LENGTHS)
    assert is_finite(first["first_audio_long_over_short"])
    assert is_finite(report["throughput"]["rtf"])
    assert is_finite(report["throughput"]["compute_s_per_audio_s"])

    sessions = report["concurrency"]
    assert sessions["target_first_audio_ms_p95"] == 300.0
    assert sessions["session_words"] == 5  # --quick: the shortest sentence
    levels = sessions["levels"]
    assert levels and levels[0]["sessions"] == 1
    assert [row["sessions"] for row in levels] == [2**i for i in range(len(levels))]
    for row in levels:
        assert row["errors"] == []
        assert row["answered"] == row["sessions"]
        assert is_finite(row["first_audio_ms_p50"]) and is_finite(row["first_audio_ms_p95"])
        assert is_finite(row["audio_s_per_wall_s"])
    # Levels stop at the first that misses the target: the capacity is the last one that held it.
    held = [row["sessions"] for row in levels if row["first_audio_ms_p95"] <= sessions["target_first_audio_ms_p95"]]
    assert held == [row["sessions"] for row in levels[: len(held)]]
    assert sessions["sessions_held"] == (held[-1] if held else 0)

    decoder = report["decoder"]
    assert set(decoder["ms_per_frame"]) == {"fused", "kokoro modules"}
    for runtime in decoder["ms_per_frame"].values():
        assert sorted(runtime, key=int) == ["44", "100", "176"]
        assert all(is_finite(ms) and ms > 0 for ms in runtime.values())
    assert all(is_finite(ratio) for ratio in decoder["fused_speedup"].values())
