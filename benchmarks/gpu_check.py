"""The prepared GPU check: the torch engine's first audio, throughput and session capacity, one command.

Built for a lent GPU machine (docs/engine.md, "The prepared GPU check"): nothing can be downloaded
there and only the working tree travels (64 MiB), so neither the int8 export nor the 327 MB
weights do, nor misaki and spaCy (over 100 MiB of wheels). `prepare` (here) copies what is small
and real, config.json and one voice, into a directory that travels, with the phonemes of every
sentence the check speaks (phonemes.json, converted by the real G2P: engine/text/phoneme_table.py);
`run` (there) gives the engine that table in place of G2P and builds the real KModel architecture from it with random
weights whose durations and pitch are calibrated (tests/support/checkpoint.py): compute per
frame is the real model's, and speed does not depend on the weights' values. It measures, on
`--device`:

- first audio of one sentence of 5, 15, 30 and 50 words (first_audio_length.py's sentences
  and timing), and the throughput of those runs: RTF (wall) and compute (CPU) seconds per audio second;
- the in-process server (common.py) at 1, 2, 4, 8, ... simultaneous sessions, each speaking one
  sentence: first audio p50/p95 per level; the capacity is the largest level whose p95 stays
  within `--target-ms` (300 ms).
- the decoder alone, ms per generator frame over windows of 44, 100 and 176 frames, with the
  generator's fused blocks (engine/torch/fused.py, as the engine ships) and kokoro's own
  (`fused=False`): on a CPU fused is ~1.6x faster (benchmarks/torch_fused.py); on a GPU it
  launches other kernels, and this says whether it helps there too.

It writes benchmarks/results/gpu_check.json with the machine record and the torch device.

    PYTHONPATH=src:. .venv-torch/bin/python benchmarks/gpu_check.py prepare --wheels  # [--out .gpu-check-model]
    # there: pip install --no-index --no-deps --target /tmp/gpu-check-site .gpu-check-model/wheels/*.whl
    PYTHONPATH=src:.:/tmp/gpu-check-site python benchmarks/gpu_check.py run --device cuda
    PYTHONPATH=src:. python benchmarks/gpu_check.py run --device cpu --quick   # here, < 2 min
"""

from __future__ import annotations

# First, before torch loads: the engine's OpenMP threads sleep when idle (engine/torch/__init__.py).
import voicestream.engine.torch  # noqa: F401

# isort: split
import argparse
import asyncio
import importlib.metadata
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from tests.support.checkpoint import build_model_dir

from common import (
    RESULTS,
    ROOT,
    TimedEngine,
    command_line,
    kokoro_server,
    machine,
    run_session,
    write_json,
)
from first_audio_length import LENGTHS, sentence, summarise, timed
from torch_fused import decoder_speeds, encoded
from voicestream.chunker import split_sentences
from voicestream.engine.base import check_text
from voicestream.engine.models.torch_assets import CONFIG_FILE
from voicestream.engine.text.frontend import TextFrontend
from voicestream.engine.text.g2p import G2P
from voicestream.engine.text.phoneme_table import PhonemeTable, Recording
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.split import TorchSplitRuntime
from voicestream.env import default_model_dir
from voicestream.kokoro_server.runtime import SPEED_CHECK_TEXT
from voicestream.kokoro_server.runtime import WARM_UP_TEXT as SERVER_WARM_UP_TEXT
from voicestream.stats import percentile
from voicestream.wire.bidi import Limits
from voicestream.wire.voices import OFFICIAL_VOICES

VOICE = "af_heart"
PREPARED = ROOT / ".gpu-check-model"  # git-ignored: pass it in the device run's `carry`
TARGET_MS = 300.0
SESSION_WORDS = 15  # what each simultaneous session speaks: one sentence of this many words
QUICK_SESSION_WORDS = 5  # --quick: the shortest sentence (a level then takes seconds, not tens)
PHONEMES_FILE = "phonemes.json"
# What `run` imports beyond the GPU image's torch, numpy, onnx, onnxruntime and their dependencies
# (python -X importtime on a quick run): KModel's transformers/ALBERT stack and the server's. misaki,
# spaCy and phonemizer are not among them (phonemes.json). Python 3.12 wheels: 25.1 MiB.
CARRIED = (
    "kokoro", "loguru", "transformers", "tokenizers", "safetensors", "huggingface_hub", "kernels", "regex",
    "PyYAML", "tqdm", "rich", "Pygments", "markdown-it-py", "mdurl", "attrs", "starlette", "uvicorn", "click",
    "h11", "websockets", "httpx", "httpcore", "httpcore2", "httpx2", "anyio", "idna", "certifi", "truststore",
    "Pebble", "soxr",
)  # fmt: skip
WHEEL_TARGET = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312")
WHEEL_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
ENGINE_WARM_UP_TEXT = "Hello."  # what TorchEngine.load speaks to warm up
QUICK_LENGTHS = LENGTHS[:2]  # --quick: first audio of the two shortest sentences (the CPU test's minutes)


def spoken_texts() -> list[str]:
    """Every text the run's engine is asked to phonemize: each sentence as the server cuts a
    request (split_sentences) and as the engine receives it (check_text), and the warm-ups."""
    warm_ups = [ENGINE_WARM_UP_TEXT, SERVER_WARM_UP_TEXT, SPEED_CHECK_TEXT]
    requests = [*warm_ups, *(sentence(words) for words in (*LENGTHS, SESSION_WORDS, QUICK_SESSION_WORDS))]
    return sorted({check_text(part) for text in requests for part in split_sentences(text) or [text]})


def prepare(source: Path, out: Path) -> Path:
    """config.json and the voice's raw .bin (about 0.5 MB) from the real model directory, and
    the phoneme table of every text the run speaks (a few KB)."""
    (out / "voices").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / CONFIG_FILE, out / CONFIG_FILE)
    shutil.copyfile(source / "voices" / f"{VOICE}.bin", out / "voices" / f"{VOICE}.bin")
    # The real front end asks the real G2P for each text, as the engine's will: what it asked is the table.
    recording = Recording(G2P())
    frontend = TextFrontend(OFFICIAL_VOICES, source=recording)
    try:
        frontend.count(spoken_texts(), VOICE)
    finally:
        frontend.close()
    recording.table().save(out / PHONEMES_FILE)
    return out


def download_wheels(out: Path) -> int:
    """The CARRIED distributions, at this environment's versions, as Python 3.12 manylinux wheels
    (pip's own client), for `pip install --no-index --no-deps --target` there; their bytes."""
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in CARRIED]
    platforms = [option for platform in WHEEL_PLATFORMS for option in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*command, *WHEEL_TARGET, *platforms, "--dest", str(out), *pins], check=True)
    return sum(path.stat().st_size for path in out.glob("*.whl"))


def device_record(device: str) -> dict[str, Any]:
    """torch's view of the device measured on (the CPU's own record is machine()'s)."""
    record: dict[str, Any] = {
        "requested": device,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        record.update(
            name=props.name, memory_gib=round(props.total_memory / 2**30, 1), capability=f"{props.major}.{props.minor}"
        )
    else:
        record["name"] = "cpu"
    return record


def first_audio(engine: TorchEngine, repeats: int, lengths: tuple[int, ...]) -> dict[str, Any]:
    runs: dict[int, list[dict[str, float]]] = {words: [] for words in lengths}
    for _ in range(repeats):
        for words in lengths:
            runs[words].append(timed(engine, sentence(words)))
    result = summarise(runs)
    return {
        "first_audio_ms_p50": {words: row["first_audio_ms_p50"] for words, row in result["by_words"].items()},
        "by_words": result["by_words"],
        "first_audio_long_over_short": result["first_audio_long_over_short"],
        "throughput": {"rtf": result["rtf_overall"], "compute_s_per_audio_s": result["cpu_s_per_audio_s"]},
    }


async def level(ws_url: str, sessions: int, words: int) -> dict[str, Any]:
    """`sessions` sessions at once, each speaking one sentence of `words` words; first audio counts
    from its send."""
    started = time.perf_counter()
    records = await asyncio.gather(*(run_session(ws_url, [sentence(words)]) for _ in range(sessions)))
    wall_s = time.perf_counter() - started
    firsts = [r.first_audio_s * 1000 for r in records if r.first_audio_s is not None]
    errors = [code for r in records for code in r.errors]
    audio_s = sum(r.audio_s for r in records)
    return {
        "sessions": sessions,
        "first_audio_ms_p50": round(statistics.median(firsts), 1) if firsts else None,
        "first_audio_ms_p95": round(percentile(firsts, 95), 1) if firsts else None,
        "audio_s_per_wall_s": round(audio_s / wall_s, 2),
        "errors": errors,
        "answered": len(firsts),
    }


def capacity(engine: TorchEngine, max_sessions: int, target_ms: float, words: int) -> dict[str, Any]:
    """Double the simultaneous sessions until a level's p95 first audio passes `target_ms` (or
    fails) or `max_sessions` is reached; the capacity is the last level that held."""
    limits = Limits(max_sessions=max_sessions, max_g2p_queue=max(32, max_sessions))
    levels: list[dict[str, Any]] = []
    held = 0
    with kokoro_server(engine=TimedEngine(engine), limits=limits) as server:
        sessions = 1
        while sessions <= max_sessions:
            row = asyncio.run(level(server.ws_url, sessions, words))
            levels.append(row)
            p95 = row["first_audio_ms_p95"]
            if row["errors"] or row["answered"] < sessions or p95 is None or p95 > target_ms:
                break
            held = sessions
            sessions *= 2
    return {"target_first_audio_ms_p95": target_ms, "session_words": words, "sessions_held": held, "levels": levels}


def decoder(engine: TorchEngine, repeats: int, warm_up: bool) -> dict[str, Any]:
    """ms per generator frame of the fused and kokoro's own generator blocks over the same model
    (a 50-word sentence's encoding), and fused's speed-up."""
    runtimes = {"fused": engine.split, "kokoro modules": TorchSplitRuntime(engine.split.model, fused=False)}
    with torch.inference_mode():
        features = encoded(engine, sentence(50))
    speeds = decoder_speeds(runtimes, features, repeats, warm_up=warm_up)
    return {
        "ms_per_frame": speeds,
        "fused_speedup": {
            span: round(speeds["kokoro modules"][span] / speeds["fused"][span], 2) for span in speeds["fused"]
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.time()
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    max_sessions = args.max_sessions if args.max_sessions is not None else (2 if args.quick else 128)
    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    with tempfile.TemporaryDirectory(prefix="voicestream-gpu-check-") as scratch:
        built = time.perf_counter()
        model_dir = build_model_dir(args.model_dir, Path(scratch), (VOICE,))
        phonemes = PhonemeTable.load(args.model_dir / PHONEMES_FILE)
        engine = TorchEngine(model_dir, device=args.device, threads=args.threads, phonemes=phonemes)
        engine.load()  # warms G2P, the voice and the first kernels
        setup_s = time.perf_counter() - built
        try:
            if not args.quick:
                timed(engine, sentence(5))  # warm-up beyond load: allocator and kernels at a second shape
            measured = first_audio(engine, repeats, lengths)
            session_words = QUICK_SESSION_WORDS if args.quick else SESSION_WORDS
            sessions = capacity(engine, max_sessions, args.target_ms, session_words)
            # --quick checks the code path: its single run need not wait for warm kernels.
            decoding = decoder(engine, repeats, warm_up=not args.quick)
        finally:
            engine.close()
    report: dict[str, Any] = {
        "benchmark": "gpu_check",
        "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "quick": args.quick,
        "weights": "random, real architecture, calibrated durations and pitch (tests/support/checkpoint.py)",
        "repeats": repeats,
        "setup_s": round(setup_s, 1),
        "sentences": {str(words): sentence(words) for words in lengths},
        "first_audio": measured,
        "throughput": measured.pop("throughput"),
        "concurrency": sessions,
        "decoder": decoding,
        "device": device_record(engine.device or args.device),
        "machine": machine(calibrate=False),
    }
    return report


def finite(report: dict[str, Any]) -> bool:
    """Every measured number is a finite float (what the test checks, and what a run prints)."""
    numbers = [*report["first_audio"]["first_audio_ms_p50"].values(), *report["throughput"].values()]
    numbers += [row["first_audio_ms_p95"] for row in report["concurrency"]["levels"]]
    numbers += [ms for runtime in report["decoder"]["ms_per_frame"].values() for ms in runtime.values()]
    return all(isinstance(n, int | float) and math.isfinite(n) for n in numbers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="copy config.json and a voice into a directory that travels")
    prep.add_argument("--source", type=Path, default=None, help="the real model directory (default: the cache)")
    prep.add_argument("--out", type=Path, default=PREPARED)
    prep.add_argument("--wheels", action="store_true", help="also download the CARRIED wheels into OUT/wheels")
    go = commands.add_parser("run", help="measure on --device and write the JSON")
    go.add_argument("--device", default="cuda")
    go.add_argument(
        "--quick", action="store_true", help="tiny counts and the two shortest sentences: checks the code path only"
    )
    go.add_argument(
        "--model-dir", type=Path, default=PREPARED, help=f"the prepared directory (default: {PREPARED.name})"
    )
    go.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    go.add_argument("--repeats", type=int, default=None, help="runs per sentence length (default 5, quick 1)")
    go.add_argument("--max-sessions", type=int, default=None, help="stop doubling here (default 128, quick 2)")
    go.add_argument("--target-ms", type=float, default=TARGET_MS)
    go.add_argument("--out", type=Path, default=RESULTS / "gpu_check.json")
    args = parser.parse_args()
    if args.command == "prepare":
        print(prepare(args.source or default_model_dir(), args.out))
        if args.wheels:
            print(f"wheels: {download_wheels(args.out / 'wheels') / 2**20:.1f} MiB in {args.out / 'wheels'}")
        return
    report = run(args)
    write_json(args.out, report)
    levels = {row["sessions"]: row["first_audio_ms_p95"] for row in report["concurrency"]["levels"]}
    print(
        f"{report['device']['name']}: first audio p50 {report['first_audio']['first_audio_ms_p50']} ms; "
        f"RTF {report['throughput']['rtf']}; p95 first audio by sessions {levels} ms; "
        f"sessions held at {args.target_ms:.0f} ms: {report['concurrency']['sessions_held']}; "
        f"decoder fused speed-up by window frames {report['decoder']['fused_speedup']}; "
        f"all finite: {finite(report)}"
    )


if __name__ == "__main__":
    main()
