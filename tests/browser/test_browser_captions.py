"""Live captions in a real headless Chromium: the page shows the words the server timed and
highlights the one being heard as the AudioWorklet plays; at Stop it knows which words were
heard. The local stack runs the tone engine, which times words (15 ms per character) like a
duration predictor, so every word's time is known to the test; the ONNX engine's own word
timings are tested against the model in tests/integration/test_engine_word_timings.py. Waits
are for states."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import LocalStack
from tests.browser.driver import Browser
from tests.support.fakes import ToneEngine
from voicestream.devserver import bind_free_port, serve_in_thread, wait_until_ready
from voicestream.local_stack import create_local_app, kokoro_ws_url
from voicestream.speak.config import SpeakConfig
from voicestream.wire.bidi import Limits

MS_PER_CHAR = 15
TEXT = "Captions follow the voice. Each word lights up as it is heard, one after another."
LONG = " ".join(f"Sentence {n} keeps the listener waiting for the next one." for n in range(10))
STATS = "window.voicestream.stats"
FINISHED = f"['complete', 'error', 'cancelled'].includes({STATS}.state)"


@pytest.fixture(scope="module")
def tone_stack() -> Iterator[LocalStack]:
    listener = bind_free_port()
    port = listener.getsockname()[1]
    engine = ToneEngine(ms_per_char=MS_PER_CHAR, chunk_ms=80, words=True)
    app = create_local_app(
        engine, speak_config=SpeakConfig(kokoro_ws_url=kokoro_ws_url("127.0.0.1", port)), limits=Limits()
    )
    with serve_in_thread(app, "uvicorn-tone-stack", listener=listener, lifespan="on") as running:
        wait_until_ready(running.url, 60)
        yield LocalStack(url=running.url, runtime=app.state.runtime)


def speak(browser: Browser, stack: LocalStack, text: str) -> None:
    query = urlencode({"text": text, "transport": "sse", "format": "pcm"})
    assert browser.goto(f"{stack.url}/?{query}") == 200
    browser.wait("document.body.dataset.voices !== undefined")
    browser.click("#speak")


def test_captions_highlight_the_word_being_heard(tone_stack: LocalStack, browser: Browser, artifacts: Path) -> None:
    speak(browser, tone_stack, TEXT)
    browser.wait("window.voicestream.captions().current >= 6", timeout_s=120)
    browser.screenshot(artifacts / "captions.png")  # mid-reply: a word highlighted, the rest to come
    browser.wait(FINISHED, timeout_s=120)
    assert browser.eval(STATS)["state"] == "complete"
    captions = browser.eval("window.voicestream.captions()")
    words = captions["words"]
    assert [w["word"] for w in words] == TEXT.split()
    assert browser.eval("document.getElementById('captions').textContent") == TEXT
    # The words sit where the server timed them on the reply's timeline.
    assert words[0]["start_s"] == 0 and all(a["start_s"] < b["start_s"] for a, b in itertools.pairwise(words))
    second = TEXT.index("Each")
    assert words[4]["start_s"] == pytest.approx(second * MS_PER_CHAR / 1000 - MS_PER_CHAR / 1000, abs=0.05)
    # The highlight moved with playback: word by word, each time at a position inside that
    # word's span (the worklet reports every 50 ms; words last 100 ms or more).
    log = captions["log"]
    indexes = [entry["index"] for entry in log]
    assert indexes == sorted(indexes) and indexes[-1] == len(words) - 1
    assert len(set(indexes)) >= len(words) * 2 // 3, indexes
    for entry in log:
        word = words[entry["index"]]
        following = words[entry["index"] + 1]["start_s"] if entry["index"] + 1 < len(words) else float("inf")
        assert word["start_s"] <= entry["position_s"] < following + 0.1, (entry, word)
    current = browser.eval("document.querySelector('.caption-word[aria-current=true]').textContent")
    assert current == TEXT.split()[-1]
    assert browser.problems() == []


def test_stop_tells_which_words_were_heard(tone_stack: LocalStack, browser: Browser) -> None:
    speak(browser, tone_stack, LONG)
    browser.wait(f"{STATS}.samplesPlayed > 24000", timeout_s=120)  # a second of it was heard
    browser.click("#stop")
    browser.wait(FINISHED, timeout_s=30)
    stats = browser.eval(STATS)
    assert stats["state"] == "cancelled"
    played_s = stats["samplesPlayedAtStop"] / 24_000
    heard = stats["wordsHeardAtStop"]
    words = browser.eval("window.voicestream.captions()")["words"]
    assert 0 < len(heard) < len(LONG.split())
    assert [w["word"] for w in heard] == [w["word"] for w in words if w["start_s"] < played_s]
    assert all(w["complete"] == (w["end_s"] <= played_s) for w in heard)
    assert re.fullmatch(r"[\w.]+", heard[-1]["word"])
    assert browser.problems() == []
    tone_stack.until_idle()
