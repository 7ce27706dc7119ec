"""The replay source: exact text, word-ish tokens, LLM-like pacing (lower bounds only)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.speak.sources import ReplayPace, ReplaySource, word_tokens
from voicestream.texts import agent_reply


@given(st.text())
def test_tokens_concatenate_to_the_text(text: str) -> None:
    assert "".join(word_tokens(text)) == text


def test_tokens_are_word_ish() -> None:
    assert word_tokens("Hi, it's 3.5 degrees!") == ["Hi", ",", " it's", " 3", ".", "5", " degrees", "!"]


def test_the_agent_reply_has_an_llm_like_token_count() -> None:
    reply = agent_reply()
    words = len(reply.split())
    tokens = len(word_tokens(reply))
    # LLM tokenizers give ~1.3 tokens per English word; word-ish tokens must be in that range
    # for tokens/s to mean what it means for a real model.
    assert words < tokens < 2 * words


def test_pace_schedule() -> None:
    pace = ReplayPace(first_token_s=0.3, tokens_per_s=50)
    assert pace.due(0) == pytest.approx(0.3)
    assert pace.due(50) == pytest.approx(1.3)


@pytest.mark.parametrize(("first", "rate"), [(-1, 50), (0.3, 0), (0.3, -5), (61, 50)])
def test_pace_rejects_nonsense(first: float, rate: float) -> None:
    with pytest.raises(ValueError):
        ReplayPace(first_token_s=first, tokens_per_s=rate)


def test_replay_rejects_empty_text() -> None:
    with pytest.raises(ValueError):
        ReplaySource("   ")


async def test_replay_streams_the_whole_text_no_earlier_than_its_schedule() -> None:
    pace = ReplayPace(first_token_s=0.05, tokens_per_s=400)
    source = ReplaySource("One two three. Four five, six seven!", pace)
    start = time.perf_counter()
    arrivals: list[tuple[float, str]] = []
    async for delta in source.stream():
        arrivals.append((time.perf_counter() - start, delta))
    assert "".join(delta for _, delta in arrivals) == source.text
    assert [delta for _, delta in arrivals] == source.tokens
    # Lower bounds only (sleep never returns meaningfully early): a source that ignored
    # its pace would deliver everything at once and fail here.
    for index, (elapsed, _) in enumerate(arrivals):
        assert elapsed >= pace.due(index) - 0.005


async def test_closing_the_replay_early_stops_it() -> None:
    source = ReplaySource("a b c d e f g h", ReplayPace(first_token_s=0, tokens_per_s=1000))
    stream = source.stream()
    first = await anext(stream)
    await stream.aclose()
    assert first == "a"
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
