"""`make bench`: every benchmark in turn, then the plots and REPORT.md; records what ran.

Each step is its own script (benchmarks/*.py) run with this interpreter from the repository
root; results/run.json keeps every step's exact command, wall time and exit status, the total,
and the machine with its load average before and after (2 shared cores are noisy: the report
shows the load next to the numbers). A failed step does not stop the others; the exit status
says whether all passed.

    .venv/bin/python benchmarks/run.py [--only isolated agent ...] [--skip pipelining ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from common import RESULTS, ROOT, machine, write_json

# (name, script and arguments). Repeat counts keep the whole run under 15 minutes on 2 cores.
STEPS: list[tuple[str, list[str]]] = [
    ("engine", ["benchmarks/engine.py", "--repeats", "2"]),
    ("isolated", ["benchmarks/isolated.py", "--repeats", "5"]),
    ("agent", ["benchmarks/agent.py", "--repeats", "2"]),
    ("gapless", ["benchmarks/gapless.py"]),
    ("payload", ["benchmarks/payload.py"]),
    ("concurrency", ["benchmarks/concurrency.py"]),
    ("intelligibility", ["benchmarks/intelligibility.py"]),
    ("pipelining", ["benchmarks/pipelining.py", "--repeats", "2"]),
    ("plots", ["benchmarks/plots.py"]),
]
# Last, after run.json holds the totals it shows.
REPORT = ["benchmarks/report.py"]


def run_step(command: list[str]) -> tuple[int, float]:
    started = time.perf_counter()
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"    {line}", end="", flush=True)
    return process.returncode, time.perf_counter() - started


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
        returncode, seconds = run_step(command)
        run["steps"].append({"name": name, "command": shown, "seconds": round(seconds, 1), "returncode": returncode})
        print(f"== {name}: exit {returncode} after {seconds:.0f} s", flush=True)
    run["total_s"] = round(time.perf_counter() - started, 1)
    run["machine_after"] = machine()
    write_json(RESULTS / "run.json", run)
    print(f"== report: {' '.join([env_python, *REPORT])}", flush=True)
    report_status, _ = run_step([sys.executable, *REPORT])
    failed = [step["name"] for step in run["steps"] if step["returncode"] != 0]
    if report_status != 0:
        failed.append("report")
    print(f"total {run['total_s'] / 60:.1f} min; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
