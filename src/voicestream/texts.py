"""The benchmark texts shipped with the package (src/voicestream/data/bench_texts.json)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def bench_texts() -> dict[str, str]:
    raw = json.loads(resources.files("voicestream.data").joinpath("bench_texts.json").read_text())
    return {key: value for key, value in raw.items() if key != "notes"}


def paragraph() -> str:
    """The 4-sentence paragraph of the anchor's isolated TTS test (~267 characters)."""
    return bench_texts()["paragraph_4_sentences"]


def agent_reply() -> str:
    """A 6-sentence voice-agent reply, for the agent (bidi vs batch) experiments."""
    return bench_texts()["agent_reply_6_sentences"]
