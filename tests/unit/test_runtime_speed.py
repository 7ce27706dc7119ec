"""The server measures at start how fast it speaks (kokoro_server/runtime.py), and a host too slow
for real time says so before it serves anyone: in /ping's body and in a WARNING log line. Timed
with a scripted clock, so the verdict is the same on any machine."""

from __future__ import annotations

import io
import json
import logging

import pytest
from starlette.testclient import TestClient

from tests.support.clocks import TickingClock
from tests.support.fakes import ToneEngine
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.logs import capture_json_logs
from voicestream.kokoro_server.runtime import SPEED_CHECK_TEXT, ServerRuntime, measure_speed
from voicestream.wire.bidi import SAMPLE_RATE, Limits

CHUNK_MS = 100


def test_the_speed_check_divides_compute_by_audio() -> None:
    engine = ToneEngine(chunk_ms=CHUNK_MS)
    engine.load()
    check = measure_speed(engine, SPEED_CHECK_TEXT, TickingClock(0.01))
    chunks = -(-engine.samples_for(SPEED_CHECK_TEXT) // engine.chunk_samples)
    # Two reads per chunk and two for the end of the stream: 0.01 s between each pair.
    assert check.compute_s == pytest.approx((chunks + 1) * 0.01)
    assert check.audio_s == engine.samples_for(SPEED_CHECK_TEXT) / SAMPLE_RATE
    assert check.real_time_factor == check.compute_s / check.audio_s < 1.0
    assert check.faster_than_real_time


async def started_with(step_s: float) -> tuple[ServerRuntime, list[dict[str, object]]]:
    runtime = ServerRuntime(ToneEngine(chunk_ms=CHUNK_MS), Limits(), warm_up_text="Hi.", clock=TickingClock(step_s))
    stream = io.StringIO()
    handler = capture_json_logs(stream)
    try:
        await runtime.start()
    finally:
        logging.getLogger("voicestream").removeHandler(handler)
    assert runtime.ready, runtime.error
    return runtime, [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_a_fast_host_reports_its_speed_and_warns_of_nothing() -> None:
    runtime, logs = await started_with(step_s=0.001)  # 1 ms per 100 ms chunk
    try:
        assert runtime.speed is not None and runtime.speed.faster_than_real_time
        (ready,) = [entry for entry in logs if entry.get("event") == "engine_ready"]
        assert ready["real_time_factor"] == round(runtime.speed.real_time_factor, 3) < 1
        assert not [entry for entry in logs if entry.get("event") == "engine_slower_than_real_time"]
    finally:
        runtime.close()


async def test_a_host_slower_than_real_time_says_so_at_start() -> None:
    runtime, logs = await started_with(step_s=0.2)  # 200 ms of compute per 100 ms chunk
    try:
        assert runtime.ready and runtime.speed is not None and not runtime.speed.faster_than_real_time
        (warning,) = [entry for entry in logs if entry.get("event") == "engine_slower_than_real_time"]
        assert warning["level"] == "WARNING" and warning["real_time_factor"] == round(runtime.speed.real_time_factor, 3)
        assert float(str(warning["real_time_factor"])) > 1.0
    finally:
        runtime.close()


def test_ping_carries_the_speed_measured_at_start() -> None:
    app = create_app(ToneEngine(chunk_ms=CHUNK_MS), Limits(), warm_up_text="Hi.")
    with TestClient(app) as client:
        while (response := client.get("/ping")).status_code == 503:
            pass
        runtime: ServerRuntime = app.state.runtime
        assert runtime.speed is not None
        assert response.json() == {"status": "ready", "engine": "tone", "device": "cpu", **runtime.speed.report()}


async def test_an_engine_already_measured_is_not_warmed_up_or_timed_again() -> None:
    """Tests and benchmarks build many apps over one loaded engine: each after the first takes the
    first one's measurement rather than speaking the warm-up and the speed check again."""
    engine = ToneEngine(chunk_ms=CHUNK_MS)
    first = ServerRuntime(engine, Limits(), warm_up_text="Hi.", clock=TickingClock(0.001))
    await first.start()
    first.close()
    assert engine.texts == ["Hi.", SPEED_CHECK_TEXT]
    second = ServerRuntime(engine, Limits(), warm_up_text="Hi.", clock=TickingClock(0.2))
    await second.start()
    second.close()
    assert second.ready and engine.texts == ["Hi.", SPEED_CHECK_TEXT]
    assert second.speed is first.speed
    other = ToneEngine(chunk_ms=CHUNK_MS)  # another engine is measured on its own
    third = ServerRuntime(other, Limits(), warm_up_text="Hi.", clock=TickingClock(0.2))
    await third.start()
    third.close()
    assert other.texts == ["Hi.", SPEED_CHECK_TEXT] and third.speed != first.speed
