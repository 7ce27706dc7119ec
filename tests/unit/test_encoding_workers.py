"""Audio encoding runs in the synthesis workers, never on the event loop (issue 32): one
session's slow encoder does not hold another session's pings and frames.

The slow encoder is a small fake of our `AudioEncoder` interface, handed to the runtime as its
encoder factory. It holds its first `encode` until the test releases it, with a hang guard; the
verdict is the order of events (was it released by the test, after the other session was
served?), never a time: on the event loop, the held encode would block the very loop that has
to answer the other session, so it could only end by its guard.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from tests.support.fakes import MemoryChannel, ToneEngine
from voicestream.kokoro_server.encoders import AudioEncoder, AudioInput, create_encoder, to_pcm16
from voicestream.kokoro_server.runtime import ServerRuntime
from voicestream.kokoro_server.session import EndReason, ServerSession
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import parse_control_frame

HANG_GUARD_S = 30.0
HELD_TEXT = "This request's encoder is slow. " * 4


class HeldEncoder:
    """16-bit PCM whose first `encode` waits for `release` (or the hang guard)."""

    format = "pcm"
    content_type = "audio/pcm"

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released_by_test: bool | None = None
        self.threads: set[str] = set()

    @property
    def bytes_per_second(self) -> int:
        return self.sample_rate * 2

    def encode(self, audio: AudioInput) -> bytes:
        self.threads.add(threading.current_thread().name)
        if not self.entered.is_set():
            self.entered.set()
            self.released_by_test = self.release.wait(HANG_GUARD_S)
        return to_pcm16(audio)

    def finish(self) -> bytes:
        return b""


class Encoders:
    """The runtime's encoder factory: the first request's encoder is held, the rest are ours."""

    def __init__(self) -> None:
        self.held: HeldEncoder | None = None

    def __call__(self, audio_format: str, sample_rate: int, mp3_bitrate_kbps: int) -> AudioEncoder:
        if self.held is None:
            self.held = HeldEncoder(sample_rate)
            return self.held
        return create_encoder(audio_format, sample_rate, mp3_bitrate_kbps)


def synthesize(channel: MemoryChannel, text: str, request_id: str) -> None:
    channel.client_sends(json.dumps({"type": "synthesize", "text": text, "request_id": request_id}))


async def until_control(channel: MemoryChannel, kind: str) -> tuple[dict[str, Any], bytes]:
    """The next control frame of `kind`, and the audio bytes that came before it."""
    audio = bytearray()
    while True:
        item = await asyncio.wait_for(channel.from_server.get(), HANG_GUARD_S)
        assert not isinstance(item, int), f"closed with {item} before {kind}"
        control = parse_control_frame(item)
        if control is None:
            assert isinstance(item, bytes)
            audio += item
        elif control["type"] == kind:
            return control, bytes(audio)


async def test_a_held_encoder_does_not_hold_another_sessions_pings_or_audio() -> None:
    encoders = Encoders()
    engine = ToneEngine(chunk_ms=40)
    runtime = ServerRuntime(engine, Limits(), synth_workers=2, warm_up_text="Hi.", encoders=encoders)
    await runtime.start()
    assert runtime.ready, runtime.error
    held_channel, other = MemoryChannel(), MemoryChannel()
    sessions = [asyncio.create_task(ServerSession(runtime, channel).run()) for channel in (held_channel, other)]
    synthesize(held_channel, HELD_TEXT, "held")
    # Wait (off the loop) until the held encoder has its first chunk in hand.
    while encoders.held is None:  # noqa: ASYNC110  # made when the held request starts, on the loop
        await asyncio.sleep(0.01)
    held = encoders.held
    assert await asyncio.to_thread(held.entered.wait, HANG_GUARD_S)

    # Meanwhile the other session is answered: its ping, then a whole request's audio.
    other.client_sends(json.dumps({"type": "ping"}))
    pong, _ = await until_control(other, "pong")
    assert pong["engine"] == "tone"
    synthesize(other, "Another caller.", "other")
    complete, other_audio = await until_control(other, "synthesis_complete")
    assert complete["request_id"] == "other" and complete["audio_bytes"] == len(other_audio) > 0

    held.release.set()
    complete, held_audio = await until_control(held_channel, "synthesis_complete")
    assert held.released_by_test is True  # released by the test, after the other session was served
    assert not [name for name in held.threads if not name.startswith("voicestream-synth")]
    # In order: the held request's audio is its text's PCM, byte for byte, as an unheld one's.
    synthesize(held_channel, HELD_TEXT, "again")
    _, again_audio = await until_control(held_channel, "synthesis_complete")
    assert len(held_audio) > 0 and held_audio == again_audio

    for channel in (held_channel, other):
        channel.client_sends(json.dumps({"type": "close"}))
    assert await asyncio.wait_for(asyncio.gather(*sessions), HANG_GUARD_S) == [EndReason.CLOSE] * 2
    runtime.close()
