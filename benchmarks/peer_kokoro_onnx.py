"""Our engine against kokoro-onnx, the library a user would otherwise pick, paired in one run.

Issue 29's comparison: kokoro-onnx (its `Kokoro.create_stream`, as its README shows it) on the
same int8 model file, vocabulary and voice (af_heart), on the same number of onnxruntime threads,
against our ONNX engine as the server runs it (each text cut into sentences, spoken in turn to
one listener) and against our engine decoding every sentence whole (the compute baseline the
windows are held to). Each library runs in a worker process of its own (peer_worker.py;
kokoro-onnx from .venv-peer, `make venv-peer`), loaded and warmed up once; the texts go to the
three in an order that rotates per repeat, so that the machine's load falls on all alike.

Texts: 5 and 50 words (first_audio_length.py's, no clause marks), issue 29's digit-heavy
sentence, the benchmark paragraph (4 sentences; kokoro-onnx gets it whole, as a user would pass
it). Per text and library:

- first audio: the call to the first chunk (G2P included), p50;
- compute: CPU seconds of the worker and its child processes (our G2P workers), summed over the
  repeats, and per second of audio (kokoro-onnx trims the model's silences and adds its own
  pauses, so the audio lengths differ);
- the worst gap and the total stall of a listener who starts at the first chunk and plays in
  real time (slow_host.py's timeline), max over repeats.

And the ratios ours / kokoro-onnx (first audio, CPU per text, CPU per audio second) and ours /
whole-sentence decoding (CPU per text).

    .venv/bin/python benchmarks/peer_kokoro_onnx.py [--repeats 3] [--threads 2] [--peer-python .venv-peer/bin/python]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT, busy_cpu_s, command_line, machine, own_cpu_s, write_json
from first_audio_length import sentence, stall_s
from slow_host import DIGITS, timeline
from voicestream import env

WORKER = Path(__file__).resolve().parent / "peer_worker.py"
OURS, WHOLE, PEER = "voicestream", "voicestream-whole", "kokoro-onnx"


def texts() -> dict[str, str]:
    bench = json.loads(resources.files("voicestream.data").joinpath("bench_texts.json").read_text())
    return {
        "short_5_words": sentence(5),
        "long_50_words": sentence(50),
        "digit_heavy": DIGITS,
        "paragraph_4_sentences": bench["paragraph_4_sentences"],
    }


@dataclass
class Worker:
    """One library's worker process (peer_worker.py's protocol)."""

    library: str
    process: subprocess.Popen[str]
    versions: dict[str, str]

    @classmethod
    def start(cls, library: str, python: Path, model_dir: Path, threads: int) -> Worker:
        command = [str(python), str(WORKER), library, "--model-dir", str(model_dir), "--threads", str(threads)]
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = cls._read(process, library)
        return cls(library, process, ready["versions"])

    @staticmethod
    def _read(process: subprocess.Popen[str], library: str) -> dict[str, Any]:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the {library} worker ended (exit status {process.wait()}): its error is above")
        result: dict[str, Any] = json.loads(line)
        return result

    def speak(self, text: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"text": text}) + "\n")
        self.process.stdin.flush()
        run = self._read(self.process, self.library)
        ready, audio = run["ready_s"], run["audio_s"]
        rows = timeline(ready, audio, [0] * len(ready))
        return {
            "first_ms": ready[0] * 1000,
            "total_s": ready[-1],
            "cpu_s": run["cpu_s"],
            "audio_s": sum(audio),
            "chunks": len(ready),
            "worst_gap_ms": max([0.0, *(-ahead_ms for _ready, _audio, ahead_ms, _index in rows)]),
            "stall_ms": stall_s(ready, audio) * 1000,
        }

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    cpu_s, audio_s = sum(run["cpu_s"] for run in runs), sum(run["audio_s"] for run in runs)
    return {
        "first_audio_ms_p50": round(statistics.median(run["first_ms"] for run in runs), 1),
        "total_s_p50": round(statistics.median(run["total_s"] for run in runs), 3),
        "cpu_s_per_text": round(cpu_s / len(runs), 3),
        "cpu_s_per_audio_s": round(cpu_s / audio_s, 3),
        "audio_s": round(runs[0]["audio_s"], 2),
        "chunks": runs[0]["chunks"],
        "worst_gap_ms_max": round(max(run["worst_gap_ms"] for run in runs), 1),
        "stall_ms_max": round(max(run["stall_ms"] for run in runs), 1),
    }


def compared(by_library: dict[str, dict[str, Any]]) -> dict[str, float]:
    ours, whole, peer = by_library[OURS], by_library[WHOLE], by_library[PEER]
    return {
        "first_audio_ours_over_peer": round(ours["first_audio_ms_p50"] / peer["first_audio_ms_p50"], 3),
        "peer_first_audio_over_ours": round(peer["first_audio_ms_p50"] / ours["first_audio_ms_p50"], 1),
        "cpu_per_text_ours_over_peer": round(ours["cpu_s_per_text"] / peer["cpu_s_per_text"], 3),
        "cpu_per_audio_s_ours_over_peer": round(ours["cpu_s_per_audio_s"] / peer["cpu_s_per_audio_s"], 3),
        "cpu_per_text_ours_over_whole": round(ours["cpu_s_per_text"] / whole["cpu_s_per_text"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads of every library")
    parser.add_argument("--texts", nargs="+", choices=list(texts()), help="only these texts (default: all)")
    parser.add_argument("--peer-python", type=Path, default=ROOT / ".venv-peer" / "bin" / "python")
    parser.add_argument("--out", type=Path, default=RESULTS / "peer_kokoro_onnx.json")
    args = parser.parse_args()
    if not args.peer_python.is_file():
        raise SystemExit(f"{args.peer_python} not found: `make venv-peer` installs kokoro-onnx's environment")
    chosen = {name: text for name, text in texts().items() if args.texts is None or name in args.texts}
    report: dict[str, Any] = {"benchmark": "peer_kokoro_onnx", "command": command_line(), "machine": machine()}
    model_dir = env.default_model_dir()
    pythons = {OURS: Path(sys.executable), WHOLE: Path(sys.executable), PEER: args.peer_python}
    workers = [Worker.start(library, python, model_dir, args.threads) for library, python in pythons.items()]
    started, busy_before, own_before = time.perf_counter(), busy_cpu_s(), own_cpu_s()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in chosen}
    try:
        for repeat in range(args.repeats):
            turn = workers[repeat % len(workers) :] + workers[: repeat % len(workers)]
            for name, text in chosen.items():
                for worker in turn:
                    runs[name].setdefault(worker.library, []).append(worker.speak(text))
    finally:
        for worker in workers:
            worker.close()
    results: dict[str, Any] = {}
    for name, by_library in runs.items():
        summaries = {library: summarise(library_runs) for library, library_runs in by_library.items()}
        results[name] = {**summaries, "compared": compared(summaries)}
        print(name, results[name]["compared"], flush=True)
    report["versions"] = {worker.library: worker.versions for worker in workers}
    report["repeats"] = args.repeats
    report["threads"] = args.threads
    report["results"] = results
    # the machine's busy time less this process's and the workers' own: the noise the numbers carry
    workers_cpu_s = sum(run["cpu_s"] for by_library in runs.values() for each in by_library.values() for run in each)
    others_s = (busy_cpu_s() - busy_before) - (own_cpu_s() - own_before) - workers_cpu_s
    report["other_processes_cores"] = round(max(0.0, others_s) / (time.perf_counter() - started), 2)
    write_json(args.out, report)


if __name__ == "__main__":
    main()
