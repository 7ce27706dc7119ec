"""Which torch checkpoint the engine may load: its sha256 is checked before torch reads it.

The torch engine loads `kokoro-v1_0.pth` from the model directory (SageMaker's /opt/ml/model in
production). Its digest must be one that is vouched for:
- hexgrad/Kokoro-82M's checkpoint at the pinned revision (assets_manifest.json `torch_checkpoint`,
  the digest `voicestream deploy` checks before it uploads), always;
- or the one the directory's SOURCE.json records for it, unless SOURCE.json names the pinned
  revision itself: `voicestream models fetch --from huggingface` records the hub's own LFS sha256 of
  each file it verified (another revision), a directory built by hand records its own.
Anything else is refused with an AssetError before the model is built. Weights derived from the
int8 export are not checked here: their own manifest vouches for them (derived.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from voicestream.engine.models.assets import AssetError, manifest, sha256_of

SOURCE_FILE = "SOURCE.json"


@dataclass(frozen=True, slots=True)
class PinnedCheckpoint:
    repo: str
    revision: str
    file: str
    sha256: str


def pinned_checkpoint() -> PinnedCheckpoint:
    spec = manifest()["torch_checkpoint"]
    return PinnedCheckpoint(repo=spec["repo"], revision=spec["revision"], file=spec["file"], sha256=spec["sha256"])


def write_source(root: Path, repo: str, revision: str, sha256: Mapping[str, str]) -> Path:
    """SOURCE.json: where the directory's files come from and the sha256 of each (by relative path)."""
    path = root / SOURCE_FILE
    body = {"repo": repo, "revision": revision, "sha256": dict(sorted(sha256.items()))}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def accepted_digests(root: Path, name: str) -> frozenset[str]:
    """The digests `root/name` may have: the pinned one, and SOURCE.json's record for it."""
    pinned = pinned_checkpoint()
    accepted = {pinned.sha256}
    source = root / SOURCE_FILE
    if source.is_file():
        try:
            record = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise AssetError(f"{source} is unreadable ({error})") from None
        if not isinstance(record, dict):
            raise AssetError(f"{source} is not a JSON object")
        names_pinned = record.get("repo") == pinned.repo and record.get("revision") == pinned.revision
        recorded = record.get("sha256", {})
        digest = recorded.get(name) if isinstance(recorded, dict) else None
        if not names_pinned and isinstance(digest, str):
            accepted.add(digest)
    return frozenset(accepted)


def verify_checkpoint(path: Path) -> str:
    """The checkpoint's sha256, or AssetError when nothing vouches for it (hashed once per load)."""
    if not path.is_file():
        raise AssetError(f"missing model file {path}")
    accepted = accepted_digests(path.parent, path.name)
    digest = sha256_of(path)
    if digest not in accepted:
        pinned = pinned_checkpoint()
        raise AssetError(
            f"checkpoint {path} has sha256 {digest[:16]}…, which is neither {pinned.repo}@{pinned.revision[:12]}'s "
            f"nor one that {path.parent / SOURCE_FILE} records for it: refusing to load unverified weights "
            "(fetch them again with `voicestream models fetch --from huggingface`)"
        )
    return digest
