"""The G2P worker pool: conversions side by side, a runaway one stopped and its worker replaced,
results cached. Real worker processes, with a test phonemizer instead of misaki."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.g2p_builders import FOREVER, SLOW_BUILD_S, build_echo, build_slow_others, hold
from voicestream.engine.base import TextTooComplexError, UnsupportedLanguageError
from voicestream.engine.text.g2p import G2P, G2PSettings

WAIT_S = 60.0  # how long a test waits for an answer before it calls the answer lost


@pytest.fixture(scope="module")
def g2p() -> Iterator[G2P]:
    pool = G2P(G2PSettings(workers=2, timeout_s=30), build=build_echo)
    pool.warm()
    yield pool
    pool.close()


def test_a_held_conversion_does_not_hold_up_another(g2p: G2P, tmp_path: Path) -> None:
    """With one lock around one G2P (before), the second text waited for the first: forever here."""
    release = tmp_path / "release"
    with ThreadPoolExecutor(2) as threads:
        held = threads.submit(g2p.phonemize, hold(release), "en-us")
        other = threads.submit(g2p.phonemize, "hello", "en-us")
        assert other.result(WAIT_S).startswith("hello|")
        assert not held.done()  # the order is the point: "hello" finished while the other was held
        release.touch()
        assert held.result(WAIT_S).startswith(hold(release))


def test_a_runaway_conversion_is_stopped_and_the_pool_goes_on() -> None:
    pool = G2P(G2PSettings(workers=1, timeout_s=0.5), build=build_echo)
    try:
        with pytest.raises(TextTooComplexError, match=r"longer than 0\.5 s") as caught:
            pool.phonemize(FOREVER, "en-us")
        assert caught.value.code == "text_too_complex" and caught.value.status == 413
        # Its only worker was killed; a new one answers.
        assert pool.phonemize("after", "en-us").startswith("after|")
    finally:
        pool.close()


def test_building_a_language_in_a_worker_is_not_counted_against_the_text() -> None:
    """A language built on its first request (Japanese, Mandarin) may take longer than the
    timeout on a loaded machine; its text is not too complex for that. Once built, the timeout
    holds for its texts as for English."""
    timeout_s = SLOW_BUILD_S / 3
    pool = G2P(G2PSettings(workers=1, timeout_s=timeout_s), build=build_slow_others)
    try:
        assert pool.phonemize("konnichiwa", "ja").startswith("konnichiwa|")
        with pytest.raises(TextTooComplexError, match=rf"longer than {timeout_s:g} s"):
            pool.phonemize(FOREVER, "ja")
    finally:
        pool.close()


def test_results_are_cached_per_text_and_language(g2p: G2P) -> None:
    first = g2p.phonemize("cache me", "en-us")
    assert g2p.phonemize("cache me", "en-us") == first  # the worker's call counter did not move
    assert g2p.phonemize("cache me", "en-gb") != first


def test_many_texts_are_one_task_in_order(g2p: G2P) -> None:
    texts = ["one", "two", "one", "three"]
    answers = [phonemes.text for phonemes in g2p.phonemize_many(texts, "en-us")]
    assert [answer.split("|")[0] for answer in answers] == texts
    assert answers[0] == answers[2]
    pids = {answer.split("|")[1] for answer in answers}
    assert len(pids) == 1  # one worker converted the whole request


def test_an_unsupported_language_is_refused_without_a_worker() -> None:
    pool = G2P()  # misaki's builder: nothing starts for a language it cannot speak
    with pytest.raises(UnsupportedLanguageError, match="'ko'"):  # misaki has Korean; Kokoro v1.0 does not
        pool.phonemize("안녕하세요", "ko")
    pool.close()


@pytest.mark.parametrize(("workers", "timeout_s"), [(0, 1.0), (1, 0.0), (1, -2.0)])
def test_settings_are_checked(workers: int, timeout_s: float) -> None:
    with pytest.raises(ValueError):
        G2PSettings(workers=workers, timeout_s=timeout_s)


def test_a_pool_never_closed_stops_quietly_when_the_interpreter_exits() -> None:
    """Its finalizer then runs after threading's shutdown, when no thread can start: it used to
    fail there with "can't create new thread at interpreter shutdown" and leak the workers."""
    program = (
        "from tests.support.g2p_builders import build_echo\n"
        "from voicestream.engine.text.g2p import G2P, G2PSettings\n"
        "if __name__ == '__main__':\n"
        "    pool = G2P(G2PSettings(workers=1, timeout_s=30), build=build_echo)\n"
        "    assert pool.phonemize('hello', 'en-us').startswith('hello|')\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=WAIT_S, cwd=Path(__file__).parents[2]
    )
    assert finished.returncode == 0, finished.stderr
    assert "Traceback" not in finished.stderr and "leaked" not in finished.stderr, finished.stderr
