"""Derived model files: derived once, reused while they match, re-derived when anything changed."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from voicestream.engine.models.assets import AssetError, sha256_of
from voicestream.engine.models.derived import (
    MANIFEST_NAME,
    ensure_derived,
    load_derived,
    read_manifest,
    stale_reason,
)

NAMES = ("part-a.bin", "part-b.bin")
SOURCE = "a" * 64


class CountingDerivation:
    """Writes each name with content that says which derivation run made it."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, out: Path) -> list[str]:
        self.runs += 1
        for name in NAMES:
            (out / name).write_bytes(f"{name} run {self.runs}".encode())
        return list(NAMES)


def test_derives_once_then_reuses(tmp_path: Path) -> None:
    derive = CountingDerivation()
    first = ensure_derived(tmp_path, SOURCE, 1, NAMES, derive)
    second = ensure_derived(tmp_path, SOURCE, 1, NAMES, derive)
    assert derive.runs == 1 and first == second
    assert first.source_sha256 == SOURCE and first.version == 1
    for name in NAMES:
        assert first.files[name].sha256 == sha256_of(tmp_path / name)
    assert stale_reason(tmp_path, SOURCE, 1, NAMES) is None
    # Nothing but the files and the manifest is left behind (no temporary directory).
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*NAMES, MANIFEST_NAME])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: None, "source model changed"),  # the call below passes another source hash
        (lambda d: (d / NAMES[0]).write_bytes(b"tampered"), "does not match"),
        (lambda d: (d / NAMES[1]).unlink(), "missing"),
        (lambda d: (d / MANIFEST_NAME).write_text("{not json"), "no readable manifest"),
    ],
)
def test_rederives_when_source_or_files_changed(tmp_path: Path, change: object, reason: str) -> None:
    derive = CountingDerivation()
    ensure_derived(tmp_path, SOURCE, 1, NAMES, derive)
    change(tmp_path)  # type: ignore[operator]
    source = "b" * 64 if reason == "source model changed" else SOURCE
    assert reason in (stale_reason(tmp_path, source, 1, NAMES) or "")
    manifest = ensure_derived(tmp_path, source, 1, NAMES, derive)
    assert derive.runs == 2
    assert manifest.source_sha256 == source
    assert (tmp_path / NAMES[0]).read_bytes() == f"{NAMES[0]} run 2".encode()
    assert stale_reason(tmp_path, source, 1, NAMES) is None


def test_a_new_derivation_version_rederives(tmp_path: Path) -> None:
    derive = CountingDerivation()
    ensure_derived(tmp_path, SOURCE, 1, NAMES, derive)
    assert "version changed (1 -> 2)" in (stale_reason(tmp_path, SOURCE, 2, NAMES) or "")
    assert ensure_derived(tmp_path, SOURCE, 2, NAMES, derive).version == 2
    assert derive.runs == 2


def test_a_failed_derivation_leaves_no_valid_looking_files(tmp_path: Path) -> None:
    def broken(out: Path) -> list[str]:
        (out / NAMES[0]).write_bytes(b"half")
        raise RuntimeError("derivation crashed")

    with pytest.raises(RuntimeError, match="crashed"):
        ensure_derived(tmp_path, SOURCE, 1, NAMES, broken)
    assert list(tmp_path.iterdir()) == []
    assert read_manifest(tmp_path) is None


def test_a_derivation_that_writes_other_files_is_refused(tmp_path: Path) -> None:
    def wrong(out: Path) -> list[str]:
        (out / "other.bin").write_bytes(b"x")
        return ["other.bin"]

    with pytest.raises(AssetError, match="expected"):
        ensure_derived(tmp_path, SOURCE, 1, NAMES, wrong)
    assert read_manifest(tmp_path) is None


def test_an_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(AssetError, match="cannot write derived model files"):
        ensure_derived(blocker / "derived", SOURCE, 1, NAMES, CountingDerivation())


def test_the_bytes_handed_out_are_the_ones_hashed(tmp_path: Path) -> None:
    """The loader gets bytes, verified as read: a file swapped on disk after the check (and its
    manifest rewritten to match, as anyone who can write the directory could) is not what it runs."""
    loaded = load_derived(tmp_path, SOURCE, 1, NAMES, CountingDerivation())
    for name in NAMES:
        assert hashlib.sha256(loaded.contents[name]).hexdigest() == loaded.manifest.files[name].sha256
    (tmp_path / NAMES[0]).write_bytes(b"swapped after verification")
    assert loaded.contents[NAMES[0]] == f"{NAMES[0]} run 1".encode()
    # Loading again sees the swap, and derives afresh rather than trusting it.
    derive = CountingDerivation()
    again = load_derived(tmp_path, SOURCE, 1, NAMES, derive)
    assert derive.runs == 1 and again.contents[NAMES[0]] == f"{NAMES[0]} run 1".encode()


def test_created_directories_and_files_are_not_writable_by_others(tmp_path: Path) -> None:
    previous = os.umask(0o002)  # a umask that would make them group-writable
    try:
        load_derived(tmp_path / "cache" / "derived", SOURCE, 1, NAMES, CountingDerivation())
    finally:
        os.umask(previous)
    for path in [tmp_path / "cache", tmp_path / "cache" / "derived", *(tmp_path / "cache" / "derived").iterdir()]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))


@pytest.mark.parametrize("target", ["directory", "parent", "file"])
def test_a_directory_or_file_writable_by_others_is_refused(tmp_path: Path, target: str) -> None:
    directory = tmp_path / "derived"
    derive = CountingDerivation()
    load_derived(directory, SOURCE, 1, NAMES, derive)
    path = {"directory": directory, "parent": tmp_path, "file": directory / NAMES[1]}[target]
    os.chmod(path, stat.S_IMODE(path.stat().st_mode) | stat.S_IWOTH)
    with pytest.raises(AssetError, match=rf"{path} \(mode 0o\d+\).*chmod go-w"):
        load_derived(directory, SOURCE, 1, NAMES, derive)
    os.chmod(path, stat.S_IMODE(path.stat().st_mode) & ~stat.S_IWOTH)
    assert load_derived(directory, SOURCE, 1, NAMES, derive).manifest.source_sha256 == SOURCE
    assert derive.runs == 1


def test_a_group_writable_directory_is_refused_before_deriving(tmp_path: Path) -> None:
    directory = tmp_path / "derived"
    directory.mkdir()
    os.chmod(directory, 0o775)
    derive = CountingDerivation()
    with pytest.raises(AssetError, match="can be changed by another user"):
        load_derived(directory, SOURCE, 1, NAMES, derive)
    assert derive.runs == 0
