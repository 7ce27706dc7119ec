"""Files derived once from a verified source model, and proof that they still belong to it.

A derivation writes its files into a directory beside the model; a small manifest records
the source's sha256, the derivation's version and each written file's size and sha256. The
files are reused only while all of that still matches: a new source model, a new derivation
version, or a missing/changed file re-derives. Every file is written under a temporary name
and renamed into place, the manifest last, so a crash or a concurrent loader never sees a half
file as valid (two loaders deriving at once both write whole files; the last rename wins).

The manifest sits beside the files it vouches for, so it proves only that they were not changed
by accident. Against someone swapping them on purpose: a directory or file that another user can
write is refused (ours are created 0o755/0o644), and `load_derived` hands out the very bytes it
hashed, so nothing can be swapped between the check and the use (the caller loads the bytes, never
the path again).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicestream.engine.models.assets import AssetError, sha256_of

MANIFEST_NAME = "manifest.json"

# Writes the derived files into the given (temporary) directory; returns their names.
Derivation = Callable[[Path], list[str]]

DIRECTORY_MODE = 0o755
FILE_MODE = 0o644


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
    verified = _read_verified(directory, source_sha256, version, names)
    return verified if isinstance(verified, str) else None


@dataclass(frozen=True, slots=True)
class DerivedFiles:
    """Derived files as verified: their manifest, and each file's bytes, the ones that were hashed."""

    manifest: DerivedManifest
    contents: Mapping[str, bytes]


def load_derived(
    directory: Path, source_sha256: str, version: int, names: tuple[str, ...], derive: Derivation
) -> DerivedFiles:
    """The verified bytes of files `names` derived from the source into `directory`, derived now
    when missing or stale. Refuses a directory or file that another user can write."""
    refuse_if_shared(directory)
    verified = _read_verified(directory, source_sha256, version, names)
    if isinstance(verified, str):
        _derive_into(directory, source_sha256, version, names, derive)
        refuse_if_shared(directory)
        verified = _read_verified(directory, source_sha256, version, names)
        if isinstance(verified, str):  # changed again between writing and reading: not ours to trust
            raise AssetError(f"derived model files in {directory} changed while loading them ({verified})")
    return verified


def ensure_derived(
    directory: Path, source_sha256: str, version: int, names: tuple[str, ...], derive: Derivation
) -> DerivedManifest:
    """Make `directory` hold verified files `names` derived from the source; derive only when stale."""
    return load_derived(directory, source_sha256, version, names, derive).manifest


def refuse_if_shared(directory: Path) -> None:
    """Raise AssetError when `directory`, its parent or a file in it can be written by group or
    others, or belongs to another user (root aside): they could swap the graphs, manifest included."""
    candidates = [directory.parent, directory]
    if directory.is_dir():
        candidates += sorted(directory.iterdir())
    for path in candidates:
        try:
            status = path.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue  # not there yet: created below with our modes
        if stat.S_ISLNK(status.st_mode):
            status = path.stat()
        shared = status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        foreign = status.st_uid not in (os.geteuid(), 0)
        if shared or foreign:
            whose = f"mode {stat.S_IMODE(status.st_mode):#o}" if shared else f"owned by uid {status.st_uid}"
            raise AssetError(
                f"derived model files in {directory} are not safe to load: {path} ({whose}) can be changed by "
                f"another user, who could swap the graphs; run `chmod go-w {path}` (and own it), or set "
                "VOICESTREAM_DERIVED_DIR to a directory only this user can write"
            )


def _read_verified(directory: Path, source_sha256: str, version: int, names: tuple[str, ...]) -> DerivedFiles | str:
    """The files' bytes when each matches its manifest entry (checked on those very bytes), else why not."""
    manifest = read_manifest(directory)
    if manifest is None:
        return "no readable manifest"
    if manifest.source_sha256 != source_sha256:
        return f"source model changed (derived from {manifest.source_sha256[:12]}, source is {source_sha256[:12]})"
    if manifest.version != version:
        return f"derivation version changed ({manifest.version} -> {version})"
    contents: dict[str, bytes] = {}
    for name in names:
        entry = manifest.files.get(name)
        if entry is None:
            return f"{name} is not in the manifest"
        try:
            content = (directory / name).read_bytes()
        except FileNotFoundError:
            return f"{name} is missing"
        except IsADirectoryError:
            return f"{name} is not a file"
        if len(content) != entry.size or hashlib.sha256(content).hexdigest() != entry.sha256:
            return f"{name} does not match its manifest entry"
        contents[name] = content
    return DerivedFiles(manifest, contents)


def _derive_into(directory: Path, source_sha256: str, version: int, names: tuple[str, ...], derive: Derivation) -> None:
    try:
        _make_directories(directory)
        with tempfile.TemporaryDirectory(prefix=".deriving-", dir=directory) as scratch_name:
            scratch = Path(scratch_name)
            written = derive(scratch)
            if sorted(written) != sorted(names):
                raise AssetError(f"derivation wrote {sorted(written)}, expected {sorted(names)}")
            files = {name: DerivedFile((scratch / name).stat().st_size, sha256_of(scratch / name)) for name in names}
            for name in names:
                os.chmod(scratch / name, FILE_MODE)  # whatever the umask made of it
                os.replace(scratch / name, directory / name)
            _write_atomically(directory / MANIFEST_NAME, DerivedManifest(source_sha256, version, files).to_json())
    except OSError as error:
        raise AssetError(
            f"cannot write derived model files in {directory} ({error}): make it writable or choose another directory"
        ) from error


def _make_directories(directory: Path) -> None:
    """Create `directory` and missing parents with DIRECTORY_MODE whatever the umask (a umask of
    0o002 would make them group-writable, which `refuse_if_shared` then refuses)."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir(mode=DIRECTORY_MODE, exist_ok=True)
        os.chmod(path, DIRECTORY_MODE)


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as sink:
            sink.write(text)
        os.chmod(temporary, FILE_MODE)  # mkstemp makes it private; the model files beside it are not
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
