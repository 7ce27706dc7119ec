"""Issue 17, item 5: onnxruntime's arena after long inputs, three settings side by side.

Each setting runs in a fresh process (RSS is per process), on the real model, with the same
phonemes (the engine's G2P) and voice table: RSS at a baseline after short warm-up inputs, the
peak during three long inputs (one 503-phoneme piece each, the longest Kokoro takes), RSS after
a few short inputs again, and the real-time factor of a medium sentence before and after.
Then the settings' speed, paired: one session per setting in one process, their runs
interleaved (order rotated), ratios to the default arena taken within each round (the machine
is shared and noisy: separate processes minutes apart are not comparable), for a medium
sentence and for the long input.

- `default_arena`: onnxruntime's defaults (what the engine used before): the arena keeps its peak;
- `arena_shrinkage` (the engine's choice, `voicestream.engine.onnx.ort_options`): the arena, shrunk
  after every run (run option `memory.enable_memory_arena_shrinkage` = `cpu:0`);
- `no_arena`: `enable_cpu_mem_arena = False`: every tensor from malloc.

    .venv/bin/python benchmarks/memory.py [--repeats 1] [--out benchmarks/results/memory.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, command_line, machine, write_json

CONFIGS = ("default_arena", "arena_shrinkage", "no_arena")
SHORT = "Hello there, how are you today?"
MEDIUM = "The museum opens at ten in the morning and closes at six in the evening, so you have plenty of time."
LONG = " ".join(["The quick brown fox jumps over the lazy dog and keeps on running through the forest"] * 6)


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(config: str, threads: int) -> dict[str, Any]:
    """One setting, in this (fresh) process."""
    import numpy as np
    import onnxruntime

    from voicestream.engine.models.assets import onnx_assets
    from voicestream.engine.onnx.engine import OnnxEngine
    from voicestream.engine.onnx.ort_options import run_options, session_options

    engine = OnnxEngine(threads=threads)  # not loaded: its G2P (worker processes) is all we use of it
    assets = onnx_assets(None, voices=("af_heart",))
    vocab: dict[str, int] = json.loads(assets.config.read_text())["vocab"]
    voice = np.fromfile(assets.voice_path("af_heart"), dtype="<f4").reshape(510, 256)
    options = session_options(onnxruntime, threads)
    run: Any = None
    if config == "arena_shrinkage":
        run = run_options(onnxruntime)
    elif config == "no_arena":
        options.enable_cpu_mem_arena = False
    session = onnxruntime.InferenceSession(str(assets.model), options, providers=["CPUExecutionProvider"])

    def speak(text: str) -> tuple[float, float]:
        """(audio seconds, compute seconds)."""
        audio_s, started = 0.0, time.perf_counter()
        for piece in engine.phonemes(text, "af_heart"):
            ids = [vocab[p] for p in piece if p in vocab]
            tokens = np.array([[0, *ids, 0]], dtype=np.int64)
            feeds = {"tokens": tokens, "style": voice[len(ids) - 1 : len(ids)], "speed": np.ones(1, np.float32)}
            (audio,) = session.run(None, feeds, run)
            audio_s += audio.size / 24_000
        return audio_s, time.perf_counter() - started

    for _ in range(2):
        speak(SHORT)
    gc.collect()
    baseline = status_mib("VmRSS")
    rtf_before = [compute / audio for audio, compute in (speak(MEDIUM) for _ in range(3))]
    for _ in range(3):
        speak(LONG)
    peak = status_mib("VmHWM")
    for _ in range(3):
        speak(SHORT)
    time.sleep(1.0)
    gc.collect()
    after = status_mib("VmRSS")
    rtf_after = [compute / audio for audio, compute in (speak(MEDIUM) for _ in range(3))]
    long_phonemes = max(len(piece) for piece in engine.phonemes(LONG, "af_heart"))
    engine.close()
    return {
        "config": config,
        "long_phonemes": long_phonemes,
        "rss_baseline_mib": round(baseline, 1),
        "rss_peak_mib": round(peak, 1),
        "rss_after_mib": round(after, 1),
        "rss_kept_mib": round(after - baseline, 1),
        "rtf_medium": round(statistics.median(rtf_before + rtf_after), 3),
        "rtf_runs": [round(value, 3) for value in rtf_before + rtf_after],
    }


def paired_rtf(threads: int, rounds: int) -> dict[str, Any]:
    """The settings' speed, measured fairly on a noisy machine: one session per setting in ONE
    process, their runs interleaved (order rotated each round), ratios taken within a round."""
    import numpy as np
    import onnxruntime

    from voicestream.engine.models.assets import onnx_assets
    from voicestream.engine.onnx.engine import OnnxEngine
    from voicestream.engine.onnx.ort_options import run_options, session_options

    engine = OnnxEngine(threads=threads)
    assets = onnx_assets(None, voices=("af_heart",))
    vocab: dict[str, int] = json.loads(assets.config.read_text())["vocab"]
    voice = np.fromfile(assets.voice_path("af_heart"), dtype="<f4").reshape(510, 256)
    shrink = run_options(onnxruntime)
    sessions: dict[str, Any] = {}
    for config in CONFIGS:
        options = session_options(onnxruntime, threads)
        options.enable_cpu_mem_arena = config != "no_arena"
        sessions[config] = onnxruntime.InferenceSession(str(assets.model), options, providers=["CPUExecutionProvider"])

    def rtf(config: str, text: str) -> float:
        audio_s, started = 0.0, time.perf_counter()
        for piece in engine.phonemes(text, "af_heart"):
            ids = [vocab[p] for p in piece if p in vocab]
            tokens = np.array([[0, *ids, 0]], dtype=np.int64)
            feeds = {"tokens": tokens, "style": voice[len(ids) - 1 : len(ids)], "speed": np.ones(1, np.float32)}
            (audio,) = sessions[config].run(None, feeds, shrink if config == "arena_shrinkage" else None)
            audio_s += audio.size / 24_000
        return (time.perf_counter() - started) / audio_s

    result: dict[str, Any] = {}
    for label, text, count in (("medium", MEDIUM, rounds), ("long", LONG, max(2, rounds // 3))):
        for config in CONFIGS:
            rtf(config, text)  # warm each session up at this size first
        ratios: dict[str, list[float]] = {config: [] for config in CONFIGS}
        for round_number in range(count):
            order = CONFIGS[round_number % len(CONFIGS) :] + CONFIGS[: round_number % len(CONFIGS)]
            measured = {config: rtf(config, text) for config in order}
            for config in CONFIGS:
                ratios[config].append(measured[config] / measured["default_arena"])
        result[label] = {config: round(statistics.median(values), 3) for config, values in ratios.items()}
        result[label + "_rounds"] = count
    engine.close()
    return result


def run_child(config: str, threads: int, *extra: str) -> dict[str, Any]:
    script = Path(__file__).resolve()
    done = subprocess.run(
        [sys.executable, str(script), "--child", config, "--threads", str(threads), *extra],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "memory.json")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds of the paired speed test")
    parser.add_argument("--child", choices=(*CONFIGS, "paired"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "paired":
        print(json.dumps(paired_rtf(args.threads, args.rounds)))
        return
    if args.child:
        print(json.dumps(child(args.child, args.threads)))
        return
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    runs: dict[str, list[dict[str, Any]]] = {config: [] for config in CONFIGS}
    for repeat in range(args.repeats):
        order = CONFIGS[repeat % len(CONFIGS) :] + CONFIGS[: repeat % len(CONFIGS)]  # rotate: fair to the noise
        for config in order:
            print(f"repeat {repeat + 1}: {config}", flush=True)
            runs[config].append(run_child(config, args.threads))

    def med(config: str, key: str) -> float:
        return float(statistics.median(run[key] for run in runs[config]))

    configs = {
        config: {
            key: med(config, key)
            for key in ("rss_baseline_mib", "rss_peak_mib", "rss_after_mib", "rss_kept_mib", "rtf_medium")
        }
        | {"runs": runs[config]}
        for config in CONFIGS
    }
    print("paired speed test", flush=True)
    paired = run_child("paired", args.threads, "--rounds", str(args.rounds))
    report = {
        "benchmark": "memory",
        "command": command_line(),
        "started": started,
        "repeats": args.repeats,
        "machine": machine(),
        "chosen": "arena_shrinkage",
        "configs": configs,
        # Speed relative to the default arena, paired within rounds in one process (see paired_rtf);
        # the per-setting RTF above comes from separate processes, minutes apart: noisier.
        "rtf_vs_default_arena": paired["medium"],
        "rtf_vs_default_arena_long": paired["long"],
        "paired_rounds": {"medium": paired["medium_rounds"], "long": paired["long_rounds"]},
    }
    write_json(args.out, report)


if __name__ == "__main__":
    main()
