"""One speech library in a process of its own, timed text by text, for peer_kokoro_onnx.py.

    <python> benchmarks/peer_worker.py voicestream|voicestream-whole|kokoro-onnx --model-dir DIR [--threads 2]

`voicestream` is our ONNX engine as the server runs it (each text cut into sentences as the
server cuts a request, spoken in turn to one listener); `voicestream-whole` the same engine
decoding every sentence whole; `kokoro-onnx` the library a user would otherwise pick, as its
README shows it (`Kokoro.create_stream` over the whole text), on the same int8 file, vocabulary
and voice. kokoro-onnx installs another distribution of the `phonemizer` module than ours, so it
runs from its own environment (.venv-peer), which has neither voicestream nor this directory's
common.py: this file imports only the standard library at the top, and each side's library
inside its own function.

Protocol, one JSON object per line: after loading and one warm-up text, the worker prints
{"ready": true, "versions": {...}} (its library's and onnxruntime's); then for each
{"text": ...} read from stdin it prints {"ready_s": [...], "audio_s": [...], "cpu_s": ...}: when
each chunk was ready (seconds after the call) and its audio length, and the CPU seconds this
process and its children (our G2P worker processes) spent meanwhile. Errors go to stderr and end
the worker with a non-zero status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path

VOICE = "af_heart"
SAMPLE_RATE = 24_000
WARM_UP = "Thanks for calling, I can help you change your booking to Friday morning."

# A text's audio, chunk by chunk as the library yields it: each chunk's number of samples.
Speak = Callable[[str], Iterator[int]]
# A library loaded: how it speaks, and how it is closed (our engine's G2P worker processes).
Speaker = tuple[Speak, Callable[[], None]]


def process_tree_cpu_s() -> float:
    """CPU seconds of this process and its live children, from /proc (the children are our
    engine's G2P worker processes, whose time RUSAGE_CHILDREN would count only once they exit)."""
    tick = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the command name (field 2) may hold spaces: split after its closing parenthesis
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        pid, parent = int(entry.name), int(fields[1])
        if pid == me or parent == me:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def voicestream_speaker(model_dir: Path, threads: int, *, whole: bool) -> Speaker:
    from voicestream.chunker import split_sentences
    from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy
    from voicestream.engine.streaming.listener import Listener

    strategy = OnnxStrategy(decoder_windows=None) if whole else OnnxStrategy()
    engine = OnnxEngine(model_dir, threads, strategy=strategy)
    engine.load()

    def speak(text: str) -> Iterator[int]:
        listener = Listener()  # one request: its sentences to one listener, as the server speaks it
        for sentence in split_sentences(text):
            for chunk in engine.synthesize(sentence, VOICE, listener=listener):
                yield len(chunk.samples)

    return speak, engine.close


def kokoro_onnx_speaker(model_dir: Path, threads: int) -> Speaker:
    import asyncio

    import numpy as np
    import onnxruntime as ort
    from kokoro_onnx import Kokoro

    # kokoro-onnx reads voices from one .npz of (510, 1, 256) tables; ours are the raw float32 tables
    table = np.fromfile(model_dir / "voices" / f"{VOICE}.bin", dtype=np.float32).reshape(510, 1, 256)
    voices = Path(tempfile.mkdtemp(prefix="peer-voices-")) / "voices.npz"
    np.savez(voices, af_heart=table)  # keyed by VOICE
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # as ours; otherwise onnxruntime's default
    session = ort.InferenceSession(
        str(model_dir / "kokoro-v1.0.int8.onnx"), options, providers=["CPUExecutionProvider"]
    )
    kokoro = Kokoro.from_session(session, str(voices), vocab_config=str(model_dir / "config.json"))

    loop = asyncio.new_event_loop()  # create_stream is async: its chunks are awaited one by one

    def speak(text: str) -> Iterator[int]:
        stream = kokoro.create_stream(text, voice=VOICE, lang="en-us")
        try:
            while True:
                try:
                    samples, _rate = loop.run_until_complete(anext(stream))
                except StopAsyncIteration:
                    return
                yield len(samples)
        finally:
            loop.run_until_complete(stream.aclose())

    return speak, loop.close


def timed(speak: Speak, text: str) -> dict[str, object]:
    cpu_before = process_tree_cpu_s()
    started = time.perf_counter()
    ready_s: list[float] = []
    audio_s: list[float] = []
    for samples in speak(text):
        ready_s.append(time.perf_counter() - started)
        audio_s.append(samples / SAMPLE_RATE)
    return {"ready_s": ready_s, "audio_s": audio_s, "cpu_s": process_tree_cpu_s() - cpu_before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library", choices=["voicestream", "voicestream-whole", "kokoro-onnx"])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.library == "kokoro-onnx":
        speak, close = kokoro_onnx_speaker(args.model_dir, args.threads)
    else:
        speak, close = voicestream_speaker(args.model_dir, args.threads, whole=args.library == "voicestream-whole")
    try:
        timed(speak, WARM_UP)
        distribution = "kokoro-onnx" if args.library == "kokoro-onnx" else "voicestream"
        versions = {name: metadata.version(name) for name in (distribution, "onnxruntime")}
        print(json.dumps({"ready": True, "versions": versions}), flush=True)
        for line in sys.stdin:  # until the benchmark closes stdin
            print(json.dumps(timed(speak, json.loads(line)["text"])), flush=True)
    finally:
        close()


if __name__ == "__main__":
    main()
