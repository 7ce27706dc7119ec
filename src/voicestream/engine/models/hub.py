"""`voicestream models fetch --from huggingface`: the torch engine's files from hexgrad/Kokoro-82M.

Needs internet. Each file is checked against the hub's own metadata for the resolved revision:
LFS files (the checkpoint, the voices) by size and sha256, small git files (config.json) by
their git blob id. The resolved commit and the LFS files' sha256 are recorded in SOURCE.json
beside the files: the torch engine checks the checkpoint against it at load (checkpoint_digest.py).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicestream.engine.models.assets import AssetError, Progress, sha256_of
from voicestream.engine.models.checkpoint_digest import write_source
from voicestream.env import default_model_dir

HUB_REPO = "hexgrad/Kokoro-82M"
HUB_FILES = ("config.json", "kokoro-v1_0.pth")
HUB_VOICE_DIR = "voices/"


@dataclass(frozen=True, slots=True)
class HubFile:
    path: str
    size: int
    sha256: str | None  # LFS files
    git_blob_id: str | None  # plain git files


def git_blob_id(path: Path) -> str:
    """Git's object id of a file's bytes: sha1 of "blob <size>\\0" + content."""
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def matches(path: Path, expected: HubFile) -> bool:
    if not path.is_file() or path.stat().st_size != expected.size:
        return False
    if expected.sha256 is not None:
        return sha256_of(path) == expected.sha256
    return git_blob_id(path) == expected.git_blob_id


def select_files(entries: list[Any]) -> list[HubFile]:
    """The config, the checkpoint and every voice, from the hub's expanded repo tree entries."""
    files = []
    for entry in entries:
        path = getattr(entry, "path", "")
        if path in HUB_FILES or (path.startswith(HUB_VOICE_DIR) and path.endswith(".pt")):
            lfs = getattr(entry, "lfs", None)
            files.append(
                HubFile(
                    path=path,
                    size=int(entry.size),
                    sha256=lfs.sha256 if lfs is not None else None,
                    git_blob_id=None if lfs is not None else entry.blob_id,
                )
            )
    missing = set(HUB_FILES) - {file.path for file in files}
    if missing:
        raise AssetError(f"{HUB_REPO} has no {', '.join(sorted(missing))} at this revision")
    return files


def fetch_hub_assets(model_dir: Path | None = None, revision: str = "main", progress: Progress = print) -> Path:
    """Download and verify config, checkpoint and .pt voices into `model_dir`; skip what matches."""
    try:
        from huggingface_hub import HfApi, hf_hub_download
    except ImportError:  # pragma: no cover - the engine extra brings it
        raise AssetError("huggingface_hub is needed for --from huggingface: pip install huggingface_hub") from None
    root = model_dir or default_model_dir()
    api = HfApi()
    try:
        commit = str(api.repo_info(HUB_REPO, revision=revision).sha)
        files = select_files(list(api.list_repo_tree(HUB_REPO, recursive=True, expand=True, revision=commit)))
    except Exception as error:  # network, auth or hub errors all mean the same to the user
        raise AssetError(f"could not read {HUB_REPO}@{revision} from Hugging Face: {error}") from None
    with tempfile.TemporaryDirectory(prefix="voicestream-hub-") as scratch:
        for file in files:
            target = root / file.path
            if matches(target, file):
                continue
            progress(f"fetching {file.path} ({file.size / 1e6:.1f} MB) from {HUB_REPO}@{commit[:10]}")
            try:
                downloaded = Path(hf_hub_download(HUB_REPO, file.path, revision=commit, local_dir=scratch))
            except Exception as error:
                raise AssetError(f"could not download {file.path} from {HUB_REPO}: {error}") from None
            if not matches(downloaded, file):
                raise AssetError(f"downloaded {file.path} does not match the hub's size/digest; try again")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(downloaded, target)
    write_source(root, HUB_REPO, commit, {file.path: file.sha256 for file in files if file.sha256 is not None})
    progress(f"{len(files)} files from {HUB_REPO}@{commit[:10]} verified in {root}")
    return root
