"""Engine-level first audio vs sentence length: chunked decoder windows vs whole-sentence decoding.

One sentence without clause marks of 5, 15, 30 and 50 words, spoken by ONNX engines in the same
process: `chunked` (the defaults: decoder windows, and a long sentence's head encoded first),
`schedule alone` (the same windows on the plan's schedule, not paced to the engine's speed:
engine/streaming/pacing.py; on a machine fast enough for the schedule the two are the same), `no lookahead`
(the same windows, every sentence encoded whole first), `whole`
(`decoder_windows=None`: one decoder run per sentence, the original graph's samples less the
leading silence), any extra window plans given with `--plans` and the defaults paced with each
other margin given with `--margins` (the share of the listener's audio ahead a window may take
to decode: engine/streaming/pacing.py, `MARGIN`); they alternate per repeat so
that the machine's load falls on all alike. Per run:
time from `synthesize()` to the first AudioChunk (G2P + encoder + first window), total time,
audio length, this process's CPU time, and the playback stall a listener would hear if playback
started at the first chunk and each later chunk came when the engine produced it (a window
computed after the previous one's audio has played leaves a gap).

It also times the parts of a first audio alone (G2P, the whole sentence's encoder run, the
lookahead's head encoder run, the first window) per length: what grows with the sentence.

Reports p50s, the long/short first-audio ratio, RTF chunked vs whole (wall and CPU seconds),
and how busy the machine was (cores used by other processes during the run, load average):
on a shared machine the numbers are only comparable as ratios measured in the same run.

    .venv/bin/python benchmarks/first_audio_length.py [--repeats 5] [--threads 2] [--plans 12,2,64 12,2,144,none]
        [--margins 0.6 0.9 1.0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import time
from importlib import resources
from pathlib import Path
from typing import Any

from common import RESULTS, LoadMeter, command_line, machine, own_cpu_s, write_json
from voicestream.chunker import split_sentences
from voicestream.engine.base import SpeechEngine
from voicestream.engine.onnx.engine import (
    DEFAULT_LEAD_IN_FRAMES,
    DEFAULT_LOOKAHEAD,
    DEFAULT_WINDOWS,
    OnnxEngine,
    OnnxStrategy,
    window_plan,
)
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.lookahead import head_split
from voicestream.engine.streaming.windows import WindowPlan, plan_windows
from voicestream.engine.streaming.word_timings import tokenize

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


def stall_s(ready_at: list[float], durations: list[float]) -> float:
    """Silence a listener hears after playback starts at the first chunk: chunk k+1 is late by
    however much it comes after the audio before it has played out."""
    if not ready_at:
        return 0.0
    played_until, stalled = ready_at[0], 0.0
    for at, duration in zip(ready_at, durations, strict=True):
        if at > played_until:
            stalled += at - played_until
            played_until = at
        played_until += duration
    return stalled


def timed(engine: SpeechEngine, text: str) -> dict[str, float]:
    """One sentence alone (any engine: torch_first_audio.py times the torch one with it)."""
    return timed_reply(engine, [text], ahead=False)


def bench_replies() -> dict[str, list[str]]:
    """The benchmark texts, each cut into sentences as the server cuts a request."""
    texts = json.loads(resources.files("voicestream.data").joinpath("bench_texts.json").read_text())
    return {name: split_sentences(text) for name, text in texts.items() if name != "notes"}


def timed_reply(engine: SpeechEngine, sentences: list[str], *, ahead: bool) -> dict[str, float]:
    """A reply's sentences spoken in turn as the server speaks a request or a session's requests:
    with `ahead`, each sentence is told how much audio is still playing before it (the server's
    Listener, which every chunk is handed to); without, each is synthesized as if nothing were."""
    shared = Listener()
    started, cpu_started = time.perf_counter(), own_cpu_s()
    ready_at: list[float] = []
    durations: list[float] = []
    for text in sentences:
        for chunk in engine.synthesize(text, listener=shared if ahead else Listener()):
            ready_at.append(time.perf_counter() - started)
            durations.append(chunk.duration_s)
    total = time.perf_counter() - started
    audio_s = sum(durations)
    return {
        "first_ms": ready_at[0] * 1000,
        "total_s": total,
        "cpu_s": own_cpu_s() - cpu_started,
        "audio_s": audio_s,
        "rtf": total / audio_s,
        "chunks": len(durations),
        "stall_ms": stall_s(ready_at, durations) * 1000,
    }


def summarise_replies(
    samples: dict[str, list[dict[str, float]]], whole: dict[str, list[dict[str, float]]]
) -> dict[str, Any]:
    """Totals over every reply and repeat; RTF and CPU as ratios to whole-sentence decoding."""

    def total(runs: dict[str, list[dict[str, float]]], key: str) -> float:
        return sum(run[key] for reply in runs.values() for run in reply)

    rtf = total(samples, "total_s") / total(samples, "audio_s")
    whole_rtf = total(whole, "total_s") / total(whole, "audio_s")
    cpu = total(samples, "cpu_s") / total(samples, "audio_s")
    whole_cpu = total(whole, "cpu_s") / total(whole, "audio_s")
    return {
        "rtf": round(rtf, 3),
        "rtf_over_whole": round(rtf / whole_rtf, 3),
        "cpu_over_whole": round(cpu / whole_cpu, 3),
        "chunks": {name: int(runs[0]["chunks"]) for name, runs in samples.items()},
        "first_audio_ms_p50": {
            name: round(statistics.median(run["first_ms"] for run in runs), 1) for name, runs in samples.items()
        },
        "stall_ms_max": round(max(run["stall_ms"] for reply in samples.values() for run in reply), 1),
    }


def breakdown(engine: OnnxEngine, text: str) -> dict[str, float]:
    """Where a first audio's time goes, each part timed alone (ms): G2P, the whole sentence's
    encoder run, the lookahead's head encoder run (when the sentence gets one), the first window."""
    started = time.perf_counter()
    (piece,) = engine.phoneme_pieces(text, "af_heart")
    g2p = time.perf_counter() - started
    ids, _ = tokenize(piece, engine._vocab)
    style = engine._voice("af_heart")[len(ids) - 1 : len(ids)]
    started = time.perf_counter()
    features = engine.split.encode(ids, style, 1.0)
    encoder = time.perf_counter() - started
    head = head_split(ids, DEFAULT_LOOKAHEAD)
    head_encoder = None
    if head is not None:
        started = time.perf_counter()
        engine.split.encode(ids[: head.end], style, 1.0)
        head_encoder = (time.perf_counter() - started) * 1000
    first = int(features.durations[0, 0]) - DEFAULT_LEAD_IN_FRAMES
    window = plan_windows(features.frames, DEFAULT_WINDOWS, first)[0]
    started = time.perf_counter()
    engine.split.decode(features, window)
    decode = time.perf_counter() - started
    return {
        "tokens": len(ids),
        "g2p_ms": g2p * 1000,
        "encoder_ms": encoder * 1000,
        "head_encoder_ms": head_encoder if head_encoder is not None else float("nan"),
        "first_window_ms": decode * 1000,
    }


def describe(plan: WindowPlan | None) -> dict[str, Any] | str:
    if plan is None:
        return "whole sentence"
    return {
        "first": plan.first,
        "growth": plan.growth,
        "largest": plan.largest,
        "context": plan.context,
        "carried_context": plan.carried_context,
        "first_right_context": plan.first_right_context,
        "frontend_context": plan.frontend_context,
        "crossfade": plan.crossfade,
    }


def parse_plan(text: str) -> WindowPlan:
    """first,growth,largest[,first_right_context] on the default plan (`none`: the context)."""
    first, growth, largest, *right = text.split(",")
    plan = window_plan((int(first), float(growth), int(largest)))
    assert plan is not None
    if right:
        plan = dataclasses.replace(plan, first_right_context=None if right[0] == "none" else int(right[0]))
    return plan


def summarise(by_length: dict[int, list[dict[str, float]]]) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for words, samples in by_length.items():
        rows[str(words)] = {
            "audio_s": round(samples[0]["audio_s"], 2),
            "chunks": int(samples[0]["chunks"]),
            "first_audio_ms_p50": round(statistics.median(s["first_ms"] for s in samples), 1),
            "first_audio_ms_all": [round(s["first_ms"], 1) for s in samples],
            "rtf_p50": round(statistics.median(s["rtf"] for s in samples), 3),
            "stall_ms_p50": round(statistics.median(s["stall_ms"] for s in samples), 1),
            "stall_ms_max": round(max(s["stall_ms"] for s in samples), 1),
        }
    first = {w: rows[str(w)]["first_audio_ms_p50"] for w in by_length}
    lengths = sorted(by_length)
    total_time = sum(s["total_s"] for samples in by_length.values() for s in samples)
    total_cpu = sum(s["cpu_s"] for samples in by_length.values() for s in samples)
    total_audio = sum(s["audio_s"] for samples in by_length.values() for s in samples)
    return {
        "by_words": rows,
        "first_audio_long_over_short": round(first[lengths[-1]] / first[lengths[0]], 2),
        "rtf_overall": round(total_time / total_audio, 3),
        "cpu_s_per_audio_s": round(total_cpu / total_audio, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--plans", nargs="*", default=[], help="extra window plans first,growth,largest[,first_right_context|none]"
    )
    parser.add_argument("--margins", nargs="*", type=float, default=[], help="extra pacing margins, e.g. 0.6 0.9")
    parser.add_argument(
        "--spinning", action="store_true", help="also chunked and whole with onnxruntime's spinning threads"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "first_audio_length.json")
    args = parser.parse_args()
    plans: dict[str, WindowPlan | None] = {
        "chunked": DEFAULT_WINDOWS,
        # The same windows on the plan's schedule alone, not paced (docs/engine.md, "Pacing").
        "schedule alone": DEFAULT_WINDOWS,
        "no lookahead": DEFAULT_WINDOWS,
        "whole": None,
    }
    plans.update({f"windows {text}": parse_plan(text) for text in args.plans})
    engines = {
        name: OnnxEngine(threads=args.threads, strategy=OnnxStrategy(decoder_windows=plan))
        for name, plan in plans.items()
    }
    engines["schedule alone"] = OnnxEngine(
        threads=args.threads, strategy=OnnxStrategy(decoder_windows=DEFAULT_WINDOWS, pacing=False)
    )
    engines["no lookahead"] = OnnxEngine(
        threads=args.threads, strategy=OnnxStrategy(decoder_windows=DEFAULT_WINDOWS, lookahead=None)
    )
    for margin in args.margins:
        plans[f"paced, margin {margin}"] = DEFAULT_WINDOWS
        engines[f"paced, margin {margin}"] = OnnxEngine(
            threads=args.threads, strategy=OnnxStrategy(decoder_windows=DEFAULT_WINDOWS, pacing_margin=margin)
        )
    if args.spinning:
        for name in ("chunked", "whole"):
            plans[f"{name} spinning"] = plans[name]
            engines[f"{name} spinning"] = OnnxEngine(
                threads=args.threads, strategy=OnnxStrategy(decoder_windows=plans[name], spinning=True)
            )
    for engine in engines.values():
        engine.load()
        timed(engine, sentence(5))  # warm-up: first-run allocations are not what we measure
    runs: dict[str, dict[int, list[dict[str, float]]]] = {name: {n: [] for n in LENGTHS} for name in engines}
    parts: dict[int, list[dict[str, float]]] = {n: [] for n in LENGTHS}
    replies = bench_replies()
    # The same engines speak whole replies: `chunked` told what is still playing (as the server
    # does), `chunked, nothing ahead` each sentence as if alone, `whole` one run per sentence.
    reply_runs: dict[str, dict[str, list[dict[str, float]]]] = {
        variant: {reply: [] for reply in replies} for variant in ("chunked", "chunked, nothing ahead", "whole")
    }
    started = time.time()
    load = LoadMeter()
    for repeat in range(args.repeats):
        for words in LENGTHS:
            order = list(engines) if repeat % 2 == 0 else list(reversed(engines))
            for name in order:
                runs[name][words].append(timed(engines[name], sentence(words)))
        for words in LENGTHS:
            parts[words].append(breakdown(engines["chunked"], sentence(words)))
        for reply, sentences in replies.items():
            variants = list(reply_runs) if repeat % 2 == 0 else list(reversed(reply_runs))
            for variant in variants:
                engine = engines["whole" if variant == "whole" else "chunked"]
                reply_runs[variant][reply].append(timed_reply(engine, sentences, ahead=variant == "chunked"))
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    measured_load = load.report()
    results = {name: summarise(by_length) for name, by_length in runs.items()}
    whole = results["whole"]
    report = {
        "benchmark": "first_audio_length",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "threads": args.threads,
        "repeats": args.repeats,
        "plans": {name: describe(plan) for name, plan in plans.items()},
        "windows": describe(DEFAULT_WINDOWS),
        "lookahead": dataclasses.asdict(DEFAULT_LOOKAHEAD),
        "lead_in_frames": DEFAULT_LEAD_IN_FRAMES,
        "sentences": {str(w): sentence(w) for w in LENGTHS},
        "results": results,
        "breakdown_ms_p50": {
            str(words): {
                key: (None if math.isnan(value) else round(value, 1))
                for key in samples[0]
                for value in [statistics.median(sample[key] for sample in samples)]
            }
            for words, samples in parts.items()
        },
        "over_whole": {
            name: {
                "rtf": round(result["rtf_overall"] / whole["rtf_overall"], 3),
                "cpu_per_audio": round(result["cpu_s_per_audio_s"] / whole["cpu_s_per_audio_s"], 3),
                "first_audio_by_words": {
                    str(w): round(
                        result["by_words"][str(w)]["first_audio_ms_p50"]
                        / whole["by_words"][str(w)]["first_audio_ms_p50"],
                        3,
                    )
                    for w in LENGTHS
                },
            }
            for name, result in results.items()
            if name != "whole"
        },
        "replies": {
            "sentences": {reply: len(sentences) for reply, sentences in replies.items()},
            "results": {variant: summarise_replies(runs, reply_runs["whole"]) for variant, runs in reply_runs.items()},
        },
        "load": measured_load,
        "machine": machine(),
    }
    report["chunked_over_whole"] = report["over_whole"]["chunked"]
    write_json(args.out, report)
    for name, result in results.items():
        first = {w: result["by_words"][str(w)]["first_audio_ms_p50"] for w in LENGTHS}
        stalls = {w: result["by_words"][str(w)]["stall_ms_p50"] for w in LENGTHS}
        print(
            f"{name}: first audio {first} ms; long/short {result['first_audio_long_over_short']}; "
            f"RTF {result['rtf_overall']}; CPU s per audio s {result['cpu_s_per_audio_s']}; stall p50 {stalls} ms"
        )
    for name, ratios in report["over_whole"].items():
        print(f"{name} / whole: RTF {ratios['rtf']}, CPU {ratios['cpu_per_audio']}")
    for variant, result in report["replies"]["results"].items():
        print(
            f"replies, {variant}: RTF {result['rtf']} ({result['rtf_over_whole']} x whole, CPU "
            f"{result['cpu_over_whole']}); first audio {result['first_audio_ms_p50']} ms; "
            f"max stall {result['stall_ms_max']} ms; chunks {result['chunks']}"
        )
    print(f"other processes kept {measured_load['other_processes_cores']} cores busy; load {measured_load}")


if __name__ == "__main__":
    main()
