"""The runtime gives freed memory back once it has been idle (kokoro_server/runtime.py), never
while synthesis steps keep coming or one is still running. A recording `release_memory` stands
in for glibc's trim (kokoro_server/process_memory.py, tested on glibc in test_process_memory.py)."""

from __future__ import annotations

import asyncio
import time

from tests.support.fakes import ToneEngine
from voicestream.kokoro_server.runtime import IDLE_RELEASE_DELAY_S, ServerRuntime
from voicestream.wire.bidi import Limits

SETTLE_S = IDLE_RELEASE_DELAY_S + 0.3


async def runtime_recording(released: list[float]) -> ServerRuntime:
    runtime = ServerRuntime(
        ToneEngine(), Limits(), warm_up_text="Hi.", release_memory=lambda: released.append(time.monotonic())
    )
    await runtime.start()
    assert runtime.ready, runtime.error
    return runtime


async def test_memory_is_released_once_after_the_steps_stop_and_not_between_them() -> None:
    released: list[float] = []
    runtime = await runtime_recording(released)
    try:
        for _ in range(4):  # back to back, each shorter than the delay, together longer
            await runtime.in_worker(time.sleep, IDLE_RELEASE_DELAY_S / 2)
        stopped = time.monotonic()
        assert released == []
        await asyncio.sleep(SETTLE_S)
        assert len(released) == 1
        assert released[0] - stopped >= IDLE_RELEASE_DELAY_S * 0.9
        await asyncio.sleep(SETTLE_S)
        assert len(released) == 1  # idle is released once, not on a timer
    finally:
        runtime.close()


async def test_a_step_still_running_holds_the_release_back_until_it_ends() -> None:
    released: list[float] = []
    runtime = await runtime_recording(released)
    try:
        long_step = asyncio.create_task(runtime.in_worker(time.sleep, SETTLE_S + 0.2))
        await runtime.in_worker(time.sleep, 0.01)  # ends first: its release finds the long step running
        await asyncio.sleep(SETTLE_S)
        assert released == []
        await long_step
        await asyncio.sleep(SETTLE_S)
        assert len(released) == 1
    finally:
        runtime.close()
