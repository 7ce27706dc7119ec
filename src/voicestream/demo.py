"""`make demo`: a voice agent's reply spoken two ways, bidi vs batch, on this machine, no cloud.

The 6-sentence agent reply comes from the replay text source at an LLM's pace (first token
after 300 ms, then 50 tokens/s). The speak app (the Lambda function's app) runs under uvicorn
on 127.0.0.1 and talks to a Kokoro server: its own, in-process on a free port with the real
Kokoro-82M on the CPU, unless `kokoro_url` names one. The demo is the speak app's HTTP client
(binary transport), exactly like a voice agent's front end:

- bidi: each sentence goes into the open session the moment the chunker cuts it;
- batch: the whole reply, once written, as one synthesis request (the fair baseline).

It prints a table of the milestones (medians over `repeats` runs per mode, alternating which
goes first) and the ratio of time to first audio, and writes the bidi audio to a WAV file.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from voicestream.devserver import ServerStartError, serve_in_thread, wait_until_ready
from voicestream.engine import Backend
from voicestream.kokoro_server.encoders import write_wav
from voicestream.speak.sources import ReplayPace, word_tokens
from voicestream.speech.websocket import bidi_url, http_base_url
from voicestream.texts import agent_reply
from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.errors import CodedError
from voicestream.wire.speak import Done, Mode, ReplyError, SentenceAudio, SpeakStreamDecoder

PACE = ReplayPace(first_token_s=0.3, tokens_per_s=50.0)
WARM_UP_TEXT = "Hello there. This is a warm-up."
# Anchor: aws-samples/sample-kokoro-tts-for-ai-agents, bidi vs batch time to first audio.
ANCHOR = "anchor: bidi 2.4x faster (local), 3.5x (deployed)"


class DemoError(CodedError):
    """The demo cannot go on; the message says why."""


@dataclass
class Run:
    mode: Mode
    first_audio_ms: float  # at the caller: from sending the request to the first audio byte
    done: Done
    audio: bytes = field(repr=False)


def run_demo(
    out_dir: Path,
    backend: Backend | None = None,
    model_dir: Path | None = None,
    threads: int | None = None,
    kokoro_url: str | None = None,
    repeats: int = 2,
) -> int:
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    text = agent_reply()
    with contextlib.ExitStack() as stack:
        if kokoro_url is None:
            print("starting the local Kokoro server (loading Kokoro-82M on the CPU) ...", flush=True)
            kokoro_http = stack.enter_context(_local_kokoro(backend, model_dir, threads))
            where = f"local server, in-process, at {kokoro_http}"
        else:
            kokoro_http = http_base_url(kokoro_url)
            where = f"given server at {kokoro_http}"
        try:
            wait_until_ready(kokoro_http, 600 if kokoro_url is None else 15)
        except ServerStartError as error:
            print(f"voicestream demo: {error}")
            return 2
        speak_url = stack.enter_context(local_speak_app(bidi_url(kokoro_http)))
        print(f"text source:  replay of the {len(text.split())}-word agent reply, {_describe(PACE, text)}")
        print(f"speech:       Kokoro-82M, {where}")
        print(f"speak app:    POST {speak_url}/speak (binary transport), {repeats} run(s) per mode, medians\n")
        try:
            runs = asyncio.run(measure_runs(speak_url, text, repeats))
        except DemoError as error:
            print(f"voicestream demo: {error}")
            return 1
    bidi = [run for run in runs if run.mode == "bidi"]
    batch = [run for run in runs if run.mode == "batch"]
    _print_table(bidi, batch)
    wav = write_wav(out_dir / "demo_bidi.wav", bidi[-1].audio)
    print(f"\nbidi audio:   {wav.resolve()} ({len(bidi[-1].audio) / (2 * SAMPLE_RATE):.1f} s)")
    return 0


def _describe(pace: ReplayPace, text: str) -> str:
    tokens = len(word_tokens(text))
    return (
        f"first token after {pace.first_token_s * 1000:.0f} ms, then {pace.tokens_per_s:.0f} tokens/s "
        f"({tokens} tokens: the whole text after {pace.due(tokens - 1):.1f} s)"
    )


async def measure_runs(speak_url: str, text: str, repeats: int) -> list[Run]:
    """The demo's measurement (benchmarks/demo_ratio.py runs it too): a warm-up per mode, then
    `repeats` runs per mode, alternating which goes first."""
    pace = {"first_token_ms": PACE.first_token_s * 1000, "tokens_per_s": PACE.tokens_per_s}
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
        for mode in ("bidi", "batch"):  # warm-up: connections, caches, the first-call costs
            await _speak(client, speak_url, mode, WARM_UP_TEXT, {"first_token_ms": 0, "tokens_per_s": 1000})
        runs: list[Run] = []
        for repeat in range(repeats):
            order: tuple[Mode, Mode] = ("bidi", "batch") if repeat % 2 == 0 else ("batch", "bidi")
            for mode in order:
                print(f"  run {repeat + 1}/{repeats}: {mode} ...", end="", flush=True)
                run = await _speak(client, speak_url, mode, text, pace)
                print(f" first audio after {run.first_audio_ms:.0f} ms", flush=True)
                runs.append(run)
        return runs


async def _speak(client: httpx.AsyncClient, url: str, mode: Mode, text: str, pace: dict[str, Any]) -> Run:
    body = {"text": text, "mode": mode, "transport": "binary", "pace": pace}
    decoder = SpeakStreamDecoder("binary")
    audio = bytearray()
    first_audio: float | None = None
    done: Done | None = None
    sent = time.perf_counter()
    async with client.stream("POST", f"{url}/speak", json=body) as response:
        if response.status_code != 200:
            raise DemoError(f"POST /speak answered {response.status_code}: {(await response.aread())[:200]!r}")
        async for chunk in response.aiter_raw():
            for event in decoder.feed(chunk):
                if isinstance(event, SentenceAudio):
                    if first_audio is None:
                        first_audio = time.perf_counter()
                    audio += event.data
                elif isinstance(event, ReplyError):
                    raise DemoError(f"{mode}: {event.code}: {event.message}")
                elif isinstance(event, Done):
                    done = event
    decoder.close()
    if done is None or first_audio is None or done.status != "complete":
        raise DemoError(f"{mode}: the reply did not complete ({done})")
    return Run(mode=mode, first_audio_ms=(first_audio - sent) * 1000, done=done, audio=bytes(audio))


def _median(values: list[float | None]) -> float:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else float("nan")


def _print_table(bidi: list[Run], batch: list[Run]) -> None:
    rows = []
    for name, runs in (("bidi", bidi), ("batch", batch)):
        timings = [run.done.timings for run in runs]
        rows.append(
            (
                name,
                _median([t.first_text_ms for t in timings]),
                _median([t.first_sentence_ms for t in timings]),
                _median([t.first_audio_ms for t in timings]),
                _median([run.first_audio_ms for run in runs]),
                _median([t.total_ms for t in timings]) / 1000,
                _median([run.done.audio_ms for run in runs]) / 1000,
            )
        )
    print(
        f"\n{'':8}{'first text':>12}{'first sentence':>16}{'first audio':>13}{'at caller':>11}"
        f"{'reply done':>12}{'audio':>9}"
    )
    for name, text_ms, sentence_ms, audio_ms, caller_ms, total_s, audio_s in rows:
        print(
            f"{name:8}{text_ms:>9.0f} ms{sentence_ms:>13.0f} ms{audio_ms:>10.0f} ms{caller_ms:>8.0f} ms"
            f"{total_s:>10.1f} s{audio_s:>7.1f} s"
        )
    bidi_ms, batch_ms = rows[0][4], rows[1][4]
    print(
        f"\ntime to first audio at the caller: bidi {bidi_ms:.0f} ms, batch {batch_ms:.0f} ms: "
        f"bidi is {batch_ms / bidi_ms:.1f}x faster ({ANCHOR})"
    )
    print("(first text/sentence/audio: the speak function's clock from agent_start; at caller: from the POST)")


# --- the local servers ----------------------------------------------------------------------------


@contextlib.contextmanager
def _local_kokoro(backend: Backend | None, model_dir: Path | None, threads: int | None) -> Iterator[str]:
    from voicestream.kokoro_server import create_app, engine_factory, settings_with
    from voicestream.wire.bidi import Limits

    settings = settings_with(backend=backend, model_dir=model_dir, threads=threads)
    app = create_app(engine_factory(settings), Limits(), synth_workers=settings.synth_workers)
    with serve_in_thread(app, "Kokoro server") as server:
        yield server.url


@contextlib.contextmanager
def local_speak_app(kokoro_ws_url: str) -> Iterator[str]:
    """The speak app on a free port of 127.0.0.1, talking to the Kokoro server at `kokoro_ws_url`."""
    from voicestream.speak.app import create_app
    from voicestream.speak.config import SpeakConfig

    # Logs and EMF metrics would land in the demo's table on stdout: keep them out.
    config = SpeakConfig(kokoro_ws_url=kokoro_ws_url, service="voicestream-demo")
    with serve_in_thread(create_app(config, log_stream=io.StringIO(), metrics=False), "speak app") as server:
        yield server.url
