"""The Gradio streaming client's page in a real headless Chromium: Speak fills the metrics panel
(real Kokoro server behind it), Stop ends the run and the upstream work (the fake vLLM-Omni,
slowed down, records that its generation was aborted). Waits are for states, not durations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.driver import Browser
from tests.support.fake_vllm_omni import FakeVllmOmni, serve_fake
from tests.support.server import LiveServer
from voicestream.devserver import serve_in_thread, wait_until_ready
from voicestream.integrations.gradio_app import METRIC_LABELS, create_app
from voicestream.integrations.speech_stream import upstream_choices

STATUS = "(document.querySelector('#status textarea, #status input') || {}).value"
METRICS_TEXT = "(document.querySelector('#metrics') || {}).innerText || ''"
AUDIO_SOURCE = "document.querySelector('#audio audio')?.src || ''"
BUFFERED_S = (
    "(() => { const a = document.querySelector('#audio audio');"
    " return a && a.buffered.length ? a.buffered.end(a.buffered.length - 1) : 0; })()"
)
# Gradio's player (hls.js) loads the stream's playlist as soon as the first chunk is out. When
# Gradio's encoder (an ffmpeg process it gives 0.1 s to start) has no frame by then, as on a slow
# or loaded host, the playlist is still empty: hls.js reports a fatal levelEmptyError, Gradio logs
# that it is recovering and reloads the playlist. Those two lines, and only those, are Gradio's
# own; the test then requires the recovered player to have buffered the audio.
RECOVERED_EMPTY_PLAYLIST = ("details: levelEmptyError", "Fatal network error encountered, trying to recover")


@pytest.fixture(scope="module")
def fake_vllm_omni() -> Iterator[tuple[FakeVllmOmni, str]]:
    fake = FakeVllmOmni(realtime_factor=1.0)  # one second of work per second of audio: time to press Stop
    with serve_fake(fake) as (_live, url):
        yield fake, url


@pytest.fixture(scope="module")
def gradio_url(kokoro_server: LiveServer, fake_vllm_omni: tuple[FakeVllmOmni, str]) -> Iterator[str]:
    choices = upstream_choices(kokoro_url=kokoro_server.ws_url, vllm_omni_url=fake_vllm_omni[1])
    with serve_in_thread(create_app(choices), "uvicorn-gradio", lifespan="on") as running:
        wait_until_ready(running.url, 60, path="/")
        yield running.url


def open_page(browser: Browser, url: str) -> None:
    assert browser.goto(url) == 200
    browser.wait("document.querySelector('#speak') !== null && document.querySelector('#metrics') !== null")


def test_speak_shows_the_metrics_of_the_run(browser: Browser, gradio_url: str, artifacts: Path) -> None:
    open_page(browser, gradio_url)
    browser.fill("#text textarea", "Hello from the Gradio client.")
    browser.click("#speak")
    browser.wait(f"{STATUS} === 'complete'", timeout_s=180)
    rows = metric_rows(browser)
    assert set(rows) == set(METRIC_LABELS.values()), rows
    assert rows["status"] == "complete" and int(rows["chunks received"]) >= 2
    for label in ("connection (ms)", "time to first audio (ms)", "real-time factor", "end to end (ms)"):
        assert float(rows[label]) > 0, (label, rows)
    assert float(rows["inter-chunk jitter p95 (ms)"]) >= float(rows["inter-chunk jitter p50 (ms)"]) >= 0
    assert browser.eval(AUDIO_SOURCE), "the audio player got no stream"
    browser.wait(f"{BUFFERED_S} >= 1.0", timeout_s=60)  # the sentence's audio, in the player's buffer
    browser.screenshot(artifacts / "gradio-complete.png")
    assert page_problems(browser) == []


def test_stop_ends_the_run_and_the_upstream_work(
    browser: Browser, gradio_url: str, fake_vllm_omni: tuple[FakeVllmOmni, str], artifacts: Path
) -> None:
    fake, _url = fake_vllm_omni
    before = len(fake.sessions)
    open_page(browser, gradio_url)
    browser.fill("#text textarea", "A long answer that takes a while to say, sentence after sentence. " * 4)
    _choose(browser, "vLLM-Omni server")
    browser.click("#speak")
    browser.wait(f"{STATUS} === 'running' && /chunks received\\s+[1-9]/.test({METRICS_TEXT})", timeout_s=120)
    browser.click("#stop")
    browser.wait(f"{STATUS} === 'stopped'", timeout_s=60)
    deadline = time.monotonic() + 60
    while len(fake.sessions) <= before or fake.sessions[before].ended is None:
        assert time.monotonic() < deadline, "the upstream session was not closed"
        time.sleep(0.05)
    [generation] = fake.sessions[before].generations
    assert generation.outcome == "aborted"  # the server stopped generating mid-utterance
    assert browser.eval(STATUS) == "stopped"  # the run's last word: nothing late writes over it
    assert metric_rows(browser)["status"] == "stopped"
    browser.screenshot(artifacts / "gradio-stopped.png")
    assert page_problems(browser) == []


def page_problems(browser: Browser) -> list[str]:
    """The page's errors, less Gradio's recovered empty playlist (RECOVERED_EMPTY_PLAYLIST)."""
    return [problem for problem in browser.problems() if not any(mark in problem for mark in RECOVERED_EMPTY_PLAYLIST)]


def _choose(browser: Browser, label_start: str) -> None:
    """Pick an upstream in Gradio's dropdown: open it, click the option whose label starts so."""
    browser.click("#upstream input")
    browser.wait("document.querySelectorAll('#upstream [role=option], [role=option]').length > 0")
    browser.click(f"[role=option][aria-label^='{label_start}']")
    browser.wait(f"document.querySelector('#upstream input').value.startsWith('{label_start}')")


def metric_rows(browser: Browser) -> dict[str, str]:
    """The metrics panel as the page shows it: each label, then its value on the next line."""
    lines = [line.strip() for line in str(browser.eval(METRICS_TEXT)).splitlines() if line.strip()]
    return {label: lines[lines.index(label) + 1] for label in METRIC_LABELS.values() if label in lines}
