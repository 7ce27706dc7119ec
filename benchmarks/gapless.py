"""Experiment 3: gapless playback. Replays agent.json's frame arrivals into a simulated player.

The player starts at the first audio frame and plays in real time; whenever it has played
everything received so far it stalls until the next frame arrives. For every run at the goal
pace (50 tokens/s) this reports the total stall after playback started, per mode: bidi
(pipelined, through the speak function), stop_and_wait (each sentence sent only after the
previous synthesis_complete: the anchor's client) and the batch baselines. It also keeps one
run per mode (the median by stall) as a buffer timeline for the plot.

Measures nothing itself: run benchmarks/agent.py first.

    .venv/bin/python benchmarks/gapless.py [--agent benchmarks/results/agent.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from common import RESULTS, Arrival, command_line, playback, summary, write_json


def analyse(agent: dict[str, Any]) -> dict[str, Any]:
    goal = agent["goal_tokens_per_s"]
    runs = [r for r in agent["runs"] if r["tokens_per_s"] == goal and "arrivals" in r]
    modes: dict[str, Any] = {}
    timelines: dict[str, Any] = {}
    for mode in dict.fromkeys(r["mode"] for r in runs):
        simulated = []
        for run in (r for r in runs if r["mode"] == mode):
            result = playback([Arrival(at, audio) for at, audio in run["arrivals"]])
            simulated.append((result, run))
        stall_ms = [result.stall_s * 1000 for result, _ in simulated]
        modes[mode] = {
            "runs": len(simulated),
            "stall_ms": summary(stall_ms),
            "stall_events": summary((float(len(result.stalls)) for result, _ in simulated), 0),
            "playback_start_ms": summary(result.start_s * 1000 for result, _ in simulated),
            "playback_end_ms": summary(result.end_s * 1000 for result, _ in simulated),
            "runs_without_stall": sum(1 for value in stall_ms if value == 0),
        }
        ordered = sorted(simulated, key=lambda item: (item[0].stall_s, item[0].start_s))
        result, run = ordered[len(ordered) // 2]
        timelines[mode] = {
            "repeat": run["repeat"],
            "stall_ms": round(result.stall_s * 1000, 1),
            "stalls": [[round(at, 3), round(duration, 3)] for at, duration in result.stalls],
            "buffer": [[round(at, 3), round(ahead, 3)] for at, ahead in result.buffer],
        }
    return {"tokens_per_s": goal, "modes": modes, "timelines": timelines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=Path, default=RESULTS / "agent.json")
    parser.add_argument("--out", type=Path, default=RESULTS / "gapless.json")
    args = parser.parse_args()
    agent = json.loads(args.agent.read_text())
    report = {
        "benchmark": "gapless",
        "command": command_line(),
        "source": {"file": str(args.agent.name), "command": agent["command"], "started": agent["started"]},
        "machine": agent.get("machine"),  # the agent run's host: this script only analyses its arrivals
        "player": "starts at the first audio frame, plays in real time, stalls while empty",
        **analyse(agent),
    }
    write_json(args.out, report)
    for mode, row in report["modes"].items():
        print(f"{mode:<14} stall median {row['stall_ms'].get('median')} ms, max {row['stall_ms'].get('max')} ms")


if __name__ == "__main__":
    main()
