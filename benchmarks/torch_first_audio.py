"""Torch engine: first audio vs sentence length, chunked decoder windows vs whole-sentence decoding.

The torch twin of first_audio_length.py (same sentences of 5, 15, 30 and 50 words, no clause
marks): two TorchEngines of one checkpoint, constructed with the default plan and with
`decoder_windows=None` (whole sentence), run in turn, alternating per repeat so the machine's load falls on both
alike. Per run, timed and summarised as first_audio_length.py does: time from `synthesize()`
to the first AudioChunk, total time, audio length, CPU time, the playback stall; per length
also where the first audio's time goes (G2P, encoder, first window's decoder).

Runs in the torch environment. Without `--model-dir` it builds the random-weight checkpoint of
the torch tests (the real architecture and config, calibrated durations and pitch), so compute
per frame is the real model's while the audio is noise. On the CPU that measures the split's
arithmetic (what the windows cost and save); it does not predict a GPU's absolute latency
(there the first window is launch-bound, not FLOP-bound; see docs/engine.md).

    .venv-torch/bin/python benchmarks/torch_first_audio.py [--repeats 3] [--threads 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from tests.support.checkpoint import build_model_dir

from common import RESULTS, LoadMeter, machine, write_json
from first_audio_length import LENGTHS, sentence, summarise, timed
from voicestream.engine.streaming.windows import plan_windows
from voicestream.engine.torch.engine import DEFAULT_WINDOWS, TorchEngine
from voicestream.env import default_model_dir

VOICE = "af_heart"


def breakdown(engine: TorchEngine, text: str) -> dict[str, float]:
    """Milliseconds of each step before the first chunk: G2P, encoder, first window's decoder."""
    split = engine.split
    started = time.perf_counter()
    (phonemes,) = engine.phonemes(text, VOICE)
    style = engine.voice_tensor(VOICE)[len(phonemes) - 1]
    g2p = time.perf_counter()
    with torch.inference_mode():
        features = split.encode(phonemes, style, 1.0)
        encoded = time.perf_counter()
        split.decode_window(features, plan_windows(features.frames, DEFAULT_WINDOWS)[0])
    decoded = time.perf_counter()
    return {
        "g2p_ms": (g2p - started) * 1000,
        "encode_ms": (encoded - g2p) * 1000,
        "first_window_ms": (decoded - encoded) * 1000,
        "frames": features.frames,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model-dir", type=Path, help="hexgrad-layout model directory (default: random weights)")
    parser.add_argument("--out", default="torch_first_audio_length.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="voicestream-bench-") as scratch:
        model_dir = args.model_dir or build_model_dir(default_model_dir(), Path(scratch), (VOICE,))
        modes = {
            name: TorchEngine(model_dir, device=args.device, threads=args.threads, decoder_windows=plan)
            for name, plan in (("chunked", DEFAULT_WINDOWS), ("whole", None))
        }
        for engine in modes.values():
            engine.load()
            timed(engine, sentence(5))  # warm-up: first-run allocations are not what we measure
    engine = modes["chunked"]
    runs: dict[str, dict[int, list[dict[str, float]]]] = {name: {n: [] for n in LENGTHS} for name in modes}
    steps: dict[int, list[dict[str, float]]] = {n: [] for n in LENGTHS}
    load = LoadMeter()
    for repeat in range(args.repeats):
        for words in LENGTHS:
            order = list(modes) if repeat % 2 == 0 else list(reversed(modes))
            for name in order:
                runs[name][words].append(timed(modes[name], sentence(words)))
            steps[words].append(breakdown(engine, sentence(words)))
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    measured_load = load.report()
    results = {name: summarise(by_length) for name, by_length in runs.items()}
    report = {
        "benchmark": "torch_first_audio_length",
        "command": f".venv-torch/bin/python benchmarks/torch_first_audio.py --repeats {args.repeats} "
        f"--threads {args.threads} --device {args.device}"
        + (f" --model-dir {args.model_dir}" if args.model_dir else ""),
        "engine": "torch",
        "device": engine.device,
        "torch": torch.__version__,
        "weights": str(args.model_dir) if args.model_dir else "random (tests' checkpoint: real architecture)",
        "threads": args.threads,
        "repeats": args.repeats,
        "windows": {
            "first": DEFAULT_WINDOWS.first,
            "growth": DEFAULT_WINDOWS.growth,
            "largest": DEFAULT_WINDOWS.largest,
            "context": DEFAULT_WINDOWS.context,
            "crossfade": DEFAULT_WINDOWS.crossfade,
        },
        "sentences": {str(w): sentence(w) for w in LENGTHS},
        "results": results,
        "first_audio_steps_ms_p50": {
            str(w): {
                key: round(statistics.median(s[key] for s in steps[w]), 1)
                for key in ("g2p_ms", "encode_ms", "first_window_ms", "frames")
            }
            for w in LENGTHS
        },
        "chunked_over_whole": {
            "rtf": round(results["chunked"]["rtf_overall"] / results["whole"]["rtf_overall"], 3),
            "cpu_per_audio": round(results["chunked"]["cpu_s_per_audio_s"] / results["whole"]["cpu_s_per_audio_s"], 3),
            "first_audio_by_words": {
                str(w): round(
                    results["chunked"]["by_words"][str(w)]["first_audio_ms_p50"]
                    / results["whole"]["by_words"][str(w)]["first_audio_ms_p50"],
                    3,
                )
                for w in LENGTHS
            },
        },
        "load": measured_load,
        "machine": machine(),
    }
    write_json(RESULTS / args.out, report)
    for name in modes:
        first = {w: results[name]["by_words"][str(w)]["first_audio_ms_p50"] for w in LENGTHS}
        stalls = {w: results[name]["by_words"][str(w)]["stall_ms_p50"] for w in LENGTHS}
        ratio, rtf = results[name]["first_audio_long_over_short"], results[name]["rtf_overall"]
        print(name, first, "ms; long/short", ratio, "RTF", rtf, "; stall p50", stalls, "ms")
    others = measured_load["other_processes_cores"]
    print("chunked/whole RTF", report["chunked_over_whole"]["rtf"], "| other processes' cores", others)


if __name__ == "__main__":
    main()
