"""The files of the torch engine: a model directory in the layout of hexgrad/Kokoro-82M.

SageMaker mounts model data under /opt/ml/model; the directory holds `config.json`,
`kokoro-v1_0.pth` (a dict of component state dicts) and `voices/<id>.pt` (tensors [510, 1, 256]).
Voices may also be our raw float32 `voices/<id>.bin` files, so the directory that
`voicestream models fetch` fills for the ONNX engine serves voices to this engine too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from voicestream.engine.models.assets import AssetError, manifest, verify_file
from voicestream.engine.models.checkpoint_digest import verify_checkpoint
from voicestream.env import default_model_dir

CONFIG_FILE = "config.json"
CHECKPOINT_FILE = "kokoro-v1_0.pth"
VOICE_ROWS = 510  # one style vector per input length (Kokoro's context of 510 phonemes)
STYLE_DIM = 256
TORCH_HINT = (
    "the torch engine needs the hexgrad/Kokoro-82M files (config.json, kokoro-v1_0.pth, voices/<id>.pt): "
    "run `voicestream models fetch --from huggingface`, or point VOICESTREAM_MODEL_DIR at a directory "
    "holding them (SageMaker mounts them under /opt/ml/model)"
)
# What KModel reads from config.json; a file without them is not Kokoro's config.
CONFIG_KEYS = (
    "vocab", "n_token", "plbert", "hidden_dim", "style_dim", "n_layer", "max_dur", "dropout",
    "text_encoder_kernel_size", "n_mels", "istftnet",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TorchAssets:
    root: Path
    config: Path
    checkpoint: Path

    @property
    def voices_dir(self) -> Path:
        return self.root / "voices"

    def voice_path(self, voice: str) -> Path:
        """`voices/<id>.pt` (the hexgrad layout), else our raw `voices/<id>.bin`."""
        for suffix in (".pt", ".bin"):
            path = self.voices_dir / f"{voice}{suffix}"
            if path.is_file():
                return path
        raise AssetError(f"missing voice file {self.voices_dir / voice}.pt (or .bin): {TORCH_HINT}")


def torch_assets(model_dir: Path | None = None) -> TorchAssets:
    """Locate config and checkpoint in `model_dir` (default: the shared model directory); the
    checkpoint's sha256 must be the pinned one or SOURCE.json's record (checkpoint_digest.py)."""
    root = model_dir or default_model_dir()
    assets = TorchAssets(root=root, config=root / CONFIG_FILE, checkpoint=root / CHECKPOINT_FILE)
    for path in (assets.config, assets.checkpoint):
        if not path.is_file():
            raise AssetError(f"missing model file {path}: {TORCH_HINT}")
    verify_checkpoint(assets.checkpoint)
    return assets


def read_config(path: Path) -> dict[str, Any]:
    """Kokoro's config.json, checked for every key that KModel reads."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise AssetError(f"model config {path} is unreadable ({error}): {TORCH_HINT}") from None
    missing = [key for key in CONFIG_KEYS if not isinstance(config, dict) or key not in config]
    if missing:
        raise AssetError(f"model config {path} lacks {', '.join(missing)}: not Kokoro's config.json")
    result: dict[str, Any] = config
    return result


def open_checkpoint(path: Path) -> Mapping[str, Mapping[str, torch.Tensor]]:
    """Memory-map the checkpoint (cheap) so a wrong or truncated file fails before the model is built."""
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # torch raises several types for a truncated or foreign file
        raise AssetError(f"checkpoint {path} cannot be read ({error}): delete it; {TORCH_HINT}") from None
    if not isinstance(loaded, dict) or not all(isinstance(part, dict) for part in loaded.values()):
        raise AssetError(f"checkpoint {path} is not a dict of state dicts (kokoro-v1_0.pth format)")
    result: dict[str, dict[str, torch.Tensor]] = loaded
    return result


def check_checkpoint(path: Path, checkpoint: Mapping[str, Mapping[str, torch.Tensor]], model: torch.nn.Module) -> None:
    """Fail unless every component of `model` gets exactly its parameters from `checkpoint`.

    KModel falls back to a non-strict load, which would leave missing parts randomly
    initialised without a word: a half-loaded model that speaks noise.
    """
    components = [name for name, _ in model.named_children()]
    problems = [f"unexpected component {name!r}" for name in checkpoint if name not in components]
    for name in components:
        if name not in checkpoint:
            problems.append(f"component {name!r} is missing")
            continue
        expected = set(getattr(model, name).state_dict())
        found = {_strip_parallel_prefix(key) for key in checkpoint[name]}
        if found != expected:
            missing, unexpected = len(expected - found), len(found - expected)
            problems.append(f"{name!r} has {missing} missing and {unexpected} unexpected keys")
    if problems:
        raise AssetError(f"checkpoint {path} does not match {CONFIG_FILE}: {'; '.join(problems)}; {TORCH_HINT}")


def _strip_parallel_prefix(key: str) -> str:
    # The official checkpoint was saved from DataParallel ("module." prefixes); KModel strips them.
    return key.removeprefix("module.")


def load_voice_tensor(path: Path) -> torch.Tensor:
    """One voice as a float32 CPU tensor [510, 1, 256], from a `.pt` or a verified raw `.bin` file."""
    if path.suffix == ".bin":
        _verify_bin_voice(path)
        values = torch.from_numpy(np.fromfile(path, dtype="<f4"))
    else:
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # truncated or foreign file
            raise AssetError(f"voice file {path} cannot be read ({error}): {TORCH_HINT}") from None
        if not isinstance(loaded, torch.Tensor):
            raise AssetError(f"voice file {path} holds {type(loaded).__name__}, expected a tensor")
        values = loaded.detach().to(torch.float32)
    if values.numel() != VOICE_ROWS * STYLE_DIM:
        raise AssetError(
            f"voice file {path} has {values.numel()} values, expected {VOICE_ROWS}x{STYLE_DIM}: {TORCH_HINT}"
        )
    return values.reshape(VOICE_ROWS, 1, STYLE_DIM).contiguous()


def _verify_bin_voice(path: Path) -> None:
    """Our .bin voices come with sha256 digests in the manifest; check them before use."""
    spec = manifest()["voices"]
    digest = spec["sha256"].get(path.stem)
    if digest is not None:
        verify_file(path, spec["size"], digest)


def blend_voices(parts: Iterable[tuple[torch.Tensor, float]]) -> torch.Tensor:
    """The weighted sum of voice tensors (weights already normalised to 1)."""
    total: torch.Tensor | None = None
    for tensor, weight in parts:
        total = tensor * weight if total is None else total + tensor * weight
    if total is None:
        raise ValueError("a blend needs at least one voice")
    return total
