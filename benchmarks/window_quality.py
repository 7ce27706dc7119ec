"""How window plans are heard: Whisper and log-mel distance against whole-sentence decoding.

Each sentence (short replies, the benchmark texts' sentences, three long sentences of the
lookahead test and the first 60 sentences of the agent replies: 81) is synthesized by the ONNX engine decoding whole
sentences and by one engine per window plan (the default, and any given with `--plans`, as in
first_audio_length.py), all without pacing (the plan's schedule alone, so every run cuts the same
windows) and without lookahead (whose head encoding changes a long sentence's length: it has its
own gate). Per plan:

- summed WER of Whisper tiny.en's transcripts against the text, and the sentences whose
  transcript differs from the whole rendering's (what a window plan changes in what is heard);
- mean log-mel distance to the whole rendering (tests/support/seams.py), over all the audio and
  over the first chunk alone (the first window normalises on its own: where a plan's first span
  shows), and the seam excess: mean, median, worst, and sentences past 1 and 2 dB (the gate
  in the tests is 1 dB).

Deterministic (the int8 graph has no random ops): one run is the measurement.

    .venv/bin/python benchmarks/window_quality.py [--plans 12,2,144,none] [--limit 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from common import RESULTS, ROOT, command_line, machine, write_json
from first_audio_length import describe, parse_plan
from voicestream.chunker import split_sentences
from voicestream.engine.onnx.engine import DEFAULT_WINDOWS, OnnxEngine, OnnxStrategy
from voicestream.engine.streaming.windows import WindowPlan

sys.path.insert(0, str(ROOT))  # the ASR and seam helpers live with the tests
from tests.support.asr import transcribe, word_error_rate
from tests.support.seams import HOP, compare, mel_distances

SHORT = (
    "Yes.",
    "Sure, I can help with that.",
    "We will meet at noon.",
    "The sun is bright.",
    "Cats like to sleep.",
    "Our team will move every.",
    "The museum opens at ten in the morning and closes at six in the evening.",
)
LONG = (
    "Your flight to Lisbon leaves tomorrow morning from gate twelve and I can move you to an aisle seat near the "
    "front if you would like me to do that for you before the check in desk closes at nine.",
    "I looked through your last three statements and the extra charge comes from the annual fee that was added in "
    "March when your introductory period ended so I can ask the billing team to waive it this one time if you want.",
    "To reset your router unplug it from the wall wait about thirty seconds plug it back in and then give the "
    "lights a minute or two to settle before you try connecting your laptop to the network again.",
)
AGENT_SENTENCES = 60


def sentences() -> list[str]:
    data = resources.files("voicestream.data")
    bench = json.loads(data.joinpath("bench_texts.json").read_text())
    replies = json.loads(data.joinpath("agent_replies.json").read_text())["replies"]
    agent = [sentence for reply in replies for sentence in split_sentences(reply)][:AGENT_SENTENCES]
    texts = [text for name, text in bench.items() if name != "notes"]
    return [*SHORT, *(s for text in texts for s in split_sentences(text)), *LONG, *agent]


def first_chunk_distance_db(audio: np.ndarray, whole: np.ndarray, first_samples: int) -> float:
    """Mean log-mel distance in the loud mel frames of the first chunk."""
    distance, loud = mel_distances(audio, whole)
    first = np.zeros(len(distance), dtype=bool)
    first[: first_samples // HOP] = True
    return float(distance[first & loud].mean()) if np.any(first & loud) else float("nan")


def measure(plans: dict[str, WindowPlan], texts: list[str], threads: int) -> dict[str, Any]:
    whole_engine = OnnxEngine(threads=threads, strategy=OnnxStrategy(decoder_windows=None, lookahead=None))
    engines = {
        name: OnnxEngine(threads=threads, strategy=OnnxStrategy(decoder_windows=plan, lookahead=None, pacing=False))
        for name, plan in plans.items()
    }
    for engine in (whole_engine, *engines.values()):
        engine.load()
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in plans}
    whole_wer = 0.0
    for text in texts:
        whole = np.concatenate([chunk.samples for chunk in whole_engine.synthesize(text)])
        heard_whole = transcribe(whole)
        whole_wer += word_error_rate(text, heard_whole)
        for name, engine in engines.items():
            chunks = [chunk.samples for chunk in engine.synthesize(text)]
            audio = np.concatenate(chunks)
            heard = transcribe(audio)
            row: dict[str, Any] = {"text": text, "chunks": len(chunks), "wer": word_error_rate(text, heard)}
            row["heard_as_whole"] = word_error_rate(heard_whole, heard) == 0.0
            if not row["heard_as_whole"]:
                row["heard"], row["heard_whole"] = heard, heard_whole
            if len(audio) == len(whole):
                seams = list(np.cumsum([len(chunk) for chunk in chunks[:-1]]))
                report = compare(audio, whole, seams)
                row["log_mel_distance_db"] = round(report.log_mel_distance_db, 3)
                row["seam_excess_db"] = round(report.seam_excess_db, 3) if seams else None
                row["first_chunk_distance_db"] = round(first_chunk_distance_db(audio, whole, len(chunks[0])), 3)
            rows[name].append(row)
    return {"whole_wer_sum": round(whole_wer, 3), "by_plan": {name: summarise(found) for name, found in rows.items()}}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    same_length = [row for row in rows if "log_mel_distance_db" in row]
    seams = [row["seam_excess_db"] for row in same_length if row["seam_excess_db"] is not None]
    return {
        "wer_sum": round(sum(row["wer"] for row in rows), 3),
        "heard_differently_from_whole": [row for row in rows if not row["heard_as_whole"]],
        "chunks": sum(row["chunks"] for row in rows),
        "same_length_sentences": len(same_length),
        "log_mel_distance_db_mean": round(float(np.mean([row["log_mel_distance_db"] for row in same_length])), 3),
        "first_chunk_distance_db_mean": round(
            float(np.nanmean([row["first_chunk_distance_db"] for row in same_length])), 3
        ),
        "seam_excess_db_mean": round(float(np.mean(seams)), 3) if seams else None,
        "seam_excess_db_median": round(float(np.median(seams)), 3) if seams else None,
        "seam_excess_db_max": max(seams) if seams else None,
        "sentences_seam_excess_over_1_db": sum(excess > 1.0 for excess in seams),
        "sentences_seam_excess_over_2_db": sum(excess > 2.0 for excess in seams),
        "sentences": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--plans", nargs="*", default=[], help="extra window plans first,growth,largest[,first_right_context|none]"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a quick look)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "window_quality.json")
    args = parser.parse_args()
    plans = {"default": DEFAULT_WINDOWS, **{f"windows {text}": parse_plan(text) for text in args.plans}}
    texts = sentences()[: args.limit]
    started = time.time()
    results = measure(plans, texts, args.threads)
    report = {
        "benchmark": "window_quality",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "sentences": len(texts),
        "plans": {name: describe(plan) for name, plan in plans.items()},
        **results,
        "wall_s": round(time.time() - started, 1),
        "machine": machine(),
    }
    write_json(args.out, report)
    for name, summary in results["by_plan"].items():
        brief = {
            key: value for key, value in summary.items() if key not in ("sentences", "heard_differently_from_whole")
        }
        print(name, brief, "heard differently:", len(summary["heard_differently_from_whole"]))
    print("whole WER sum", results["whole_wer_sum"])


if __name__ == "__main__":
    main()
