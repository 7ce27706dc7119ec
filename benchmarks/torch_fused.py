"""Torch engine on the CPU: the generator's fused blocks against kokoro's own modules.

engine/torch/fused.py folds the convolutions' weight norms once at load (exact) and runs each of
the generator's AdaIN + Snake steps in fewer passes over memory (the same function, rounded
otherwise). Three runtimes over the same real weights (derived from the int8 export by `make
models`), in one process, alternating per repeat so the machine's load falls on all alike:

- `weight norms per call`: kokoro's model as it loads (every call recomputes each weight);
- `kokoro modules`: the weights folded, kokoro's own blocks (`fused=False`);
- `fused`: the engine as it ships.

Per runtime, decoder windows of 44, 100 and 176 generator frames (a first window's span, a
middle one, the largest) over a 50-word sentence's encoding: milliseconds per frame. Then two
engines as a server runs them (paced, 2 threads), `fused` and `kokoro modules`: first audio and
real-time factor of the 5, 15, 30 and 50-word sentences of first_audio_length.py.

    .venv-torch/bin/python benchmarks/torch_fused.py [--repeats 3] [--threads 2]
"""

from __future__ import annotations

# First, before torch loads: the engine's OpenMP threads sleep when idle (engine/torch/__init__.py).
import voicestream.engine.torch  # noqa: F401

# isort: split
import argparse
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from common import RESULTS, LoadMeter, command_line, machine, write_json
from first_audio_length import LENGTHS, sentence, timed
from voicestream.engine.models.torch_assets import read_config
from voicestream.engine.streaming.windows import Window
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.kmodel import REPO_ID, import_kmodel
from voicestream.engine.torch.split import TorchSentenceFeatures, TorchSplitRuntime

VOICE = "af_heart"
SPANS = (44, 100, 176)  # generator frames: a first window's span, a middle one, the largest


def unfolded_runtime(engine: TorchEngine) -> TorchSplitRuntime:
    """kokoro's model loaded as kokoro loads it (weight norms recomputed at every call), its own blocks."""
    assets = engine.assets
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (UserWarning, FutureWarning))
        model = import_kmodel()(repo_id=REPO_ID, config=read_config(assets.config), model=str(assets.checkpoint))
    return TorchSplitRuntime(model.eval(), fused=False)


def encoded(engine: TorchEngine, text: str) -> TorchSentenceFeatures:
    (piece,) = engine.phoneme_pieces(text, VOICE, DEFAULT_TEXT_OPTIONS)
    return engine.split.encode(piece.text, engine.voice_tensor(VOICE)[len(piece.text) - 1], 1.0)


def window_of(span: int, frames: int) -> Window:
    """A window of `span` generator frames from the sentence's start (its core after 16 frames)."""
    span = min(span, frames)
    return Window(min(16, span - 1), span, 0, span)


def decoder_speeds(
    runtimes: dict[str, TorchSplitRuntime], features: TorchSentenceFeatures, repeats: int, warm_up: bool = True
) -> Any:
    samples: dict[str, dict[int, list[float]]] = {name: {span: [] for span in SPANS} for name in runtimes}
    names = list(runtimes)
    for name in names if warm_up else ():  # torch's first runs at new shapes allocate
        for span in SPANS:
            runtimes[name].decode_audio(features, window_of(span, features.frames))
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            for span in SPANS:
                window = window_of(span, features.frames)
                started = time.perf_counter()
                runtimes[name].decode_audio(features, window)
                samples[name][span].append((time.perf_counter() - started) * 1000 / window.frames)
    return {
        name: {str(span): round(statistics.median(runs), 2) for span, runs in by_span.items()}
        for name, by_span in samples.items()
    }


def engine_runs(engines: dict[str, TorchEngine], repeats: int) -> Any:
    samples: dict[str, dict[int, list[dict[str, float]]]] = {name: {w: [] for w in LENGTHS} for name in engines}
    names = list(engines)
    for name in names:
        timed(engines[name], sentence(5))  # warm-up
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            for words in LENGTHS:
                samples[name][words].append(timed(engines[name], sentence(words)))
    return {
        name: {
            str(words): {
                "first_audio_ms_p50": round(statistics.median(run["first_ms"] for run in runs), 1),
                "rtf_p50": round(statistics.median(run["rtf"] for run in runs), 3),
                "stall_ms_max": round(max(run["stall_ms"] for run in runs), 1),
            }
            for words, runs in by_words.items()
        }
        for name, by_words in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "torch_fused.json")
    args = parser.parse_args()
    started = time.time()
    host = machine()
    engines = {
        "fused": TorchEngine(device="cpu", threads=args.threads),
        "kokoro modules": TorchEngine(device="cpu", threads=args.threads, fused=False),
    }
    for engine in engines.values():
        engine.load()
    runtimes = {
        "weight norms per call": unfolded_runtime(engines["fused"]),
        "kokoro modules": engines["kokoro modules"].split,
        "fused": engines["fused"].split,
    }
    load = LoadMeter()
    with torch.inference_mode():
        features = encoded(engines["fused"], sentence(50))
    windows = decoder_speeds(runtimes, features, args.repeats)
    window_load = load.report()
    load = LoadMeter()
    engine_results = engine_runs(engines, args.repeats)
    engine_load = load.report()
    for engine in engines.values():
        engine.close()
    speedup = {
        span: round(windows["weight norms per call"][span] / windows["fused"][span], 2) for span in windows["fused"]
    }
    first_audio_ratio = {
        words: round(row["first_audio_ms_p50"] / engine_results["kokoro modules"][words]["first_audio_ms_p50"], 2)
        for words, row in engine_results["fused"].items()
    }
    report = {
        "benchmark": "torch_fused",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "threads": args.threads,
        "repeats": args.repeats,
        "machine": host,
        "load": {"windows": window_load, "engines": engine_load},
        "decoder_ms_per_frame": windows,
        "decoder_speedup_over_weight_norms_per_call": speedup,
        "engines": engine_results,
        "first_audio_fused_over_kokoro_modules": first_audio_ratio,
    }
    write_json(args.out, report)
    print("ms per generator frame:", windows)
    print("speedup:", speedup)
    for name, rows in engine_results.items():
        print(name, {words: (row["first_audio_ms_p50"], row["rtf_p50"]) for words, row in rows.items()})
    print("first audio fused / kokoro modules:", first_audio_ratio)


if __name__ == "__main__":
    main()
