"""Where the seam gate's thresholds come from: seam measures of good window plans and bad ones.

The seam gate of the engine tests (tests/support/seams.py) must pass every plan that decodes with
enough context on any host, and fail a plan without context. Exact numbers move between hosts:
onnxruntime picks its int8 kernels by instruction set (AVX2, AVX-512, VNNI), and their rounding
moves samples, so a threshold set where one host's numbers happen to fall fails on another. This
script measures, on the lookahead test's five long sentences (tests/integration/
test_engine_lookahead.py), the seam excess (dB) and the worst seam's step ratio of:

- good plans: the default and first core 12/20 x growth 1.5/2.5 (each with its full context);
- bad plans: later windows with 4 frames of context (below the generator's 6-frame reach) and
  windows with none,

each over the lookahead's windows (head, then the joined features) and over plain windows of the
joined features, against the joined features decoded whole. Windows on their schedule alone (no
pacing): deterministic on one host; run it on each host class to compare.

    .venv/bin/python benchmarks/seam_margins.py [--out benchmarks/results/seam_margins.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import RESULTS, ROOT, command_line, machine, write_json
from voicestream.engine.onnx.engine import DEFAULT_WINDOWS, OnnxEngine, OnnxStrategy
from voicestream.engine.streaming.lookahead import frames_before
from voicestream.engine.streaming.pipeline import decode_windows_after_head
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME, WindowPlan, plan_windows

sys.path.insert(0, str(ROOT))  # the tests' seam measure and sentences: one definition of each
from tests.integration.test_engine_lookahead import SENTENCES, encode, returning
from tests.support.seams import SeamReport, compare


def plans() -> dict[str, tuple[WindowPlan, bool]]:
    """Each plan by name, with whether it is a good one (enough context) or one the gate must fail."""
    good = {"default": DEFAULT_WINDOWS}
    for first in (12, 20):
        for growth in (1.5, 2.5):
            good[f"first {first}, growth {growth}"] = dataclasses.replace(DEFAULT_WINDOWS, first=first, growth=growth)
    short = dataclasses.replace(DEFAULT_WINDOWS, context=4, carried_context=4, first_right_context=4)
    none = dataclasses.replace(DEFAULT_WINDOWS, context=0, carried_context=0, first_right_context=0, crossfade=0)
    return {
        **{name: (plan, True) for name, plan in good.items()},
        "context 4": (short, False),
        "no context": (none, False),
    }


def measures(report: SeamReport) -> dict[str, float]:
    return {"seam_excess_db": round(report.seam_excess_db, 3), "step_ratio": round(report.seam_step_ratio, 3)}


def measure(engine: OnnxEngine) -> dict[str, Any]:
    encoded = [encode(engine, text) for text in SENTENCES]
    wholes = [np.concatenate(list(engine.split.stream(e.joined, None))) for e in encoded]
    results: dict[str, Any] = {}
    for name, (plan, good) in plans().items():
        rows = []
        for e, whole in zip(encoded, wholes, strict=True):
            at = frames_before(e.head.durations, e.split.join)
            decoded = list(decode_windows_after_head(engine.split, e.head, at, returning(e.joined), plan))
            audio = np.concatenate([window.samples for window in decoded])
            lookahead = compare(audio, whole, [window.window.end * SAMPLES_PER_FRAME for window in decoded[:-1]])
            plain_windows = plan_windows(e.joined.frames, plan)
            plain_audio = np.concatenate(list(engine.split.stream(e.joined, plan)))
            plain = compare(plain_audio, whole, [window.end * SAMPLES_PER_FRAME for window in plain_windows[:-1]])
            rows.append({"lookahead": measures(lookahead), "plain": measures(plain)})
        excess = [row[kind]["seam_excess_db"] for row in rows for kind in ("lookahead", "plain")]
        steps = [row[kind]["step_ratio"] for row in rows for kind in ("lookahead", "plain")]
        results[name] = {
            "good": good,
            "sentences": rows,
            "lookahead_mean_excess_db": round(float(np.mean([row["lookahead"]["seam_excess_db"] for row in rows])), 3),
            "worst_excess_db": max(excess),
            "worst_step_ratio": max(steps),
        }
        print(name, {key: value for key, value in results[name].items() if key != "sentences"}, flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "seam_margins.json")
    args = parser.parse_args()
    started = time.time()
    host = machine()  # first: the host's speed before this run loads it
    engine = OnnxEngine(threads=2, strategy=OnnxStrategy(pacing=False))
    engine.load()
    try:
        results = measure(engine)
    finally:
        engine.close()
    good = [result for result in results.values() if result["good"]]
    bad = [result for result in results.values() if not result["good"]]
    report = {
        "benchmark": "seam_margins",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "plans": results,
        "good_plans_worst": {
            "excess_db": max(result["worst_excess_db"] for result in good),
            "step_ratio": max(result["worst_step_ratio"] for result in good),
            "lookahead_mean_excess_db": max(result["lookahead_mean_excess_db"] for result in good),
        },
        "bad_plans_lookahead_mean_excess_db": {
            name: result["lookahead_mean_excess_db"] for name, result in results.items() if not result["good"]
        },
        "bad_plans_best_excess_db": min(min(row["plain"]["seam_excess_db"] for row in r["sentences"]) for r in bad),
        "wall_s": round(time.time() - started, 1),
        "machine": host,
    }
    write_json(args.out, report)


if __name__ == "__main__":
    main()
