"""The torch engine's seams over a sweep of window plans: carried norm statistics or none.

The torch twin of seam_margins.py. With real weights (derived from the int8 export: engine/torch/
weights.py), it measures the seam gate's measures (tests/support/seams.py: seam excess in dB, the
worst seam's step ratio) and the log-mel distance of windowed decoding against the same encoding
decoded whole, on the guarantee tests' medium and long sentences (tests/support/guarantees.py)
and two of the lookahead test's long ones, for:

- good plans: the default, first core 12/20 x growth 1.5/2.5 and largest 144 (the ONNX plan's
  cap), each with its full context; `--carried-context N...` adds the default with later
  windows' context cut to N (for carried statistics: the ONNX engine's use of them);
- bad plans: 4 frames of context (below the 14-frame receptive field) and none;

each decoded by `--kinds`: `own` (every window's norms over its own span: the engine's runtime)
and `carried` (the generator's norm statistics carried from window to window:
`TorchSplitRuntime(carried_norms=True)`, engine/torch/norms.py). One encoding per sentence
(seeded), so whole and windowed decoding see the same source noise: deterministic on one host.
`--only NAME...` runs some plans (a full sweep takes ~20 min of 2 CPU cores).

    .venv-torch/bin/python benchmarks/torch_seam_margins.py [--threads 2] [--only NAME...]
"""

from __future__ import annotations

# First, before torch loads: the engine's OpenMP threads sleep when idle (engine/torch/__init__.py).
import voicestream.engine.torch  # noqa: F401

# isort: split
import argparse
import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from common import RESULTS, ROOT, command_line, machine, write_json
from voicestream.engine.base import FloatAudio
from voicestream.engine.streaming.pipeline import decode_windows
from voicestream.engine.streaming.windows import WindowPlan
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.plan import DEFAULT_WINDOWS
from voicestream.engine.torch.split import TorchSentenceFeatures, TorchSplitRuntime

sys.path.insert(0, str(ROOT))  # the tests' seam measure and sentences: one definition of each
from tests.support.seams import SeamReport, compare

VOICE = "af_heart"
# tests/support/guarantees.py's MEDIUM_SENTENCE and LONG_SENTENCE, then tests/integration/
# test_engine_lookahead.py's first and third (that module needs the main environment).
SENTENCES = (
    "The museum opens at ten in the morning and closes at six in the evening.",
    "Your flight to Lisbon leaves tomorrow morning from gate twelve and I can move you to an aisle seat near "
    "the front if you would like me to do that for you before the check in desk closes at nine.",
    "Our team will move every order from the north depot to the new site next week so please check that your "
    "delivery address and phone number are correct before friday because the courier cannot call you back after "
    "the van leaves and we would hate for anything to go missing.",
    "I looked through your last three statements and the extra charge comes from the annual fee that was added in "
    "March when your introductory period ended so I can ask the billing team to waive it this one time if you want.",
)


def plans(carried_contexts: list[int]) -> dict[str, tuple[WindowPlan, bool]]:
    """Each plan by name, with whether it is a good one (enough context) or one the gate must fail."""
    good = {"default": DEFAULT_WINDOWS}
    for first in (12, 20):
        for growth in (1.5, 2.5):
            good[f"first {first}, growth {growth}"] = dataclasses.replace(DEFAULT_WINDOWS, first=first, growth=growth)
    good["largest 144"] = dataclasses.replace(DEFAULT_WINDOWS, largest=144)
    for context in carried_contexts:
        good[f"default, carried context {context}"] = dataclasses.replace(DEFAULT_WINDOWS, carried_context=context)
    short = dataclasses.replace(DEFAULT_WINDOWS, context=4, carried_context=None, first_right_context=None)
    none = dataclasses.replace(DEFAULT_WINDOWS, context=0, carried_context=None, first_right_context=None, crossfade=0)
    return {
        **{name: (plan, True) for name, plan in good.items()},
        "context 4": (short, False),
        "no context": (none, False),
    }


def measures(report: SeamReport) -> dict[str, float]:
    return {
        "seam_excess_db": round(report.seam_excess_db, 3),
        "step_ratio": round(report.seam_step_ratio, 3),
        "log_mel_distance_db": round(report.log_mel_distance_db, 3),
    }


def windowed(runtime: Any, features: TorchSentenceFeatures, plan: WindowPlan) -> tuple[FloatAudio, list[int]]:
    decoded = list(decode_windows(runtime, features, plan))
    seams = list(np.cumsum([len(window.samples) for window in decoded[:-1]]))
    return np.concatenate([window.samples for window in decoded]), seams


def encodings(engine: TorchEngine) -> Iterator[TorchSentenceFeatures]:
    for index, text in enumerate(SENTENCES):
        (phonemes,) = engine.phonemes(text, VOICE)
        torch.manual_seed(index)
        yield engine.split.encode(phonemes, engine.voice_tensor(VOICE)[len(phonemes) - 1], 1.0)


def measure(engine: TorchEngine, carried_contexts: list[int], only: list[str], kinds: list[str]) -> dict[str, Any]:
    split = engine.split
    encoded = list(encodings(engine))
    wholes = [np.concatenate(list(split.stream(features, None))) for features in encoded]
    runtimes = {"own": split, "carried": TorchSplitRuntime(split.model, carried_norms=True)}
    runtimes = {kind: runtime for kind, runtime in runtimes.items() if kind in kinds}
    results: dict[str, Any] = {}
    for name, (plan, good) in plans(carried_contexts).items():
        if only and name not in only:
            continue
        result: dict[str, Any] = {"good": good}
        for kind, runtime in runtimes.items():
            rows = []
            for features, whole in zip(encoded, wholes, strict=True):
                audio, seams = windowed(runtime, features, plan)
                rows.append(measures(compare(audio, whole, seams)))
            excess = [row["seam_excess_db"] for row in rows]
            result[kind] = {
                "sentences": rows,
                "mean_excess_db": round(float(np.mean(excess)), 3),
                "worst_excess_db": max(excess),
                "worst_step_ratio": max(row["step_ratio"] for row in rows),
                "mean_log_mel_distance_db": round(float(np.mean([row["log_mel_distance_db"] for row in rows])), 3),
            }
        results[name] = result
        print(name, {kind: r for kind, r in result.items() if kind != "good"}, flush=True)
    return results


def summary(results: dict[str, Any], kind: str, good: bool) -> dict[str, float]:
    chosen = [r[kind] for r in results.values() if r["good"] == good and kind in r]
    if not chosen:
        return {}
    if good:
        return {
            "worst_excess_db": max(r["worst_excess_db"] for r in chosen),
            "worst_mean_excess_db": max(r["mean_excess_db"] for r in chosen),
            "worst_step_ratio": max(r["worst_step_ratio"] for r in chosen),
        }
    return {
        "best_excess_db": min(min(row["seam_excess_db"] for row in r["sentences"]) for r in chosen),
        "best_mean_excess_db": min(r["mean_excess_db"] for r in chosen),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "torch_seam_margins.json")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--carried-context", type=int, nargs="*", default=[])
    parser.add_argument("--kinds", nargs="*", default=["own", "carried"])
    parser.add_argument("--only", nargs="*", default=[], help="plans by name (default: all)")
    args = parser.parse_args()
    started = time.time()
    host = machine()  # first: the host's speed before this run loads it
    engine = TorchEngine(threads=args.threads, device="cpu", pacing=False)
    engine.load()
    try:
        with torch.inference_mode():
            results = measure(engine, args.carried_context, args.only, args.kinds)
    finally:
        engine.close()
    report = {
        "benchmark": "torch_seam_margins",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "plans": results,
        "good_plans": {kind: summary(results, kind, True) for kind in ("own", "carried")},
        "bad_plans": {kind: summary(results, kind, False) for kind in ("own", "carried")},
        "wall_s": round(time.time() - started, 1),
        "machine": host,
    }
    write_json(args.out, report)


if __name__ == "__main__":
    main()
