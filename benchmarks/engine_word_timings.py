"""Engine-level word timings: the ONNX engine's words vs where Whisper hears them.

Every bench sentence (src/voicestream/data/bench_texts.json, split as the server splits), the
agent replies' sentences (agent_replies.json) and two long sentences (the lookahead's join
inside them) are synthesized by the ONNX engine with its defaults; its AudioChunk.words are
compared with faster-whisper's word timestamps (Whisper tiny.en, word_timestamps=True) on the
same audio, word by word where both say the same word. Goal (issue 18): median |start
difference| <= 80 ms. Deterministic: one run. (benchmarks/word_timings.py measures the words on the
wire, from any server.)

    .venv/bin/python benchmarks/engine_word_timings.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from common import RESULTS, ROOT, LoadMeter, command_line, machine, write_json
from voicestream.chunker import split_sentences
from voicestream.engine.onnx.engine import OnnxEngine
from voicestream.stats import percentile

sys.path.insert(0, str(ROOT))  # the ASR helper lives with the tests
from tests.support.asr import transcribe_words
from tests.support.word_alignment import align

LONG_SENTENCES = (
    "Our team will move every order from the north depot to the new site next week so please check that your "
    "delivery address and phone number are correct before friday because the courier cannot call you back after "
    "the van leaves and we would hate for anything to go missing.",
    "To reset your router unplug it from the wall wait about thirty seconds plug it back in and then give the "
    "lights a minute or two to settle before you try connecting your laptop to the network again.",
)


def sentences() -> dict[str, list[str]]:
    data = resources.files("voicestream.data")
    bench = json.loads(data.joinpath("bench_texts.json").read_text())
    replies = json.loads(data.joinpath("agent_replies.json").read_text())["replies"]
    return {
        "bench": [s for key, text in bench.items() if key != "notes" for s in split_sentences(text)],
        "agent_replies": [s for reply in replies for s in split_sentences(reply)],
        "long": list(LONG_SENTENCES),
    }


def stats_ms(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values) * 1000, 1),
        "p90": round(percentile(values, 90) * 1000, 1),
        "max": round(max(values) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "engine_word_timings.json")
    args = parser.parse_args()
    engine = OnnxEngine(threads=args.threads)
    engine.load()
    started = time.time()
    load = LoadMeter()
    groups: dict[str, Any] = {}
    all_starts: list[float] = []
    for group, texts in sentences().items():
        starts: list[float] = []
        ends: list[float] = []
        signed: list[float] = []
        words = paired = 0
        for text in texts:
            chunks = list(engine.synthesize(text))
            audio = np.concatenate([chunk.samples for chunk in chunks])
            ours = [(w.word, w.start_s, w.end_s) for chunk in chunks for w in chunk.words]
            alignment = align(ours, transcribe_words(audio))
            words += len(ours)
            paired += len(alignment.pairs)
            starts += alignment.start_errors_s()
            ends += alignment.end_errors_s()
            signed += [engine[1] - heard[1] for engine, heard in alignment.pairs]
        all_starts += starts
        groups[group] = {
            "sentences": len(texts),
            "words": words,
            "paired_with_whisper": paired,
            "start_abs_difference_ms": stats_ms(starts),
            "end_abs_difference_ms": stats_ms(ends),
            "start_ours_minus_whisper_median_ms": round(statistics.median(signed) * 1000, 1),
        }
        print(f"{group}: {paired}/{words} words paired, |start difference| {groups[group]['start_abs_difference_ms']}")
    overall = stats_ms(all_starts)
    report = {
        "benchmark": "engine_word_timings",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "asr": "Whisper tiny.en (faster-whisper, CPU int8), word_timestamps=True",
        "rule": "a word starts at its first phoneme token's first frame and ends at its last token's last frame "
        "(25 ms frames, from the encoder's durations); it is sent with the audio chunk in which it starts",
        "goal": "median |start difference| <= 80 ms",
        "groups": groups,
        "start_abs_difference_ms": overall,
        "goal_met": overall["median"] <= 80.0,
        "load": load.report(),
        "machine": machine(),
    }
    write_json(args.out, report)
    print(f"all: median |start difference| {overall['median']} ms (goal <= 80 ms)")


if __name__ == "__main__":
    main()
