"""Fixtures of the torch-engine tests: a random-weight model directory and one loaded engine.

The real config.json and voices come from the shared model directory that `voicestream
models fetch` fills (`make test` runs it first); the weights are generated per session.
"""

from __future__ import annotations

# First, before torch loads: the engine's OpenMP threads sleep when idle (engine/torch/__init__.py).
import voicestream.engine.torch  # noqa: F401

# isort: split
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.checkpoint import build_model_dir
from voicestream.engine.models.assets import manifest, verify_file
from voicestream.engine.models.torch_assets import CHECKPOINT_FILE
from voicestream.engine.torch.engine import TorchEngine
from voicestream.env import default_model_dir

PT_VOICES = ("af_heart", "bf_emma", "ef_dora")  # written as hexgrad's .pt tensors
BIN_VOICES = ("am_michael",)  # kept as our raw float32 .bin: the engine reads both


@pytest.fixture(scope="session")
def source_dir() -> Path:
    """The verified real config.json and voices (the ONNX engine's model directory)."""
    root = default_model_dir()
    spec = manifest()
    verify_file(root / spec["config"]["file"], spec["config"]["size"], spec["config"]["sha256"])
    for voice in PT_VOICES + BIN_VOICES:
        verify_file(root / "voices" / f"{voice}.bin", spec["voices"]["size"], spec["voices"]["sha256"][voice])
    return root


@pytest.fixture(scope="session")
def model_dir(source_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hexgrad's layout with random weights of the real architecture (327 MB, in a temp dir)."""
    out = build_model_dir(source_dir, tmp_path_factory.mktemp("kokoro-82m-random"), PT_VOICES, seed=0)
    for voice in BIN_VOICES:
        shutil.copyfile(source_dir / "voices" / f"{voice}.bin", out / "voices" / f"{voice}.bin")
    return out


@pytest.fixture(scope="session")
def engine(model_dir: Path) -> TorchEngine:
    # Unpaced: paced windows are sized by this machine's speed (streaming/pacing.py), and tests
    # compare chunk sizes with the plan's.
    loaded = TorchEngine(model_dir, pacing=False)
    loaded.load()
    return loaded


@pytest.fixture(scope="session")
def derived_dir(source_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the real-weight engines below keep the weights derived from the int8 export (once)."""
    assert not (source_dir / CHECKPOINT_FILE).exists(), "the shared model directory has hexgrad's checkpoint"
    return tmp_path_factory.mktemp("derived-torch")


@pytest.fixture(scope="session")
def real_engine(source_dir: Path, derived_dir: Path) -> Iterator[TorchEngine]:
    """The torch engine with real weights: derived from the shipped int8 export (weights.py).
    Unpaced: paced windows depend on this machine's speed (tests/conftest.py)."""
    engine = TorchEngine(source_dir, derived_dir=derived_dir, pacing=False)
    engine.load()
    yield engine
    engine.close()
