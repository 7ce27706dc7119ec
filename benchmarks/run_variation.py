"""How much one engine run's speed varies from the next on this host, as the engine runs them.

The engine plans each window on the speed its earlier runs measured (engine/streaming/pacing.py):
a run slower than that by more than the plan leaves room for outlasts the listener's audio. This
script measures the room a host needs: the real ONNX engine, as the server runs it (warmed up,
paced, 2 threads), speaks the 5-word, 50-word and digit-heavy sentences of slow_host.py in turn,
`--repeats` times, and records every decoder run (its span frames and milliseconds). Reported:

- milliseconds per span frame: median, and each run over that median (p10, p50, p90, max);
- the runs over the median in the order they ran (`ratios`): a pattern to replay in the
  simulated host (tests/support/simulated_host.py), where slow runs come in streaks, not alone;
- the encoder's runs the same way, each over the median of the runs of its own length (a head's
  encoding, a whole piece's: a run's fixed cost makes the rate per token depend on the length):
  the plan takes the encoder's estimate to vary as the decoder's runs do;
- the cores other processes kept busy, so a noisy neighbour can be told from the host itself.

    .venv/bin/python benchmarks/run_variation.py [--repeats 4] [--threads 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from common import RESULTS, LoadMeter, command_line, machine, write_json
from first_audio_length import sentence
from slow_host import DIGITS, loaded, spoken
from voicestream.engine.onnx.engine import OnnxStrategy


def spread(ratios: list[float]) -> dict[str, float]:
    """Runs over their median: p10, p50, p90, max."""
    deciles = statistics.quantiles(ratios, n=10)
    return {
        "p10": round(deciles[0], 3),
        "p50": round(statistics.median(ratios), 3),
        "p90": round(deciles[-1], 3),
        "max": max(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "run_variation.json")
    args = parser.parse_args()
    report: dict[str, Any] = {"benchmark": "run_variation", "command": command_line(), "machine": machine()}
    meter = LoadMeter()
    engine = loaded(1.0, args.threads, OnnxStrategy())
    texts = {"5_words": sentence(5), "50_words": sentence(50), "digit_heavy": DIGITS}
    # [text, repeat, run within the text, span frames (decoder) or tokens (encoder), ms]
    runs: list[list[Any]] = []
    encoder_runs: list[list[Any]] = []
    for repeat in range(args.repeats):
        for name, text in texts.items():
            result = spoken(engine, [text])
            decodes = [run for run in result["runs"] if run[1] == "decode"]
            runs.extend([name, repeat, index, size, ms] for index, (_at, _kind, size, ms) in enumerate(decodes))
            encodes = [run for run in result["runs"] if run[1] == "encode"]
            encoder_runs.extend([name, repeat, index, size, ms] for index, (_at, _kind, size, ms) in enumerate(encodes))
            per_frame = [round(ms / size, 1) for _at, _kind, size, ms in decodes]
            print(f"{name} repeat {repeat}: ms per span frame {per_frame}", flush=True)
    engine.close()
    per_frame = [ms / size for _name, _repeat, _index, size, ms in runs]
    median = statistics.median(per_frame)
    ratios = [round(value / median, 3) for value in per_frame]
    report["ms_per_span_frame_median"] = round(median, 2)
    report["over_median"] = spread(ratios)
    report["ratios"] = ratios
    report["runs"] = runs
    by_length: dict[tuple[str, int], list[float]] = {}
    for name, _repeat, _index, tokens, ms in encoder_runs:
        by_length.setdefault((name, tokens), []).append(ms)
    report["encoder_ms_per_token_median"] = {
        f"{name} {tokens} tokens": round(statistics.median(times) / tokens, 3)
        for (name, tokens), times in by_length.items()
    }
    encoder_ratios = [
        round(ms / statistics.median(by_length[name, tokens]), 3) for name, _repeat, _index, tokens, ms in encoder_runs
    ]
    report["encoder_over_median"] = spread(encoder_ratios)
    report["encoder_ratios"] = encoder_ratios
    report["encoder_runs"] = encoder_runs
    report["load"] = meter.report()
    write_json(args.out, report)
    print(f"median {median:.2f} ms per span frame; over it: {report['over_median']}")
    print(f"encoder runs over their length's median: {report['encoder_over_median']}; written {args.out}")


if __name__ == "__main__":
    main()
