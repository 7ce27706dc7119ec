"""`voicestream demo`'s number: bidi vs batch time to first audio, with and without streaming inside a sentence.

Exactly the demo's measurement (voicestream.demo.measure_runs: the 6-sentence agent reply from
the replay source, first token after 300 ms then 50 tokens/s, through the real speak app's
POST /speak, binary transport; first audio timed at the caller), against two in-process Kokoro
servers on the real model, alternating per repeat:

- streaming: the engine's defaults (decoder windows, lookahead, lead-in trimmed);
- whole_sentences: the engine as it was before (each sentence decoded whole, its leading
  silence kept), for the ratio's "before".

Goal (issue 15): bidi / batch >= 4x on this machine class. Records the machine's load.

    .venv/bin/python benchmarks/demo_ratio.py [--repeats 3]
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

from common import LoadMeter, TimedEngine, base_parser, command_line, kokoro_server, machine, summary, write_json
from voicestream.demo import PACE, local_speak_app, measure_runs
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy
from voicestream.texts import agent_reply


def engines(threads: int) -> dict[str, OnnxEngine]:
    return {
        "streaming": OnnxEngine(threads=threads),
        "whole_sentences": OnnxEngine(
            threads=threads, strategy=OnnxStrategy(decoder_windows=None, lookahead=None, lead_in_frames=None)
        ),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "demo_ratio.json", repeats=3)
    args = parser.parse_args()
    text = agent_reply()
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in engines(args.threads)}
    with contextlib.ExitStack() as stack:
        speak_urls = {}
        for name, engine in engines(args.threads).items():
            server = stack.enter_context(kokoro_server(threads=args.threads, engine=TimedEngine(engine)))
            speak_urls[name] = stack.enter_context(local_speak_app(server.ws_url))
        started = time.time()
        load = LoadMeter()
        for repeat in range(args.repeats):
            order = list(speak_urls) if repeat % 2 == 0 else list(reversed(speak_urls))
            for name in order:
                print(f"repeat {repeat + 1}/{args.repeats}: {name}", flush=True)
                runs = {run.mode: run for run in asyncio.run(measure_runs(speak_urls[name], text, 1))}
                bidi, batch = runs["bidi"], runs["batch"]
                results[name].append(
                    {
                        "repeat": repeat,
                        "bidi_first_audio_ms": round(bidi.first_audio_ms, 1),
                        "batch_first_audio_ms": round(batch.first_audio_ms, 1),
                        "batch_over_bidi": round(batch.first_audio_ms / bidi.first_audio_ms, 3),
                        # The speak function's clock: when the first piece was cut (bidi) or the
                        # text ended (batch), and its first audio: the difference is synthesis.
                        "bidi_first_piece_ms": bidi.done.timings.first_sentence_ms,
                        "bidi_speak_first_audio_ms": bidi.done.timings.first_audio_ms,
                        "batch_first_piece_ms": batch.done.timings.first_sentence_ms,
                        "batch_speak_first_audio_ms": batch.done.timings.first_audio_ms,
                    }
                )
        measured_load = load.report()
    variants = {
        name: {
            "bidi_first_audio_ms": summary(r["bidi_first_audio_ms"] for r in rows),
            "batch_first_audio_ms": summary(r["batch_first_audio_ms"] for r in rows),
            "batch_over_bidi_median_of_paired": round(statistics.median(r["batch_over_bidi"] for r in rows), 2),
            "bidi_synthesis_to_first_audio_ms": summary(
                r["bidi_speak_first_audio_ms"] - r["bidi_first_piece_ms"]
                for r in rows
                if r["bidi_speak_first_audio_ms"] is not None and r["bidi_first_piece_ms"] is not None
            ),
            "runs": rows,
        }
        for name, rows in results.items()
    }
    report = {
        "benchmark": "demo_ratio",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "threads": args.threads,
        "repeats": args.repeats,
        "text_words": len(text.split()),
        "pace": {"first_token_ms": PACE.first_token_s * 1000, "tokens_per_s": PACE.tokens_per_s},
        "goal": "batch / bidi first audio >= 4x",
        "variants": variants,
        "load": measured_load,
        "machine": machine(),
    }
    write_json(args.out, report)
    for name, row in variants.items():
        print(
            f"{name}: bidi {row['bidi_first_audio_ms'].get('median')} ms, "
            f"batch {row['batch_first_audio_ms'].get('median')} ms: "
            f"batch/bidi {row['batch_over_bidi_median_of_paired']}x"
        )
    print(f"other processes kept {measured_load['other_processes_cores']} cores busy")


if __name__ == "__main__":
    main()
