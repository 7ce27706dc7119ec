"""The Hugging Face path of `models fetch`: verification against the hub's metadata, and failing clearly."""

import hashlib
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from voicestream.aws.deploy.pins import MODEL_REVISION
from voicestream.engine.models.assets import AssetError
from voicestream.engine.models.hub import HubFile, git_blob_id, matches, select_files


def test_git_blob_id_equals_what_git_computes(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"vocab": {}}\n')
    expected = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    assert git_blob_id(path) == expected.stdout.strip()


def test_matches_checks_size_and_digest(tmp_path: Path) -> None:
    path = tmp_path / "kokoro-v1_0.pth"
    path.write_bytes(b"weights")
    digest = hashlib.sha256(b"weights").hexdigest()
    assert matches(path, HubFile("kokoro-v1_0.pth", 7, digest, None))
    assert not matches(path, HubFile("kokoro-v1_0.pth", 7, "0" * 64, None))
    assert not matches(path, HubFile("kokoro-v1_0.pth", 8, digest, None))
    assert not matches(tmp_path / "absent", HubFile("absent", 7, digest, None))


def test_select_files_keeps_config_checkpoint_and_voices() -> None:
    lfs = SimpleNamespace(sha256="a" * 64)
    entries = [
        SimpleNamespace(path="config.json", size=2351, lfs=None, blob_id="b" * 40),
        SimpleNamespace(path="kokoro-v1_0.pth", size=327_000_000, lfs=lfs, blob_id="c" * 40),
        SimpleNamespace(path="voices/af_heart.pt", size=523_000, lfs=lfs, blob_id="d" * 40),
        SimpleNamespace(path="README.md", size=10, lfs=None, blob_id="e" * 40),
        SimpleNamespace(path="voices", size=0, lfs=None, blob_id="f" * 40),
    ]
    files = select_files(entries)
    assert [file.path for file in files] == ["config.json", "kokoro-v1_0.pth", "voices/af_heart.pt"]
    assert files[0].git_blob_id == "b" * 40 and files[0].sha256 is None
    assert files[1].sha256 == "a" * 64


def test_select_files_refuses_a_revision_without_the_checkpoint() -> None:
    entries = [SimpleNamespace(path="config.json", size=1, lfs=None, blob_id="b" * 40)]
    with pytest.raises(AssetError, match=r"kokoro-v1_0\.pth"):
        select_files(entries)


def test_cli_without_network_fails_with_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "voicestream.cli", "models", "fetch", "--from", "huggingface",
         "--model-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 2
    # The default revision is the pinned one, never a moving branch.
    assert f"could not read hexgrad/Kokoro-82M@{MODEL_REVISION} from Hugging Face" in result.stderr
    assert "Traceback" not in result.stderr
