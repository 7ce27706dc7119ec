"""`make image` finds the checkout by its files, wherever local_image.py sits in the package;
`make run-image` starts the image locked down and on loopback."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from voicestream.aws.deploy import local_image
from voicestream.aws.deploy.local_image import CACHE_MOUNT, CHECKOUT_MARKERS, MODEL_MOUNT, repository_root, run_command

REPO = Path(__file__).resolve().parents[2]


def make_checkout(path: Path) -> Path:
    for marker in CHECKOUT_MARKERS:
        (path / marker).parent.mkdir(parents=True, exist_ok=True)
        (path / marker).write_text("")
    return path


def test_the_checkout_is_found_from_any_directory_inside_it() -> None:
    assert repository_root(REPO) == REPO
    assert repository_root(REPO / "src" / "voicestream" / "aws" / "deploy") == REPO
    assert (repository_root(REPO) / "container" / "local" / "debian-image").is_file()


def test_the_nearest_checkout_above_the_start_wins(tmp_path: Path) -> None:
    other = make_checkout(tmp_path / "other")
    (other / "deep" / "er").mkdir(parents=True)
    assert repository_root(other / "deep" / "er") == other


def test_outside_any_checkout_the_modules_own_checkout_is_used(tmp_path: Path) -> None:
    # The tests import the package from this checkout's src/ (editable or PYTHONPATH).
    assert repository_root(tmp_path) == REPO


def test_build_with_a_root_that_is_no_checkout_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert local_image.main(["build", "--root", str(tmp_path)]) == 1
    assert f"local_image: {tmp_path} is not a voicestream checkout" in capsys.readouterr().err


def test_run_image_listens_on_loopback_and_writes_only_its_cache(tmp_path: Path) -> None:
    command = run_command("voicestream-kokoro:local", tmp_path, 9000, name="voicestream-kokoro-9000")
    pairs = set(itertools.pairwise(command))
    assert ("--env", "VOICESTREAM_HOST=127.0.0.1") in pairs  # not 0.0.0.0: every interface
    assert ("--env", "VOICESTREAM_PORT=9000") in pairs
    assert "--read-only" in command and ("--cap-drop", "ALL") in pairs
    assert ("--volume", f"{tmp_path.resolve()}:{MODEL_MOUNT}:ro") in pairs
    writable = [value for flag, value in pairs if flag in {"--mount", "--tmpfs"}]
    assert sorted(writable) == [
        "/tmp:rw,exec,nosuid,nodev",
        f"type=volume,source=voicestream-cache,destination={CACHE_MOUNT}",
    ]
    assert command[-2:] == ["voicestream-kokoro:local", "serve"]
