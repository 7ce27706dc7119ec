"""The Gradio streaming client launched on 127.0.0.1 and driven by gradio_client, as another
program would drive it: the real Kokoro server (real model) and the fake vLLM-Omni as upstreams.
The audio is checked where the listener gets it: the HLS playlist Gradio serves, its AAC segments
decoded (PyAV) and, for Kokoro, heard by ASR."""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import av
import httpx
import numpy as np
import pytest
from gradio_client import Client
from gradio_client.client import Job

from tests.support.fake_vllm_omni import FakeVllmOmni, serve_fake
from tests.support.server import LiveServer
from voicestream.devserver import bind_free_port, serve_in_thread, wait_until_ready
from voicestream.integrations.gradio_app import create_app
from voicestream.integrations.speech_stream import UpstreamChoice, upstream_choices

TEXT = "The museum opens at ten in the morning."
METRICS = ("connect_ms", "first_audio_ms", "real_time_factor", "jitter_p50_ms", "jitter_p95_ms", "end_to_end_ms")
BOUND_S = 300.0


@contextlib.contextmanager
def gradio_app(choices: list[UpstreamChoice]) -> Iterator[Client]:
    with serve_in_thread(create_app(choices), "uvicorn-gradio", lifespan="on") as running:
        wait_until_ready(running.url, 60, path="/")
        client = Client(running.url, verbose=False, download_files=False)
        try:
            yield client
        finally:
            client.close()


def run(client: Client, text: str, label: str, voice: str = "", language: str = "English") -> list[Any]:
    return outputs_when_done(client.submit(text, voice, language, label, api_name="/speak"))


def outputs_when_done(job: Job) -> list[Any]:
    job.result(timeout=BOUND_S)
    return list(job.outputs())


def played_audio(outputs: list[Any]) -> np.ndarray:
    """The audio the page plays: Gradio's HLS playlist for this run, every AAC segment decoded."""
    urls = {audio["url"] for audio, *_ in outputs if isinstance(audio, dict) and audio.get("url")}
    assert len(urls) == 1, urls
    (playlist_url,) = urls
    playlist = httpx.get(playlist_url, timeout=30).text
    segments = [line for line in playlist.splitlines() if line and not line.startswith("#")]
    assert segments and "#EXT-X-ENDLIST" in playlist
    base = playlist_url.rsplit("/", 1)[0]
    samples: list[np.ndarray] = []
    for segment in segments:
        data = httpx.get(f"{base}/{segment}", timeout=30).content
        with av.open(io.BytesIO(data), mode="r", format="aac") as container:
            for frame in container.decode(audio=0):
                assert (frame.sample_rate, frame.layout.nb_channels) == (24_000, 1)
                samples.append(frame.to_ndarray()[0])
    return np.concatenate(samples).astype(np.float32)


def final_metrics(outputs: list[Any]) -> dict[str, Any]:
    _audio, metrics, table, status = outputs[-1]
    assert status == metrics["status"]
    rows = {row[0]: row[1] for row in table["data"]}
    assert rows["time to first audio (ms)"] == metrics["first_audio_ms"]  # the panel shows the same numbers
    return dict(metrics)


def test_kokoro_server_audio_and_metrics(kokoro_server: LiveServer, asr: ModuleType) -> None:
    choices = upstream_choices(kokoro_url=kokoro_server.ws_url)
    with gradio_app(choices) as client:
        outputs = run(client, TEXT, choices[0].label, voice="af_heart")
        audio = played_audio(outputs)
    metrics = final_metrics(outputs)
    assert metrics["status"] == "complete"
    assert all(isinstance(metrics[key], float | int) for key in METRICS), metrics
    assert metrics["chunks"] >= 2
    # AAC frames pad the end: the played audio lasts what was received, within a few frames.
    assert len(audio) / 24_000 * 1000 == pytest.approx(metrics["audio_ms"], abs=200)
    heard = asr.transcribe(audio)
    assert asr.word_error_rate(TEXT, heard) <= 0.25, heard


def test_vllm_omni_audio_and_metrics() -> None:
    fake = FakeVllmOmni(realtime_factor=0.3)
    with serve_fake(fake) as (_live, url):
        choices = upstream_choices(vllm_omni_url=url)
        with gradio_app(choices) as client:
            outputs = run(client, TEXT, choices[0].label, voice="ryan", language="German")
            audio = played_audio(outputs)
    metrics = final_metrics(outputs)
    assert metrics["status"] == "complete"
    assert all(isinstance(metrics[key], float | int) for key in METRICS), metrics
    [record] = fake.sessions
    [generation] = record.generations
    assert (generation.text, generation.voice) == (TEXT, "ryan")
    assert metrics["audio_ms"] == pytest.approx(generation.audio_bytes / 48)
    assert len(audio) / 24_000 * 1000 == pytest.approx(metrics["audio_ms"], abs=200)
    assert float(np.sqrt(np.mean(audio**2))) > 0.01  # the fake's tones, not silence


def playing_run(client: Client, label: str) -> Job:
    """A long text's run on `label`, once its first audio has reached the player."""
    job = client.submit("A long answer that takes a while to say. " * 6, "", "English", label, api_name="/speak")
    deadline = time.monotonic() + BOUND_S
    while not any(isinstance(out[0], dict) and out[0].get("url") for out in job.outputs()):
        assert time.monotonic() < deadline and not job.done(), "no audio came"
        time.sleep(0.05)
    return job


def test_cancelling_a_run_stops_the_upstream_work() -> None:
    fake = FakeVllmOmni(realtime_factor=1.0)  # slow enough to be stopped mid-sentence
    with serve_fake(fake) as (_live, url):
        choices = upstream_choices(vllm_omni_url=url)
        with gradio_app(choices) as client:
            job = playing_run(client, choices[0].label)
            assert job.cancel()  # an API client's cancel: Gradio's /cancel for this run
            deadline = time.monotonic() + BOUND_S
            while fake.sessions[0].ended is None:
                assert time.monotonic() < deadline, "the upstream session was not closed"
                time.sleep(0.05)
    [generation] = fake.sessions[0].generations
    assert generation.outcome == "aborted" and fake.sessions[0].ended == "client disconnected"


def test_stop_ends_the_run_with_its_last_status_and_the_upstream_work() -> None:
    """The Stop button's endpoint: the run ends itself, so "stopped" is its last word."""
    fake = FakeVllmOmni(realtime_factor=1.0)  # slow enough to be stopped mid-sentence
    with serve_fake(fake) as (_live, url):
        choices = upstream_choices(vllm_omni_url=url)
        with gradio_app(choices) as client:
            job = playing_run(client, choices[0].label)
            client.predict(api_name="/stop")  # the same client: the same session as the run
            *_, (_audio, metrics, _table, status) = outputs_when_done(job)
    assert status == "stopped" and metrics["status"] == "stopped"
    assert metrics["first_audio_ms"] > 0 and metrics["chunks"] >= 1
    [generation] = fake.sessions[0].generations
    assert generation.outcome == "aborted" and fake.sessions[0].ended == "client disconnected"


def test_the_gradio_command_serves_the_page(tmp_path: Path) -> None:
    """`voicestream gradio --vllm-omni-url URL` as a user runs it; Ctrl-C ends it cleanly."""
    with serve_fake(FakeVllmOmni()) as (_live, url):
        with bind_free_port() as probe:  # closed again at once: free for the command
            port = probe.getsockname()[1]
        process = subprocess.Popen(  # -X faulthandler: SIGABRT prints every thread's stack (a hang's report)
            [sys.executable, "-X", "faulthandler", "-m", "voicestream.cli", "gradio", "--vllm-omni-url", url,
             "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_until_ready(f"http://127.0.0.1:{port}", 120, path="/")
            client = Client(f"http://127.0.0.1:{port}", verbose=False, download_files=False)
            try:
                labels = client.view_api(return_format="dict")["named_endpoints"]["/speak"]["parameters"][3]
                assert url in str(labels)  # the upstream the command was given is the one offered
            finally:
                client.close()
        finally:
            process.send_signal(signal.SIGINT)
            try:
                output, _ = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGABRT)
                output, _ = process.communicate()
                raise AssertionError(f"Ctrl-C did not end the command within 60 s; its threads:\n{output}") from None
    assert process.returncode in (0, 130), output
    assert f"voicestream gradio: http://127.0.0.1:{port}/ (vLLM-Omni server ({url}))" in output
