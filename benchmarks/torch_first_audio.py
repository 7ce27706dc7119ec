"""Torch engine: first audio vs sentence length, chunked decoder windows vs whole-sentence decoding.

The torch twin of first_audio_length.py (same sentences of 5, 15, 30 and 50 words, no clause
marks): TorchEngines of one checkpoint, constructed with the default plan (`chunked`: windows,
a long piece's head encoded first), the default plan without the lookahead (`no-lookahead`:
every piece encoded whole before its first window, the engine before issue 31's join) and
`decoder_windows=None` (`whole`: whole sentence), run in turn, alternating per repeat so the
machine's load falls on all alike (`--modes` picks some). Per run, timed and summarised as
first_audio_length.py does: time from `synthesize()` to the first AudioChunk, total time, audio
length, CPU time, the playback stall; per length also where the first audio's time goes (G2P,
the encoder run before the first window: the head's where the lookahead applies, first window's
decoder).

Runs in the torch environment. Without `--model-dir` it builds the random-weight checkpoint of
the torch tests (the real architecture and config, calibrated durations and pitch), so compute
per frame is the real model's while the audio is noise. On the CPU that measures the split's
arithmetic (what the windows cost and save); it does not predict a GPU's absolute latency
(there the first window is launch-bound, not FLOP-bound; see docs/engine.md). The engines are
paced as in production (windows sized to this host's measured speed); `--unpaced` runs the plan's
schedule, as the tests do, which isolates what the encoder adds to first audio.

    .venv-torch/bin/python benchmarks/torch_first_audio.py [--repeats 3] [--threads 2] [--device cpu] \
        [--modes chunked no-lookahead whole] [--unpaced]
"""

from __future__ import annotations

# First, before torch loads: the engine's OpenMP threads sleep when idle (engine/torch/__init__.py).
import voicestream.engine.torch  # noqa: F401

# isort: split
import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from tests.support.checkpoint import build_model_dir

from common import RESULTS, LoadMeter, machine, write_json
from first_audio_length import LENGTHS, sentence, summarise, timed
from voicestream.engine.streaming.lookahead import head_split
from voicestream.engine.streaming.windows import plan_windows
from voicestream.engine.streaming.word_timings import tokenize
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.plan import DEFAULT_LOOKAHEAD, DEFAULT_WINDOWS
from voicestream.env import default_model_dir

VOICE = "af_heart"
MODES = {  # name: (decoder windows, lookahead)
    "chunked": (DEFAULT_WINDOWS, DEFAULT_LOOKAHEAD),
    "no-lookahead": (DEFAULT_WINDOWS, None),
    "whole": (None, None),
}


def breakdown(engine: TorchEngine, text: str) -> dict[str, float]:
    """Milliseconds of each step before the first chunk: G2P, the encoder (the head's, where the
    engine's lookahead applies: lookahead.py), first window's decoder."""
    split = engine.split
    started = time.perf_counter()
    (piece,) = engine.phoneme_pieces(text, VOICE)
    ids, _ = tokenize(piece, split.model.vocab)
    style = engine.voice_tensor(VOICE)[len(piece.text) - 1]
    g2p = time.perf_counter()
    head = head_split(ids, engine.lookahead)
    encoded_ids = ids if head is None else ids[: head.end]
    with torch.inference_mode():
        features = split.encode(encoded_ids, style, 1.0)
        encoded = time.perf_counter()
        split.decode_window(features, plan_windows(features.frames, DEFAULT_WINDOWS)[0])
    decoded = time.perf_counter()
    return {
        "g2p_ms": (g2p - started) * 1000,
        "encode_ms": (encoded - g2p) * 1000,
        "first_window_ms": (decoded - encoded) * 1000,
        "frames": features.frames,
        "encoded_tokens": len(encoded_ids),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model-dir", type=Path, help="hexgrad-layout model directory (default: random weights)")
    parser.add_argument("--out", default="torch_first_audio_length.json")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument(
        "--unpaced", action="store_true", help="windows on the plan's schedule, not sized to this host's speed"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="voicestream-bench-") as scratch:
        model_dir = args.model_dir or build_model_dir(default_model_dir(), Path(scratch), (VOICE,))
        modes = {
            name: TorchEngine(
                model_dir,
                device=args.device,
                threads=args.threads,
                decoder_windows=plan,
                lookahead=lookahead,
                pacing=not args.unpaced,
            )
            for name, (plan, lookahead) in MODES.items()
            if name in args.modes
        }
        for engine in modes.values():
            engine.load()
            timed(engine, sentence(5))  # warm-up: first-run allocations are not what we measure
    engine = next(iter(modes.values()))
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
        f"--threads {args.threads} --device {args.device} --modes {' '.join(modes)}"
        + (" --unpaced" if args.unpaced else "")
        + (f" --model-dir {args.model_dir}" if args.model_dir else ""),
        "engine": "torch",
        "device": engine.device,
        "torch": torch.__version__,
        "weights": str(args.model_dir) if args.model_dir else "random (tests' checkpoint: real architecture)",
        "threads": args.threads,
        "paced": not args.unpaced,
        "repeats": args.repeats,
        "windows": {
            "first": DEFAULT_WINDOWS.first,
            "growth": DEFAULT_WINDOWS.growth,
            "largest": DEFAULT_WINDOWS.largest,
            "context": DEFAULT_WINDOWS.context,
            "crossfade": DEFAULT_WINDOWS.crossfade,
        },
        "lookahead": {
            "spoken_tokens": DEFAULT_LOOKAHEAD.spoken_tokens,
            "lookahead_tokens": DEFAULT_LOOKAHEAD.lookahead_tokens,
            "min_rest_tokens": DEFAULT_LOOKAHEAD.min_rest_tokens,
        },
        "first_audio_steps_mode": next(iter(modes)),
        "sentences": {str(w): sentence(w) for w in LENGTHS},
        "results": results,
        "first_audio_steps_ms_p50": {
            str(w): {
                key: round(statistics.median(s[key] for s in steps[w]), 1)
                for key in ("g2p_ms", "encode_ms", "first_window_ms", "frames", "encoded_tokens")
            }
            for w in LENGTHS
        },
        **{f"chunked_over_{other}": ratios(results, other) for other in ("whole", "no-lookahead") if other in results},
        "load": measured_load,
        "machine": machine(),
    }
    write_json(RESULTS / args.out, report)
    for name in modes:
        first = {w: results[name]["by_words"][str(w)]["first_audio_ms_p50"] for w in LENGTHS}
        stalls = {w: results[name]["by_words"][str(w)]["stall_ms_p50"] for w in LENGTHS}
        ratio, rtf = results[name]["first_audio_long_over_short"], results[name]["rtf_overall"]
        print(name, first, "ms; long/short", ratio, "RTF", rtf, "; stall p50", stalls, "ms")
    print("other processes' cores", measured_load["other_processes_cores"])


def ratios(results: dict[str, Any], other: str) -> dict[str, Any]:
    """The default engine's RTF, CPU and first audio per length over another mode's."""
    if "chunked" not in results:
        return {}
    ours, theirs = results["chunked"], results[other]
    return {
        "rtf": round(ours["rtf_overall"] / theirs["rtf_overall"], 3),
        "cpu_per_audio": round(ours["cpu_s_per_audio_s"] / theirs["cpu_s_per_audio_s"], 3),
        "first_audio_by_words": {
            str(w): round(
                ours["by_words"][str(w)]["first_audio_ms_p50"] / theirs["by_words"][str(w)]["first_audio_ms_p50"], 3
            )
            for w in LENGTHS
        },
    }


if __name__ == "__main__":
    main()
