"""Asset verification: a missing, partial or corrupted file is a clear error naming file and fix."""

import shutil
from pathlib import Path

import pytest

from voicestream.engine import G2PSettings
from voicestream.engine.models.assets import (
    AssetError,
    manifest,
    onnx_assets,
    read_voice,
    verify_file,
)
from voicestream.engine.onnx.engine import OnnxEngine
from voicestream.env import default_model_dir


@pytest.fixture
def model_copy(tmp_path: Path) -> Path:
    """A copy of the verified config and two voices, and a link to the 92 MB model."""
    source = default_model_dir()
    (tmp_path / "voices").mkdir()
    shutil.copy(source / "config.json", tmp_path / "config.json")
    (tmp_path / "kokoro-v1.0.int8.onnx").symlink_to(source / "kokoro-v1.0.int8.onnx")
    for voice in ("af_heart", "bf_emma"):
        shutil.copy(source / "voices" / f"{voice}.bin", tmp_path / "voices" / f"{voice}.bin")
    return tmp_path


def test_complete_directory_verifies(model_copy: Path) -> None:
    assets = onnx_assets(model_copy, voices=("af_heart", "bf_emma"))
    assert assets.voice_path("bf_emma") == model_copy / "voices" / "bf_emma.bin"


def test_missing_file_names_it_and_the_fix(model_copy: Path) -> None:
    (model_copy / "config.json").unlink()
    with pytest.raises(AssetError, match=r"missing model file .*config\.json.*voicestream models fetch"):
        onnx_assets(model_copy, voices=())


def test_partial_file_is_refused(model_copy: Path) -> None:
    voice = model_copy / "voices" / "af_heart.bin"
    voice.write_bytes(voice.read_bytes()[:1000])
    with pytest.raises(AssetError, match=r"af_heart\.bin has 1000 bytes, expected 522240"):
        onnx_assets(model_copy, voices=("af_heart",))


def test_corrupted_file_is_refused(model_copy: Path) -> None:
    config = model_copy / "config.json"
    data = bytearray(config.read_bytes())
    data[100] ^= 0xFF
    config.write_bytes(bytes(data))
    with pytest.raises(AssetError, match=r"config\.json is corrupted"):
        onnx_assets(model_copy, voices=())


def test_unnamed_voices_are_verified_only_when_asked(model_copy: Path) -> None:
    onnx_assets(model_copy, voices=("af_heart",))
    with pytest.raises(AssetError, match=r"missing model file .*voices/af_alloy\.bin"):
        onnx_assets(model_copy)


def test_manifest_matches_the_documented_model() -> None:
    model = manifest()["onnx_model"]
    assert model["size"] == 92_361_271
    assert model["sha256"] == "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
    assert sum(part["size"] for part in model["parts"]) == model["size"]
    assert manifest()["voices"]["sha256"]["af_heart"].startswith("d583ccff")


def test_verify_file_accepts_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc")
    verify_file(path, 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


def test_read_voice_checks_the_bytes_it_returns(model_copy: Path) -> None:
    assets = onnx_assets(model_copy, voices=())
    assert len(read_voice(assets, "bf_emma")) == manifest()["voices"]["size"]
    voice = model_copy / "voices" / "af_heart.bin"
    data = bytearray(voice.read_bytes())
    data[0] ^= 0xFF
    voice.write_bytes(bytes(data))
    with pytest.raises(AssetError, match=r"af_heart\.bin is corrupted"):
        read_voice(assets, "af_heart")


def test_a_voice_loads_without_verifying_the_model_again(model_copy: Path, onnx_engine: OnnxEngine) -> None:
    """A voice's first use verified the whole 92 MB model again (~2 s of a worker per new
    voice). Here the model is gone after loading: a voice loads all the same."""
    shutil.copy(default_model_dir() / "voices" / "am_adam.bin", model_copy / "voices" / "am_adam.bin")
    engine = OnnxEngine(model_copy, threads=1, derived_dir=onnx_engine.derived_dir, g2p=G2PSettings(workers=1))
    engine.load()
    try:
        (model_copy / "kokoro-v1.0.int8.onnx").unlink()
        chunks = list(engine.synthesize("Hi.", voice="am_adam:1,af_heart:1"))
        assert sum(len(chunk.samples) for chunk in chunks) > 0
    finally:
        engine.close()
