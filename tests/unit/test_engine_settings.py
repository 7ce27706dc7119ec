"""The onnx engine's settings: window plan and derived-files directory, from the environment to the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicestream.engine.models.derived import ensure_derived
from voicestream.engine.onnx.engine import DEFAULT_WINDOWS, PRODUCTION, OnnxEngine
from voicestream.engine.onnx.graphs import (
    DERIVATION_VERSION,
    DERIVED_FILES,
    choose_derived_dir,
    derived_folder,
)
from voicestream.engine.streaming.windows import WindowPlan
from voicestream.env import ConfigError, ServerSettings, decoder_windows
from voicestream.kokoro_server import engine_factory
from voicestream.kokoro_server.__main__ import main as server_main

SOURCE = "c" * 64


def test_the_window_plan_is_a_command_line_argument() -> None:
    assert decoder_windows(" 8, 1.5 ,64") == (8, 1.5, 64)
    assert decoder_windows("OFF") == "off"


@pytest.mark.parametrize("value", ["12,2", "a,b,c", "0,2,96", "24,2,12", "12,0.5,96", "12,nan,96", "on"])
def test_a_malformed_window_plan_is_refused_naming_the_argument(value: str) -> None:
    with pytest.raises(ConfigError, match="--decoder-windows"):
        decoder_windows(value)


def test_the_server_refuses_a_malformed_window_plan_at_startup(capsys: pytest.CaptureFixture[str]) -> None:
    assert server_main(["--decoder-windows", "12,2"]) == 2
    assert "--decoder-windows='12,2'" in capsys.readouterr().err


def test_the_server_passes_the_settings_to_the_engine(tmp_path: Path) -> None:
    """engine_factory -> create_engine -> OnnxEngine: the engine reads no environment itself."""
    settings = ServerSettings(decoder_windows=(8, 1.5, 64), derived_dir=tmp_path, threads=1)
    engine = engine_factory(settings)()
    assert isinstance(engine, OnnxEngine) and not engine.loaded
    assert engine.strategy.decoder_windows == WindowPlan(
        first=8,
        growth=1.5,
        largest=64,
        context=DEFAULT_WINDOWS.context,
        carried_context=DEFAULT_WINDOWS.carried_context,
        first_right_context=DEFAULT_WINDOWS.first_right_context,
        frontend_context=DEFAULT_WINDOWS.frontend_context,
        crossfade=DEFAULT_WINDOWS.crossfade,
    )
    assert engine.derived_dir == tmp_path
    whole = engine_factory(ServerSettings(decoder_windows="off"))()
    assert isinstance(whole, OnnxEngine) and whole.strategy.decoder_windows is None
    default = engine_factory(ServerSettings())()
    assert isinstance(default, OnnxEngine) and default.strategy == PRODUCTION


def fake_derivation(out: Path) -> list[str]:
    for name in DERIVED_FILES:
        (out / name).write_bytes(name.encode())
    return list(DERIVED_FILES)


def test_derived_files_go_beside_a_writable_model(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    assert choose_derived_dir(model_dir, SOURCE, tmp_path / "cache") == model_dir / "derived"


def test_a_model_directory_that_cannot_be_written_sends_them_to_the_cache(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "derived").write_text("a file where the folder would go: nothing can be created there")
    chosen = choose_derived_dir(model_dir, SOURCE, tmp_path / "cache")
    assert chosen == tmp_path / "cache" / "derived" / SOURCE[:16]


def test_files_already_derived_beside_the_model_are_used_as_they_are(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    ensure_derived(derived_folder(model_dir / "derived"), SOURCE, DERIVATION_VERSION, DERIVED_FILES, fake_derivation)
    assert choose_derived_dir(model_dir, SOURCE, tmp_path / "cache") == model_dir / "derived"
    # Files of another source model do not count as derived: a writable directory is still chosen.
    assert choose_derived_dir(model_dir, "d" * 64, tmp_path / "cache") == model_dir / "derived"
