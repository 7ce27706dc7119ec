"""A random-weight Kokoro-82M checkpoint of the real architecture, for tests and smoke checks.

The real weights (327 MB, hexgrad/Kokoro-82M) are not reachable offline, but the real
config.json is: building kokoro's KModel from it gives the exact architecture, and its state
dicts saved as kokoro-v1_0.pth make a model directory that the torch engine loads through
the same code as the real one. The audio is noise; its timing is not: the untrained duration
predictor would give every phoneme ~0.6 s, so its last layer is set to a realistic length.
Its pitch is set to a voice's range too: untrained, the pitch curve stays within about +-1 Hz,
below the source's 10 Hz voicing threshold, so the harmonic (sine) source would never sound
and what depends on it (its phase, integrated over the sentence) would go untested.

    python -m tests.support.checkpoint SOURCE_DIR OUT_DIR [VOICE ...]
"""

from __future__ import annotations

import argparse
import math
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from voicestream.engine.models.assets import sha256_of
from voicestream.engine.models.checkpoint_digest import write_source
from voicestream.engine.models.torch_assets import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    TorchAssets,
    load_voice_tensor,
)
from voicestream.engine.torch.weights import kmodel_architecture, save_checkpoint

FRAMES_PER_SECOND = 40  # kokoro's duration unit: one frame is 600 samples at 24 kHz
PHONEME_SECONDS = 0.075  # about what the trained model gives a phoneme at speed 1
PITCH_HZ = 140.0  # centre of the calibrated pitch curve
PITCH_SPREAD_HZ = 250.0  # Hz per unit of the untrained curve (std ~0.2): ~50 Hz std, a few unvoiced dips
DEFAULT_VOICES = ("af_heart", "am_michael", "bf_emma", "bm_george")


def random_kmodel(config: Path, *, seed: int = 0, phoneme_s: float = PHONEME_SECONDS) -> Any:
    """kokoro's KModel built from `config`, randomly initialised from `seed`, durations calibrated."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = kmodel_architecture(config)
    calibrate_durations(model, phoneme_s)
    calibrate_pitch(model)
    return model.eval()


def calibrate_durations(model: Any, phoneme_s: float) -> None:
    """Make every phoneme last about `phoneme_s` at speed 1.

    kokoro's duration of a phoneme is sum(sigmoid(duration_proj(x))) over max_dur outputs, in
    frames. Shrinking the random weights and setting every bias to logit(frames / max_dur)
    puts that sum at `frames` whatever the (random) input, so timings are predictable.
    """
    layer = model.predictor.duration_proj.linear_layer
    max_dur = layer.out_features
    frames = phoneme_s * FRAMES_PER_SECOND
    if not 0 < frames < max_dur:
        raise ValueError(f"phoneme_s must be between 0 and {max_dur / FRAMES_PER_SECOND} s, got {phoneme_s}")
    share = frames / max_dur
    with torch.no_grad():
        layer.weight.mul_(0.01)
        layer.bias.fill_(math.log(share / (1 - share)))


def calibrate_pitch(model: Any, centre_hz: float = PITCH_HZ, spread_hz: float = PITCH_SPREAD_HZ) -> None:
    """Scale the pitch projection so the curve varies around `centre_hz` like a voice's (mostly voiced)."""
    layer = model.predictor.F0_proj
    with torch.no_grad():
        layer.weight.mul_(spread_hz)
        layer.bias.mul_(spread_hz).add_(centre_hz)


def convert_voices(source_dir: Path, out_dir: Path, voices: Iterable[str]) -> list[Path]:
    """Write `voices/<id>.pt` tensors [510, 1, 256] (hexgrad's format) from .bin or .pt sources."""
    source = TorchAssets(root=source_dir, config=source_dir / CONFIG_FILE, checkpoint=source_dir / CHECKPOINT_FILE)
    (out_dir / "voices").mkdir(parents=True, exist_ok=True)
    written = []
    for voice in voices:
        target = out_dir / "voices" / f"{voice}.pt"
        torch.save(load_voice_tensor(source.voice_path(voice)), target)
        written.append(target)
    return written


def build_model_dir(source_dir: Path, out_dir: Path, voices: Sequence[str] = DEFAULT_VOICES, *, seed: int = 0) -> Path:
    """A model directory in hexgrad's layout with random weights, from a directory holding the
    real config.json and voices (e.g. the one `voicestream models fetch` fills)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source_dir / CONFIG_FILE, out_dir / CONFIG_FILE)
    checkpoint = save_checkpoint(random_kmodel(out_dir / CONFIG_FILE, seed=seed), out_dir / CHECKPOINT_FILE)
    convert_voices(source_dir, out_dir, voices)
    # The torch engine loads only a checkpoint whose digest is vouched for (checkpoint_digest.py).
    write_source(out_dir, "tests/support/checkpoint.py (random weights)", f"seed-{seed}",
                 {CHECKPOINT_FILE: sha256_of(checkpoint)})  # fmt: skip
    return out_dir


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source_dir", type=Path, help="directory with the real config.json and voices/")
    parser.add_argument("out_dir", type=Path, help="where to write config.json, kokoro-v1_0.pth, voices/")
    parser.add_argument("voices", nargs="*", default=list(DEFAULT_VOICES), help="voice ids to convert")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = build_model_dir(args.source_dir, args.out_dir, args.voices, seed=args.seed)
    print(out)


if __name__ == "__main__":
    main()
