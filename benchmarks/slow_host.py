"""The engine on an emulated slow host: gaps, first audio and compute at k times this host's cost.

Issue 29's slow class (2 cores, AVX2 only) decodes a whole sentence at RTF ~0.6, about 3x slower
than the fast class. We have no such host, so this benchmark makes this one behave like it: the
real ONNX engine, whose split runtime is wrapped (here, never in production code) so that after
each encoder or decoder run it sleeps (k-1) times that run's own duration. The engine then
measures a k times slower host (its DecodeSpeed, EncodeSpeed: engine/streaming/pacing.py) and
plans its windows for it; the G2P is not slowed.

Per k (1: this host as it is; the slow class's, RTF 0.6 / this host's RTF measured now: ~3 on
a quiet fast host) and text (5 words, 50 words, the issue's
digit-heavy sentence, the 4-sentence paragraph spoken sentence by sentence to one listener, as
the server speaks a request), alternating per repeat with `whole` (the same slowed engine
decoding every sentence whole) so that the machine's load falls on both alike:

- first audio (`synthesize()` to the first chunk, G2P included), p50;
- the worst single gap and the total stall a listener hears who starts at the first chunk and
  plays in real time (first_audio_length.py's model), max over repeats;
- compute over whole-sentence decoding: this process's CPU seconds (the sleeps cost none), and
  the emulated busy seconds (each run's time times k);
- the cores other processes kept busy during each run, and the chunk-by-chunk timeline of the
  run with the worst gap (when each chunk was ready, its audio, where the listener was): a gap
  under load can then be told from a planning fault (a window planned longer than the audio
  ahead on the speeds measured before it).

With `--floor`, a third engine alternates with those two: the same engine unpaced (the plan's
schedule alone), whose first window is the smallest the quality gates allow. Its first audio is
the least any plan of these windows can give on this host, paced or not: where it is over a
target, no pacing meets that target. Every engine's first audio is also split into its parts
(the encoder and decoder runs before it, and the rest: G2P, the pipeline's own work).

    .venv/bin/python benchmarks/slow_host.py [--slow-rtf 0.6 | --factors 1 3] [--repeats 2] [--threads 2] [--floor]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy.typing as npt

from common import RESULTS, LoadMeter, command_line, machine, own_cpu_s, write_json
from first_audio_length import bench_replies, sentence, stall_s
from voicestream.engine.base import FloatAudio
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy, VoiceArray
from voicestream.engine.onnx.runtime import OnnxSplitRuntime, SentenceFeatures, join
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.pipeline import Pipeline
from voicestream.engine.streaming.windows import Window

# issue 29's digit-heavy sentence
DIGITS = "Your confirmation number is 4 8 1 5 1 6 2 3 4 2, and the total comes to $1,249.99 including tax."


class SlowedRuntime:
    """The engine's split runtime, each run followed by a sleep of (factor - 1) times its own
    duration: a host `factor` times slower, as the engine's clocks see it."""

    def __init__(self, runtime: OnnxSplitRuntime, factor: float) -> None:
        self.runtime = runtime
        self.factor = factor
        self.busy_s = 0.0  # the emulated host's seconds of work
        # Each run: [started (perf_counter), "encode" | "decode", tokens | span frames, seconds].
        self.runs: list[list[Any]] = []

    def _slowed(self, started: float, kind: str, size: int) -> None:
        took = time.perf_counter() - started
        time.sleep((self.factor - 1.0) * took)
        self.busy_s += self.factor * took
        self.runs.append([started, kind, size, self.factor * took])

    def encode(self, ids: list[int], style: VoiceArray, speed: float) -> SentenceFeatures:
        started = time.perf_counter()
        features = self.runtime.encode(ids, style, speed)
        self._slowed(started, "encode", len(ids))
        return features

    def durations(self, features: SentenceFeatures) -> npt.NDArray[Any]:
        return self.runtime.durations(features)

    def window_decoder(self) -> Callable[[SentenceFeatures, Window], FloatAudio]:
        decode = self.runtime.window_decoder()

        def slowed(features: SentenceFeatures, window: Window) -> FloatAudio:
            started = time.perf_counter()
            audio = decode(features, window)
            self._slowed(started, "decode", window.frames)
            return audio

        return slowed


class SlowedEngine(OnnxEngine):
    """The ONNX engine over a SlowedRuntime: the same front end, strategy and pipeline."""

    def __init__(self, factor: float, *, threads: int, strategy: OnnxStrategy) -> None:
        super().__init__(threads=threads, strategy=strategy)
        self.factor = factor
        self._slowed_pipeline: Pipeline[SentenceFeatures, VoiceArray] | None = None
        self.slowed: SlowedRuntime | None = None

    @property
    def pipeline(self) -> Pipeline[SentenceFeatures, VoiceArray]:
        if self._slowed_pipeline is None:
            self.slowed = SlowedRuntime(self.split, self.factor)
            self._slowed_pipeline = Pipeline(self.slowed, self._vocab, self.strategy.streaming(), join=join)
        return self._slowed_pipeline


def timeline(ready_at: list[float], durations: list[float], sentence_of: list[int]) -> list[list[float]]:
    """Per chunk: [ready (ms), audio (ms), audio ahead of the listener when it was ready (ms; a
    negative value is the gap it ended), sentence index], the listener starting at the first chunk
    and playing in real time (stall_s's model; the worst gap is the most negative lead)."""
    rows: list[list[float]] = []
    played_until = ready_at[0] if ready_at else 0.0
    for at, duration, index in zip(ready_at, durations, sentence_of, strict=True):
        rows.append([round(at * 1000, 1), round(duration * 1000, 1), round((played_until - at) * 1000, 1), index])
        played_until = max(at, played_until) + duration
    return rows


def spoken(engine: SlowedEngine, sentences: list[str]) -> dict[str, Any]:
    """`sentences` in turn to one listener (the server's way with a request), timed."""
    assert engine.slowed is not None
    listener = Listener()
    meter = LoadMeter()
    busy_before, cpu_before, runs_before = engine.slowed.busy_s, own_cpu_s(), len(engine.slowed.runs)
    started = time.perf_counter()
    ready_at: list[float] = []
    durations: list[float] = []
    sentence_of: list[int] = []
    for index, text in enumerate(sentences):
        for chunk in engine.synthesize(text, listener=listener):
            ready_at.append(time.perf_counter() - started)
            durations.append(chunk.duration_s)
            sentence_of.append(index)
    rows = timeline(ready_at, durations, sentence_of)
    runs = [
        [round((at - started) * 1000, 1), kind, size, round(seconds * 1000, 1)]
        for at, kind, size, seconds in engine.slowed.runs[runs_before:]
    ]
    return {
        "first_ms": ready_at[0] * 1000,
        "first_audio_parts_ms": first_audio_parts(runs, ready_at[0] * 1000),
        "worst_gap_ms": max([0.0, *(-ahead_ms for _ready, _audio, ahead_ms, _index in rows)]),
        "stall_ms": stall_s(ready_at, durations) * 1000,
        "audio_s": sum(durations),
        "chunks": len(durations),
        "cpu_s": own_cpu_s() - cpu_before,
        "busy_s": engine.slowed.busy_s - busy_before,
        "other_processes_cores": meter.report()["other_processes_cores"],
        "timeline": rows,
        "runs": runs,
    }


def first_audio_parts(runs: list[list[Any]], first_ms: float) -> dict[str, float]:
    """Where the first audio went: the encoder and decoder runs that ended before it, and the rest
    (G2P, the pipeline's own work)."""
    # Run times are rounded to 0.1 ms: the decoder run that yielded the first chunk ends at it.
    before = [run for run in runs if run[0] + run[3] <= first_ms + 0.5]
    encode = sum(run[3] for run in before if run[1] == "encode")
    decode = sum(run[3] for run in before if run[1] == "decode")
    return {"encode": round(encode, 1), "decode": round(decode, 1), "other": round(first_ms - encode - decode, 1)}


def texts(only: list[str] | None = None) -> dict[str, list[str]]:
    every = {
        "short_5_words": [sentence(5)],
        "long_50_words": [sentence(50)],
        "digit_heavy": [DIGITS],
        "paragraph_4_sentences": bench_replies()["paragraph_4_sentences"],
    }
    return {name: sentences for name, sentences in every.items() if only is None or name in only}


def loaded(factor: float, threads: int, strategy: OnnxStrategy) -> SlowedEngine:
    engine = SlowedEngine(factor, threads=threads, strategy=strategy)
    engine.load()
    for _chunk in engine.synthesize(sentence(15)):  # a server's warm-up: the speeds are measured
        pass
    return engine


def parts_p50(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each part of the first audio (first_audio_parts), its median over the repeats."""
    return {
        part: round(statistics.median(run["first_audio_parts_ms"][part] for run in runs), 1)
        for part in ("encode", "decode", "other")
    }


def summarise(
    chunked: list[dict[str, Any]], whole: list[dict[str, Any]], unpaced: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    def total(runs: list[dict[str, Any]], key: str) -> float:
        return float(sum(run[key] for run in runs))

    worst = max(chunked, key=lambda run: run["worst_gap_ms"])
    floor = {}
    if unpaced:
        floor = {
            "unpaced_first_audio_ms_p50": round(statistics.median(run["first_ms"] for run in unpaced), 1),
            "unpaced_first_audio_parts_ms_p50": parts_p50(unpaced),
            "unpaced_worst_gap_ms_max": round(max(run["worst_gap_ms"] for run in unpaced), 1),
            "unpaced_cpu_over_whole": round(total(unpaced, "cpu_s") / total(whole, "cpu_s"), 3),
        }
    return {
        "first_audio_ms_p50": round(statistics.median(run["first_ms"] for run in chunked), 1),
        "first_audio_parts_ms_p50": parts_p50(chunked),
        "whole_first_audio_ms_p50": round(statistics.median(run["first_ms"] for run in whole), 1),
        "worst_gap_ms_max": round(max(run["worst_gap_ms"] for run in chunked), 1),
        "stall_ms_max": round(max(run["stall_ms"] for run in chunked), 1),
        "whole_worst_gap_ms_max": round(max(run["worst_gap_ms"] for run in whole), 1),
        "cpu_over_whole": round(total(chunked, "cpu_s") / total(whole, "cpu_s"), 3),
        "busy_over_whole": round(total(chunked, "busy_s") / total(whole, "busy_s"), 3),
        "audio_s": round(chunked[0]["audio_s"], 2),
        "chunks": int(chunked[0]["chunks"]),
        "worst_gap_ms_per_repeat": [round(run["worst_gap_ms"], 1) for run in chunked],
        "other_processes_cores_per_repeat": [run["other_processes_cores"] for run in chunked],
        # [ready ms, audio ms, audio ahead ms (negative: a gap), sentence]
        "worst_run_timeline": worst["timeline"],
        # [started ms, encode | decode, tokens | span frames, emulated ms]
        "worst_run_runs": worst["runs"],
        **floor,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", type=float, nargs="+", help="slowdowns k (default: 1, and --slow-rtf's)")
    parser.add_argument(
        "--slow-rtf",
        type=float,
        default=0.6,
        help="the whole-sentence RTF to emulate: k = this / the RTF measured now (3 on a quiet fast host)",
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--texts", nargs="+", choices=list(texts()), help="only these texts (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also the engine unpaced: its first window is the plan's smallest, so its first audio is"
        " the least any plan of these windows gives on this host",
    )
    parser.add_argument("--out", default=str(RESULTS / "slow_host.json"))
    args = parser.parse_args()
    report: dict[str, Any] = {"benchmark": "slow_host", "command": command_line(), "machine": machine()}
    measured = report["machine"]["whole_sentence_rtf"]
    # A shared machine's RTF varies with its load: k is chosen from the RTF measured now, so that
    # the emulated host is the slow class, not slower than real time.
    factors = args.factors or [1.0, round(max(1.0, args.slow_rtf / measured), 2)]
    meter = LoadMeter()
    by_factor: dict[str, Any] = {}
    for factor in factors:
        engines = {
            "chunked": loaded(factor, args.threads, OnnxStrategy()),
            "whole": loaded(factor, args.threads, OnnxStrategy(decoder_windows=None)),
        }
        if args.floor:
            engines["unpaced"] = loaded(factor, args.threads, OnnxStrategy(pacing=False))
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for _ in range(args.repeats):
            for name, sentences in texts(args.texts).items():
                for label, engine in engines.items():
                    runs.setdefault(name, {}).setdefault(label, []).append(spoken(engine, sentences))
        by_factor[f"k={factor:g}"] = {
            "emulated_whole_sentence_rtf": round(factor * measured, 3),
            "texts": {name: summarise(by["chunked"], by["whole"], by.get("unpaced")) for name, by in runs.items()},
        }
        for name, summary in by_factor[f"k={factor:g}"]["texts"].items():
            shown = {key: value for key, value in summary.items() if not key.startswith("worst_run_")}
            print(f"k={factor:g} {name}", shown, flush=True)
        for engine in engines.values():
            engine.close()
    report["results"] = by_factor
    report["load"] = meter.report()
    write_json(Path(args.out), report)


if __name__ == "__main__":
    main()
