"""Files derived once from a verified source model, and proof that they still belong to it.

A derivation writes its files into a directory beside the model; a small manifest records
the source's sha256, the derivation's version and each written file's size and sha256. The
files are reused only while all of that still matches: a new source model, a new derivation
version, or a missing/changed file re-derives. Every file is written under a temporary name
and renamed into place, the manifest last, so a crash or a concurrent loader never sees a half
file as valid (two loaders deriving at once both write whole files; the last rename wins).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicestream.engine.models.assets import AssetError, sha256_of

MANIFEST_NAME = "manifest.json"

# Writes the derived files into the given (temporary) directory; returns their names.
Derivation = Callable[[Path], list[str]]


@dataclass(frozen=True, slots=True)
class DerivedFile:
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class DerivedManifest:
    source_sha256: str
    version: int
    files: Mapping[str, DerivedFile]

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "source_sha256": self.source_sha256,
            "version": self.version,
            "files": {name: {"size": f.size, "sha256": f.sha256} for name, f in sorted(self.files.items())},
        }
        return json.dumps(body, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DerivedManifest:
        body = json.loads(text)
        files = {name: DerivedFile(int(f["size"]), str(f["sha256"])) for name, f in body["files"].items()}
        return cls(str(body["source_sha256"]), int(body["version"]), files)


def read_manifest(directory: Path) -> DerivedManifest | None:
    """The manifest in `directory`, or None when it is missing or unreadable (then: re-derive)."""
    try:
        return DerivedManifest.from_json((directory / MANIFEST_NAME).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stale_reason(directory: Path, source_sha256: str, version: int, names: tuple[str, ...]) -> str | None:
    """Why the derived files in `directory` cannot be used as they are, or None when they can."""
    manifest = read_manifest(directory)
    if manifest is None:
        return "no readable manifest"
    if manifest.source_sha256 != source_sha256:
        return f"source model changed (derived from {manifest.source_sha256[:12]}, source is {source_sha256[:12]})"
    if manifest.version != version:
        return f"derivation version changed ({manifest.version} -> {version})"
    for name in names:
        entry = manifest.files.get(name)
        path = directory / name
        if entry is None:
            return f"{name} is not in the manifest"
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != entry.size or sha256_of(path) != entry.sha256:
            return f"{name} does not match its manifest entry"
    return None


def ensure_derived(
    directory: Path, source_sha256: str, version: int, names: tuple[str, ...], derive: Derivation
) -> DerivedManifest:
    """Make `directory` hold verified files `names` derived from the source; derive only when stale."""
    if stale_reason(directory, source_sha256, version, names) is None:
        manifest = read_manifest(directory)
        assert manifest is not None
        return manifest
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".deriving-", dir=directory) as scratch_name:
            scratch = Path(scratch_name)
            written = derive(scratch)
            if sorted(written) != sorted(names):
                raise AssetError(f"derivation wrote {sorted(written)}, expected {sorted(names)}")
            files = {name: DerivedFile((scratch / name).stat().st_size, sha256_of(scratch / name)) for name in names}
            for name in names:
                os.replace(scratch / name, directory / name)
            manifest = DerivedManifest(source_sha256, version, files)
            _write_atomically(directory / MANIFEST_NAME, manifest.to_json())
    except OSError as error:
        raise AssetError(
            f"cannot write derived model files in {directory} ({error}): make it writable or choose another directory"
        ) from error
    return manifest


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as sink:
            sink.write(text)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; the model files beside it are not
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
