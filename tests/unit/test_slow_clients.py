"""Slow and abandoned clients (issue 32, item 6): the G2P queue is bounded, a client that leaves
before its first audio costs no G2P, and a consumer that reads slower than real time is closed
with slow_consumer; each while the server goes on serving others.

Verdicts never hang on the machine's speed: limits are small, a held G2P (HeldG2PToneEngine)
makes the queue fill deterministically, lag is measured with an injected clock or against a
client that reads nothing at all, and every wait has a generous hang guard.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, MutableMapping
from typing import Any

import pytest

from tests.support.clocks import ManualClock
from tests.support.fakes import HeldG2PToneEngine, MemoryChannel, ToneEngine, started_runtime
from tests.support.server import start_server
from voicestream.asgi import ClientGone, ConsumerLag, SlowConsumerError, StreamingBody, unless_disconnected
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.runtime import G2P_WAITERS, ServerRuntime
from voicestream.kokoro_server.session import EndReason, ServerSession
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import parse_control_frame

HANG_GUARD_S = 30.0


async def a_send_taking(clock: ManualClock, seconds: float) -> None:
    clock.now += seconds


# --- ConsumerLag ------------------------------------------------------------------------------


async def test_a_real_time_reader_stays_within_the_lag() -> None:
    clock = ManualClock(start=0.0)
    lag = ConsumerLag(2.0, clock)
    for n in range(1000):  # 1000 s of audio, taken in real time with jitter
        await lag.send(a_send_taking(clock, 1.3 if n % 2 else 0.7), 1.0)
    assert lag.lag_s <= 0.3 + 1e-9


async def test_a_reader_at_half_speed_is_closed_once_the_lag_is_spent() -> None:
    clock = ManualClock(start=0.0)
    lag = ConsumerLag(2.0, clock)
    sent = 0
    with pytest.raises(SlowConsumerError) as caught:
        while sent < 100:
            await lag.send(a_send_taking(clock, 0.2), 0.1)  # 0.1 s of audio every 0.2 s
            sent += 1
    assert caught.value.code == "slow_consumer"
    assert 19 <= sent <= 21  # 0.1 s behind per send: 2 s after about 20 sends


async def test_time_the_server_spent_making_audio_is_not_the_readers() -> None:
    clock = ManualClock(start=0.0)
    lag = ConsumerLag(1.0, clock)
    for _ in range(100):
        clock.now += 5.0  # a slow synthesis between sends: the reader waits, it is not late
        await lag.send(a_send_taking(clock, 0.0), 0.04)
    assert lag.lag_s == 0.0


# --- the bidi session -------------------------------------------------------------------------


class StalledChannel(MemoryChannel):
    """A client that takes control frames but never reads audio: its socket's buffers are full."""

    async def send_bytes(self, data: bytes) -> None:
        await asyncio.Event().wait()


async def speak(runtime: ServerRuntime, channel: MemoryChannel, text: str) -> asyncio.Task[EndReason]:
    task = asyncio.create_task(ServerSession(runtime, channel).run())
    channel.client_sends(json.dumps({"type": "synthesize", "text": text, "request_id": "r1"}))
    return task


async def controls_until(channel: MemoryChannel, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        item = await asyncio.wait_for(channel.from_server.get(), HANG_GUARD_S)
        if isinstance(item, int):
            raise AssertionError(f"closed with {item} before {kind}: {seen}")
        control = parse_control_frame(item)
        if control is not None:
            seen.append(control)
            if control["type"] == kind:
                return seen


async def test_a_session_that_stops_reading_is_closed_slow_consumer_and_others_are_served() -> None:
    runtime = await started_runtime(ToneEngine(), Limits(max_consumer_lag_s=0.3))
    stalled = StalledChannel()
    stalled_task = await speak(runtime, stalled, "Nobody reads this sentence. " * 20)
    reason = await asyncio.wait_for(stalled_task, HANG_GUARD_S)
    assert reason is EndReason.SLOW_CONSUMER
    assert (stalled.close_code, stalled.close_reason) == (1008, "slow_consumer")
    told = [stalled.from_server.get_nowait() for _ in range(stalled.from_server.qsize())]
    controls = [parse_control_frame(item) for item in told if not isinstance(item, int)]
    assert {"type": "error", "code": "slow_consumer"}.items() <= (controls[-2] or {}).items()
    assert controls[-1] == {"type": "session_closed", "reason": "slow_consumer"}
    # The same server, the same small limit: a client that reads is served to the end.
    reader = MemoryChannel()
    reader_task = await speak(runtime, reader, "Somebody reads this one. " * 20)
    seen = await controls_until(reader, "synthesis_complete")
    assert seen[-1]["audio_bytes"] > 0
    reader.client_sends(json.dumps({"type": "close"}))
    assert await asyncio.wait_for(reader_task, HANG_GUARD_S) is EndReason.CLOSE
    runtime.close()


# --- the G2P queue ----------------------------------------------------------------------------


async def test_the_g2p_queue_is_bounded_and_the_server_goes_on() -> None:
    engine = HeldG2PToneEngine()
    runtime = await started_runtime(engine, Limits(max_g2p_queue=2))
    held = [MemoryChannel(), MemoryChannel()]
    held_tasks = [await speak(runtime, channel, "Please hold the line.") for channel in held]
    await until(lambda: runtime.stats.g2p_queued == 2)
    # A third request is refused at once, with a code, and its session goes on.
    third = MemoryChannel()
    third_task = await speak(runtime, third, "Hello there.")
    error = (await controls_until(third, "error"))[-1]
    assert error["code"] == "server_busy" and error["request_id"] == "r1"
    assert runtime.stats.g2p_refused == 1
    engine.released.set()
    for channel in held:
        assert (await controls_until(channel, "synthesis_complete"))[-1]["audio_bytes"] > 0
    third.client_sends(json.dumps({"type": "synthesize", "text": "Hello again.", "request_id": "r2"}))
    assert (await controls_until(third, "synthesis_complete"))[-1]["request_id"] == "r2"
    assert runtime.stats.g2p_queued == 0
    for channel in [*held, third]:
        channel.client_sends(json.dumps({"type": "close"}))
    await asyncio.wait_for(asyncio.gather(*held_tasks, third_task), HANG_GUARD_S)
    runtime.close()


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(int(HANG_GUARD_S / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"condition not reached within {HANG_GUARD_S} s")


# --- HTTP: a response whose client stops reading; work dropped for a client gone ---------------


async def test_a_response_whose_client_stops_reading_is_aborted_slow_consumer() -> None:
    made = [0.0]

    async def audio() -> Any:
        while True:  # endless audio, 0.1 s a chunk
            made[0] += 0.1
            yield b"\0" * 4800

    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) > 3:
            await asyncio.Event().wait()  # the client's buffers are full and stay full

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    failures: list[Exception] = []
    body = StreamingBody(
        audio(), "audio/pcm", lag=ConsumerLag(0.2), audio_s=lambda: made[0], on_failure=failures.append
    )
    await asyncio.wait_for(body({"type": "http"}, receive, send), HANG_GUARD_S)
    assert [type(error) for error in failures] == [SlowConsumerError]
    assert all(message.get("more_body", True) for message in sent)  # aborted: no final chunk


async def test_work_awaited_before_the_response_is_dropped_when_the_client_leaves() -> None:
    from starlette.requests import Request

    left = asyncio.Event()
    cancelled = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def work() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    waiting = asyncio.create_task(unless_disconnected(Request({"type": "http"}, receive), work()))
    await asyncio.sleep(0)
    left.set()
    with pytest.raises(ClientGone):
        await asyncio.wait_for(waiting, HANG_GUARD_S)
    assert cancelled.is_set()
    # A client that stays gets the result.
    staying = Request({"type": "http"}, lambda: asyncio.Event().wait())  # type: ignore[arg-type,return-value]
    assert await unless_disconnected(staying, asyncio.sleep(0, "audio")) == "audio"


def post(port: int, path: str, body: dict[str, Any]) -> socket.socket:
    """A POST sent on a real socket, the reply left unread."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
    payload = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    sock.sendall(head.encode() + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return sock


def reply_of(sock: socket.socket) -> bytes:
    sock.settimeout(HANG_GUARD_S)
    reply = b""
    while not reply.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    sock.close()
    return reply


@pytest.mark.parametrize(
    ("path", "field", "extra"),
    [("/invocations", "text", {}), ("/v1/audio/speech", "input", {"model": "kokoro", "voice": "af_heart"})],
)
def test_a_client_gone_before_its_first_audio_costs_no_g2p(path: str, field: str, extra: dict[str, Any]) -> None:
    engine = HeldG2PToneEngine()
    with start_server(create_app(engine, Limits()), ready_timeout=HANG_GUARD_S) as server:
        stats = server.runtime.stats
        # Every G2P waiter busy with a held request: the next one waits in the queue.
        busy = [post(server.port, path, {**extra, field: f"Please hold, caller {n}."}) for n in range(G2P_WAITERS)]
        server.wait_until(lambda live: stats.g2p_queued == G2P_WAITERS, HANG_GUARD_S)
        gone = post(server.port, path, {**extra, field: "Hold on, I am gone."})
        server.wait_until(lambda live: stats.g2p_queued == G2P_WAITERS + 1, HANG_GUARD_S)
        gone.close()
        # Noticed while still queued: it leaves the queue before its G2P starts.
        server.wait_until(lambda live: stats.g2p_queued == G2P_WAITERS, HANG_GUARD_S)
        engine.released.set()
        replies = [reply_of(sock) for sock in busy]
        assert all(reply.startswith(b"HTTP/1.1 200") for reply in replies)
        # Served after everything queued before it: had the gone request stayed, it ran first.
        after = reply_of(post(server.port, path, {**extra, field: "Anyone there?"}))
        assert after.startswith(b"HTTP/1.1 200")
    assert not [text for text in engine.checked + engine.texts if "gone" in text]
    assert any("Anyone there" in text for text in engine.checked)
