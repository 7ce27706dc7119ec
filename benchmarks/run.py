"""`make bench`: every benchmark in turn, then the plots and REPORT.md; records what ran.

Each step is its own script (benchmarks/*.py) run with this interpreter from the repository
root; results/run.json keeps every step's exact command, wall time and exit status, how many
cores other processes kept busy meanwhile (2 shared cores are noisy: the report shows it next
to the numbers), the total, and the machine before and after. A failed step does not stop the others; the exit status
says whether all passed.

    .venv/bin/python benchmarks/run.py [--only isolated agent ...] [--skip pipelining ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT, machine, write_json

# (name, script and arguments). Repeat counts keep the run short on 2 cores. The torch engine's
# first-audio benchmark runs in its own environment: .venv-torch/bin/python benchmarks/torch_first_audio.py
STEPS: list[tuple[str, list[str]]] = [
    ("engine", ["benchmarks/engine.py", "--repeats", "2"]),
    ("isolated", ["benchmarks/isolated.py", "--repeats", "5"]),
    ("agent", ["benchmarks/agent.py", "--repeats", "2"]),
    ("gapless", ["benchmarks/gapless.py"]),
    ("payload", ["benchmarks/payload.py"]),
    ("concurrency", ["benchmarks/concurrency.py"]),
    ("intelligibility", ["benchmarks/intelligibility.py"]),
    ("languages", ["benchmarks/languages.py", "--repeats", "3"]),
    ("pipelining", ["benchmarks/pipelining.py", "--repeats", "2"]),
    ("first_audio_length", ["benchmarks/first_audio_length.py", "--repeats", "3"]),
    ("route_first_audio", ["benchmarks/route_first_audio.py", "--repeats", "3"]),
    ("demo_ratio", ["benchmarks/demo_ratio.py", "--repeats", "3"]),
    ("peer_kokoro_onnx", ["benchmarks/peer_kokoro_onnx.py", "--repeats", "3"]),
    ("first_clause", ["benchmarks/first_clause.py"]),
    ("engine_word_timings", ["benchmarks/engine_word_timings.py"]),
    ("word_timings", ["benchmarks/word_timings.py"]),
    ("openai_speech", ["benchmarks/openai_speech.py", "--repeats", "3"]),
    ("robustness", ["benchmarks/robustness.py"]),
    ("memory", ["benchmarks/memory.py"]),
    ("soak", ["benchmarks/soak.py", "--sessions", "1000"]),
    ("plots", ["benchmarks/plots.py"]),
]
# Last, after run.json holds the totals it shows.
REPORT = ["benchmarks/report.py"]


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all processes, all cores), from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_step(command: list[str]) -> tuple[int, float, float]:
    """Exit status, wall seconds, and the cores that OTHER processes kept busy meanwhile (the
    machine's busy time less this step's own): the noise the step's numbers carry."""
    started, busy, own = time.perf_counter(), busy_cpu_s(), children_cpu_s()
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"    {line}", end="", flush=True)
    wall = time.perf_counter() - started
    others = (busy_cpu_s() - busy) - (children_cpu_s() - own)
    return process.returncode, wall, max(0.0, others / wall)


def merged_steps(previous_run: Path, ran: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's steps, plus the last record of each step it left out (--only, --skip): their
    results are still in the report, so how and when they were made stays with them."""
    names = {step["name"] for step in ran}
    kept = []
    if previous_run.exists():
        previous = json.loads(previous_run.read_text())
        for step in previous.get("steps", []):
            if step["name"] not in names:
                kept.append({"started": previous.get("started"), **step})
    order = {name: index for index, (name, _) in enumerate(STEPS)}
    return sorted([*kept, *ran], key=lambda step: order.get(step["name"], len(order)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [name for name, _ in STEPS]
    parser.add_argument("--only", nargs="+", choices=names, help="run just these steps")
    parser.add_argument("--skip", nargs="+", choices=names, default=[], help="leave these steps out")
    args = parser.parse_args()
    selected = [
        (name, argv) for name, argv in STEPS if (args.only is None or name in args.only) and name not in args.skip
    ]
    run: dict[str, Any] = {
        "benchmark": "run",
        "command": "make bench  (= .venv/bin/python benchmarks/run.py" + "".join(f" {a}" for a in sys.argv[1:]) + ")",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine_before": machine(),
        "steps": [],
    }
    env_python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable
    started = time.perf_counter()
    for name, argv in selected:
        command = [sys.executable, *argv]
        shown = " ".join([env_python, *argv])
        print(f"== {name}: {shown}", flush=True)
        step_started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        returncode, seconds, others = run_step(command)
        run["steps"].append(
            {
                "name": name,
                "started": step_started,
                "command": shown,
                "seconds": round(seconds, 1),
                "returncode": returncode,
                "other_processes_cores": round(others, 2),
            }
        )
        print(f"== {name}: exit {returncode} after {seconds:.0f} s (others used {others:.2f} cores)", flush=True)
    run["total_s"] = round(time.perf_counter() - started, 1)
    run["machine_after"] = machine(calibrate=False)  # load and flags after; the speed is measured before
    run["steps"] = merged_steps(RESULTS / "run.json", run["steps"])
    write_json(RESULTS / "run.json", run)
    print(f"== report: {' '.join([env_python, *REPORT])}", flush=True)
    report_status, _, _ = run_step([sys.executable, *REPORT])
    failed = [step["name"] for step in run["steps"] if step["returncode"] != 0]
    if report_status != 0:
        failed.append("report")
    print(f"total {run['total_s'] / 60:.1f} min; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
