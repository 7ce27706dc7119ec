"""The sessions' inbox: items in order, a put wakes the consumer, the silence clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from voicestream.speech.errors import SessionTimeoutError
from voicestream.speech.inbox import Inbox


async def test_a_put_wakes_a_waiting_consumer_and_items_keep_their_order() -> None:
    inbox: Inbox[str] = Inbox()

    async def producer() -> None:
        await asyncio.sleep(0.01)
        inbox.put("first")
        inbox.put("second")

    task = asyncio.create_task(producer())
    await asyncio.wait_for(inbox.wait(None, lambda: "unused"), timeout=5)
    await task
    assert [inbox.pop(), inbox.pop()] == ["first", "second"]
    assert len(inbox) == 0


async def test_silence_while_answers_are_due_raises_with_the_message() -> None:
    inbox: Inbox[str] = Inbox()
    inbox.start_clock()
    started = time.perf_counter()
    with pytest.raises(SessionTimeoutError, match="no frame from the fake"):
        while True:  # as a session's consumer loops: wait, look, wait again
            await inbox.wait(0.05, lambda: "no frame from the fake")
    assert time.perf_counter() - started >= 0.05


async def test_progress_moves_the_deadline_and_no_answers_due_waits_for_a_wake() -> None:
    inbox: Inbox[str] = Inbox()
    inbox.start_clock()
    await asyncio.sleep(0.04)
    inbox.progress(time.perf_counter())  # a frame arrived: the 50 ms count from here
    await inbox.wait(0.05, lambda: "must not time out yet")  # returns at the deadline
    with pytest.raises(SessionTimeoutError):
        await inbox.wait(0.05, lambda: "silent since the progress")

    async def waker() -> None:
        await asyncio.sleep(0.01)
        inbox.wake()

    task = asyncio.create_task(waker())
    await asyncio.wait_for(inbox.wait(None, lambda: "unused"), timeout=5)
    await task
    with pytest.raises(IndexError):
        inbox.pop()
