"""The torch checkpoint's digest, checked at load (engine/models/checkpoint_digest.py): the pinned
hexgrad checkpoint, or what SOURCE.json records for another source; anything else is refused."""

import hashlib
import json
from pathlib import Path

import pytest

from voicestream.aws.deploy import pins
from voicestream.engine.models.assets import AssetError
from voicestream.engine.models.checkpoint_digest import (
    SOURCE_FILE,
    accepted_digests,
    pinned_checkpoint,
    verify_checkpoint,
    write_source,
)

CHECKPOINT = "kokoro-v1_0.pth"


def _checkpoint(root: Path, content: bytes = b"weights") -> tuple[Path, str]:
    path = root / CHECKPOINT
    path.write_bytes(content)
    return path, hashlib.sha256(content).hexdigest()


def test_the_pin_is_the_one_deploy_checks_before_upload() -> None:
    pinned = pinned_checkpoint()
    assert (pinned.repo, pinned.revision, pinned.file, pinned.sha256) == (
        pins.MODEL_REPO, pins.MODEL_REVISION, pins.CHECKPOINT, pins.CHECKPOINT_SHA256,
    )  # fmt: skip


def test_a_checkpoint_nothing_vouches_for_is_refused(tmp_path: Path) -> None:
    path, _ = _checkpoint(tmp_path)
    with pytest.raises(AssetError, match="unverified weights"):
        verify_checkpoint(path)


def test_source_json_vouches_for_the_digest_it_records(tmp_path: Path) -> None:
    path, digest = _checkpoint(tmp_path)
    write_source(tmp_path, "hexgrad/Kokoro-82M", "0" * 40, {CHECKPOINT: digest})
    assert verify_checkpoint(path) == digest
    path.write_bytes(b"weights, then changed")  # swapped or corrupted after the fetch
    with pytest.raises(AssetError, match="unverified weights"):
        verify_checkpoint(path)


def test_source_json_naming_the_pinned_revision_cannot_vouch_for_other_bytes(tmp_path: Path) -> None:
    path, digest = _checkpoint(tmp_path)
    pinned = pinned_checkpoint()
    write_source(tmp_path, pinned.repo, pinned.revision, {CHECKPOINT: digest})
    assert accepted_digests(tmp_path, CHECKPOINT) == {pinned.sha256}
    with pytest.raises(AssetError):
        verify_checkpoint(path)


def test_a_record_for_another_file_does_not_vouch(tmp_path: Path) -> None:
    path, digest = _checkpoint(tmp_path)
    write_source(tmp_path, "someone/else", "1" * 40, {"voices/af_heart.pt": digest})
    with pytest.raises(AssetError):
        verify_checkpoint(path)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_an_unreadable_source_json_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path, _ = _checkpoint(tmp_path)
    (tmp_path / SOURCE_FILE).write_text(text)
    with pytest.raises(AssetError, match=SOURCE_FILE):
        verify_checkpoint(path)


def test_write_source_records_repo_revision_and_digests(tmp_path: Path) -> None:
    write_source(tmp_path, "hexgrad/Kokoro-82M", "abc", {"b": "2" * 64, "a": "1" * 64})
    record = json.loads((tmp_path / SOURCE_FILE).read_text())
    assert record == {"repo": "hexgrad/Kokoro-82M", "revision": "abc", "sha256": {"a": "1" * 64, "b": "2" * 64}}
