"""Engine benchmark: load time, first-chunk latency and real-time factor of the ONNX CPU engine.

For a short sentence and the 4-sentence paragraph, with 1 and 2 inference threads, repeated
and interleaved (these machines are noisy: compare numbers from one run only).

    .venv/bin/python benchmarks/engine.py [--repeats 3] [--out benchmarks/results/engine.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from common import machine
from voicestream.engine import create_engine
from voicestream.engine.offline import synthesize_timed
from voicestream.texts import paragraph

SHORT = "Your flight leaves at nine forty tomorrow morning."


def run(repeats: int, thread_counts: list[int]) -> dict[str, Any]:
    texts = {"short_sentence": SHORT, "paragraph_4_sentences": paragraph()}
    engines = {}
    load_s = {}
    for threads in thread_counts:
        engine = create_engine("onnx", threads=threads)
        started = time.perf_counter()
        engine.load()
        load_s[threads] = time.perf_counter() - started
        engines[threads] = engine
        synthesize_timed(engine, ["Warm up."])  # first-inference allocations are not the steady state
    samples: dict[tuple[int, str], list[dict[str, float]]] = {}
    for _ in range(repeats):
        for threads, engine in engines.items():  # interleaved so drift hits every variant alike
            for name, text in texts.items():
                result = synthesize_timed(engine, [text])
                samples.setdefault((threads, name), []).append(
                    {
                        "first_chunk_ms": result.first_chunk_s * 1000,
                        "total_ms": result.total_s * 1000,
                        "audio_s": result.audio_s,
                        "real_time_factor": result.real_time_factor,
                    }
                )
    rows = []
    for (threads, name), runs in samples.items():
        rows.append(
            {
                "threads": threads,
                "text": name,
                "chars": len(texts[name]),
                "load_s": round(load_s[threads], 3),
                "first_chunk_ms_median": round(statistics.median(r["first_chunk_ms"] for r in runs), 1),
                "total_ms_median": round(statistics.median(r["total_ms"] for r in runs), 1),
                "audio_s": round(runs[0]["audio_s"], 2),
                "real_time_factor_median": round(statistics.median(r["real_time_factor"] for r in runs), 3),
                "runs": runs,
            }
        )
    return {"benchmark": "engine", "backend": "onnx-int8", "repeats": repeats, "machine": machine(), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/engine.json"))
    args = parser.parse_args()
    report = run(args.repeats, args.threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'threads':>7} {'text':<22} {'load s':>7} {'first ms':>9} {'total ms':>9} {'audio s':>8} {'RTF':>6}")
    for row in report["rows"]:
        print(
            f"{row['threads']:>7} {row['text']:<22} {row['load_s']:>7} {row['first_chunk_ms_median']:>9} "
            f"{row['total_ms_median']:>9} {row['audio_s']:>8} {row['real_time_factor_median']:>6}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
