"""`make image` finds the checkout by its files, wherever local_image.py sits in the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicestream.aws.deploy import local_image
from voicestream.aws.deploy.local_image import CHECKOUT_MARKERS, repository_root

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
