"""Torch engine on the CPU: idle OpenMP threads that sleep vs spin, on a quiet host and beside a busy core.

PyTorch's OpenMP runtime (libgomp) lets an idle thread busy-wait 300000 spins before it sleeps;
the engine sets OMP_WAIT_POLICY=PASSIVE (engine/torch/__init__.py: spin count 0), as the ONNX
engine turns onnxruntime's spinning off. The policy is read once as torch loads, so each variant
is a fresh process: the engine as it ships (`sleeping`) and with libgomp's default spin count
(`spinning`, GOMP_SPINCOUNT=300000), each on a quiet host and with another process keeping one
core busy (a Python busy loop: another session's G2P, a test runner, a noisy neighbour). The
variants rotate per repeat so that drift falls on all alike. Per variant: wall seconds and real-time
factor of the real-weight engine (2 threads) speaking a 5-word sentence, a 50-word one and the
server's speed-check sentence, and first audio (call to first chunk).

Runs in the torch environment (real weights: derived from the int8 export by `make models`):

    .venv-torch/bin/python benchmarks/torch_threads.py [--repeats 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import RESULTS, command_line, machine, write_json

LIBGOMP_DEFAULT_SPINS = "300000"
VARIANTS = {  # name: (extra environment, whether another process keeps a core busy)
    "sleeping, quiet": ({}, False),
    "spinning, quiet": ({"GOMP_SPINCOUNT": LIBGOMP_DEFAULT_SPINS}, False),
    "sleeping, one core busy": ({}, True),
    "spinning, one core busy": ({"GOMP_SPINCOUNT": LIBGOMP_DEFAULT_SPINS}, True),
}


def child(threads: int, runs: int) -> dict[str, Any]:
    """In the variant's own process: the engine loaded, warmed up, then each text spoken `runs` times."""
    from first_audio_length import sentence, timed
    from voicestream.engine import load_engine
    from voicestream.kokoro_server.runtime import SPEED_CHECK_TEXT

    engine = load_engine("torch", threads=threads)
    texts = {"5_words": sentence(5), "50_words": sentence(50), "speed_check": SPEED_CHECK_TEXT}
    for _ in range(2):  # warm-up: torch's first runs at new shapes allocate
        timed(engine, SPEED_CHECK_TEXT)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in texts}
    for _ in range(runs):
        for name, text in texts.items():
            results[name].append(timed(engine, text))
    engine.close()
    return results


@contextlib.contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """Another process keeping one core busy while the block runs (when `on`)."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def run_variant(name: str, threads: int, runs: int) -> dict[str, Any]:
    extra, busy = VARIANTS[name]
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OMP_", "GOMP_"))}
    command = [sys.executable, __file__, "--child", "--threads", str(threads), "--runs", str(runs)]
    with busy_core(busy):
        done = subprocess.run(command, env={**environ, **extra}, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def summarise(samples: list[dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    texts = samples[0].keys()
    summary: dict[str, Any] = {}
    for text in texts:
        rows = [row for sample in samples for row in sample[text]]
        summary[text] = {
            "wall_s_p50": round(statistics.median(row["total_s"] for row in rows), 3),
            "rtf_p50": round(statistics.median(row["rtf"] for row in rows), 3),
            "first_audio_ms_p50": round(statistics.median(row["first_ms"] for row in rows), 1),
            "audio_s": round(rows[0]["audio_s"], 3),
            "runs": len(rows),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="processes per variant")
    parser.add_argument("--runs", type=int, default=2, help="syntheses of each text per process")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "torch_threads.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.threads, args.runs)))
        return
    names = list(VARIANTS)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    started = time.time()
    for repeat in range(args.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(run_variant(name, args.threads, args.runs))
            print(f"repeat {repeat + 1}/{args.repeats} {name} done", flush=True)
    results = {name: summarise(rows) for name, rows in samples.items()}
    ratios = {
        load: {
            text: round(
                results[f"spinning, {load}"][text]["wall_s_p50"] / results[f"sleeping, {load}"][text]["wall_s_p50"], 2
            )
            for text in results[f"sleeping, {load}"]
        }
        for load in ("quiet", "one core busy")
    }
    report = {
        "benchmark": "torch_threads",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "threads": args.threads,
        "repeats": args.repeats,
        "runs_per_process": args.runs,
        "machine": machine(),
        "results": results,
        "spinning_over_sleeping_wall": ratios,
    }
    write_json(args.out, report)
    for name, result in results.items():
        print(name, {text: (row["rtf_p50"], row["first_audio_ms_p50"]) for text, row in result.items()})
    print("spinning / sleeping, wall:", ratios)


if __name__ == "__main__":
    main()
