"""Engine-level first audio vs sentence length: chunked decoder windows vs whole-sentence decoding.

One sentence without clause marks of 5, 15, 30 and 50 words, spoken by two ONNX engines in the
same process (default decoder windows, and `decoder_windows=None`), alternating per repeat so
that the machine's load falls on both alike. Per run: time from `synthesize()` to the first
AudioChunk (G2P + encoder + first window), total time, audio length. Reports p50s, the
long/short first-audio ratio, RTF chunked vs whole, and how busy the machine was (cores used by
other processes during the run, load average), since the numbers are only comparable as ratios
measured in the same run on a shared machine.

    .venv/bin/python benchmarks/first_audio_length.py [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from common import RESULTS, machine, write_json
from voicestream.engine.onnx import DEFAULT_WINDOWS, OnnxEngine

TEXT = (
    "our team will move every order from the north depot to the new site next week so please check that your "
    "delivery address and phone number are correct before friday because the courier cannot call you back after "
    "the van leaves and we would hate for anything to go missing on the way home"
)
WORDS = tuple(TEXT.split(" "))
LENGTHS = (5, 15, 30, 50)


def sentence(words: int) -> str:
    text = " ".join(WORDS[:words])
    return text[0].upper() + text[1:] + "."


def busy_cores_s() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(engine: OnnxEngine, text: str) -> dict[str, float]:
    started = time.perf_counter()
    first = None
    samples = chunks = 0
    for chunk in engine.synthesize(text):
        if first is None:
            first = time.perf_counter() - started
        samples += len(chunk.samples)
        chunks += 1
    total = time.perf_counter() - started
    assert first is not None
    audio_s = samples / engine.sample_rate
    return {"first_ms": first * 1000, "total_s": total, "audio_s": audio_s, "rtf": total / audio_s, "chunks": chunks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="first_audio_length.json")
    args = parser.parse_args()
    engines = {
        "chunked": OnnxEngine(threads=args.threads),
        "whole": OnnxEngine(threads=args.threads, decoder_windows=None),
    }
    for engine in engines.values():
        engine.load()
        timed(engine, sentence(5))  # warm-up: first-run allocations are not what we measure
    runs: dict[str, dict[int, list[dict[str, float]]]] = {name: {n: [] for n in LENGTHS} for name in engines}
    load_before = os.getloadavg()
    wall, busy, own = time.perf_counter(), busy_cores_s(), own_cpu_s()
    for repeat in range(args.repeats):
        for words in LENGTHS:
            order = list(engines) if repeat % 2 == 0 else list(reversed(engines))
            for name in order:
                runs[name][words].append(timed(engines[name], sentence(words)))
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    wall = time.perf_counter() - wall
    others = max(0.0, (busy_cores_s() - busy) - (own_cpu_s() - own)) / wall
    results: dict[str, Any] = {}
    for name, by_length in runs.items():
        rows = {}
        for words, samples in by_length.items():
            rows[str(words)] = {
                "audio_s": round(samples[0]["audio_s"], 2),
                "chunks": int(samples[0]["chunks"]),
                "first_audio_ms_p50": round(statistics.median(s["first_ms"] for s in samples), 1),
                "first_audio_ms_all": [round(s["first_ms"], 1) for s in samples],
                "rtf_p50": round(statistics.median(s["rtf"] for s in samples), 3),
            }
        first = {w: rows[str(w)]["first_audio_ms_p50"] for w in LENGTHS}
        total_time = sum(s["total_s"] for samples in by_length.values() for s in samples)
        total_audio = sum(s["audio_s"] for samples in by_length.values() for s in samples)
        results[name] = {
            "by_words": rows,
            "first_audio_long_over_short": round(first[LENGTHS[-1]] / first[LENGTHS[0]], 2),
            "rtf_overall": round(total_time / total_audio, 3),
        }
    report = {
        "benchmark": "first_audio_length",
        "command": f".venv/bin/python benchmarks/first_audio_length.py --repeats {args.repeats} "
        f"--threads {args.threads}",
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
        "chunked_over_whole": {
            "rtf": round(results["chunked"]["rtf_overall"] / results["whole"]["rtf_overall"], 3),
            "first_audio_by_words": {
                str(w): round(
                    results["chunked"]["by_words"][str(w)]["first_audio_ms_p50"]
                    / results["whole"]["by_words"][str(w)]["first_audio_ms_p50"],
                    3,
                )
                for w in LENGTHS
            },
        },
        "load": {
            "other_processes_cores": round(others, 2),
            "loadavg_before": [round(v, 2) for v in load_before],
            "loadavg_after": [round(v, 2) for v in os.getloadavg()],
            "wall_s": round(wall, 1),
        },
        "machine": machine(),
    }
    write_json(RESULTS / args.out, report)
    for name in engines:
        first = {w: results[name]["by_words"][str(w)]["first_audio_ms_p50"] for w in LENGTHS}
        ratio, rtf = results[name]["first_audio_long_over_short"], results[name]["rtf_overall"]
        print(name, first, "ms; long/short", ratio, "RTF", rtf)
    print("chunked/whole RTF", report["chunked_over_whole"]["rtf"], "| other processes' cores", round(others, 2))


if __name__ == "__main__":
    main()
