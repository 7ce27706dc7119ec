"""Phonemizer builders for `voicestream.engine.text.g2p.G2P` in the unit tier: module-level functions,
so they can be pickled into the G2P worker processes. No misaki.

`build_echo`'s phonemizer answers `<text>|<worker pid>|<n>` (n counts its calls in that worker,
so a cached answer is told from a fresh one). Two texts misbehave on purpose:
- `hold:<path>` waits until the file at <path> exists (a test releases it when it chooses);
- `forever` never returns (only the G2P timeout ends it).

`build_slow_others` builds English at once and every other language in `SLOW_BUILD_S`, as
jieba's and unidic-lite's loads take on a loaded machine.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

from voicestream.engine.text.g2p import Phonemes

HOLD = "hold:"
FOREVER = "forever"
_HOLD_LIMIT_S = 120.0  # a test that forgets to release its hold must not leave a worker stuck forever


def build_echo(language: str) -> Callable[[str], Phonemes]:
    calls = itertools.count(1)

    def echo(text: str) -> Phonemes:
        if text.startswith(HOLD):
            release = Path(text.removeprefix(HOLD))
            deadline = time.monotonic() + _HOLD_LIMIT_S
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        elif text == FOREVER:
            while True:
                time.sleep(1)
        return Phonemes(f"{text}|{os.getpid()}|{next(calls)}")

    return echo


SLOW_BUILD_S = 1.5


def build_slow_others(language: str) -> Callable[[str], Phonemes]:
    if language != "en-us":
        time.sleep(SLOW_BUILD_S)
    return build_echo(language)


def hold(path: Path) -> str:
    """The text that holds its worker until `path` exists."""
    return f"{HOLD}{path}"
