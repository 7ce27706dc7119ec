"""Small fakes of OUR OWN interfaces, for the fast unit tier (no model, no sockets).

- `ToneEngine`: a `SpeechEngine` that speaks any text as a tone, instantly, in fixed chunks; it
  counts what it synthesized and can be made slow or faulty for one trigger word. With
  `words=True` it times every word as an engine with a duration predictor does: word i starts
  at the samples of the characters before it, and each chunk carries the words that start in it.
  `G2PToneEngine` is one whose work check runs a real `G2P` worker pool (with a test builder).
- `MemoryChannel`: the WebSocket as `ServerSession` sees it (its `Channel` protocol), in memory.
- `MemoryTransport`: a `speech.Transport` wired straight to a real `ServerSession` on the
  same event loop through a `MemoryChannel`, so the real client talks to the real server
  session with nothing but queues between them. Frames keep their kind (text or binary) and a
  close keeps its code, exactly as a WebSocket carries them.
- `ScriptedTransport`: a `Transport` that plays back what a test scripts (silence, garbage, an
  early end), to reach the client's failure paths; `TurnTransport` answers in turns, each after
  the client sent its request (a vLLM-Omni server answers an utterance after its `input.done`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Iterator, MutableMapping
from typing import Any, Literal

import numpy as np

from voicestream.engine.base import AudioChunk, InvalidRequestError, SpeechEngine, WordTiming
from voicestream.engine.text.g2p import G2P
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server.runtime import PRODUCTION, Policy, ServerRuntime
from voicestream.kokoro_server.session import CLOSE_TRY_AGAIN_LATER, ServerSession
from voicestream.speech.errors import ConnectionLostError, SessionClosedError, SessionConnectError
from voicestream.speech.transport import FrameMode, Payload
from voicestream.wire.bidi import SAMPLE_RATE, Limits
from voicestream.wire.voices import OFFICIAL_VOICES

Message = MutableMapping[str, Any]


class ToneEngine(SpeechEngine):
    """Speaks `ms_per_char` of a 220 Hz tone per character, in chunks of `chunk_ms`.

    `step_delay_s` sleeps before each chunk (a slow engine); a text containing `fail_on` raises
    mid-stream (an engine fault), one containing `refuse_on` raises InvalidRequestError first."""

    name = "tone"

    def __init__(
        self,
        ms_per_char: float = 10.0,
        chunk_ms: int = 100,
        step_delay_s: float = 0.0,
        fail_on: str | None = None,
        refuse_on: str | None = None,
        words: bool = False,
    ) -> None:
        super().__init__()
        self.ms_per_char = ms_per_char
        self.chunk_samples = SAMPLE_RATE * chunk_ms // 1000
        self.step_delay_s = step_delay_s
        self.fail_on = fail_on
        self.refuse_on = refuse_on
        self.words = words
        self.texts: list[str] = []  # every text asked for, in order
        self.text_options: list[TextOptions] = []  # the text options of each
        self.aheads: list[float] = []  # the audio ahead (s) each text was asked for with
        self.behinds: list[bool] = []  # whether the server was behind each text's listener
        self.chunks_made = 0

    def _load(self) -> None:
        pass

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def samples_for(self, text: str) -> int:
        return int(len(text) * self.ms_per_char * SAMPLE_RATE / 1000)

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        if self.refuse_on is not None and self.refuse_on in text:
            raise InvalidRequestError(f"refused {text!r}")
        self.texts.append(text)
        self.text_options.append(text_options)
        self.aheads.append(ahead_s)
        self.behinds.append(behind)
        return self._chunks(text)

    def word_timings(self, text: str) -> tuple[WordTiming, ...]:
        """Where each word of `text` is spoken: its characters' share of the tone."""
        seconds_per_char = self.ms_per_char / 1000
        return tuple(
            WordTiming(match.group(), match.start() * seconds_per_char, match.end() * seconds_per_char)
            for match in re.finditer(r"\S+", text)
        )

    def _chunks(self, text: str) -> Iterator[AudioChunk]:
        total = self.samples_for(text)
        timings = self.word_timings(text) if self.words else ()
        for start in range(0, total, self.chunk_samples):
            if self.step_delay_s:
                time.sleep(self.step_delay_s)
            if self.fail_on is not None and self.fail_on in text and start > 0:
                raise RuntimeError(f"injected engine fault on {text!r}")
            count = min(self.chunk_samples, total - start)
            phase = np.arange(start, start + count, dtype=np.float32) * (2 * np.pi * 220 / SAMPLE_RATE)
            self.chunks_made += 1
            begins, ends = start / SAMPLE_RATE, (start + count) / SAMPLE_RATE
            words = tuple(word for word in timings if begins <= word.start_s < ends)
            yield AudioChunk(samples=(0.3 * np.sin(phase)).astype(np.float32), words=words)


class HeldG2PToneEngine(ToneEngine):
    """A ToneEngine whose work check (G2P) of a text containing `hold_on` waits until
    `released` is set: slow or stuck G2P, to fill the server's G2P queue. `checked` lists every
    text whose work check ran (joined sentences), in the order they ran."""

    def __init__(self, hold_on: str = "hold", **options: Any) -> None:
        super().__init__(**options)
        self.hold_on = hold_on
        self.released = threading.Event()
        self.checked: list[str] = []

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        joined = " ".join(texts)
        if self.hold_on in joined:
            self.released.wait(timeout=120)  # a hang guard: tests release it
        self.checked.append(joined)
        return super()._count_phonemes(texts, voice, text_options)


class G2PToneEngine(ToneEngine):
    """A ToneEngine whose work check (`count_phonemes`) converts text in `g2p`'s worker
    processes, as the ONNX engine does: the server's G2P path, without misaki or the model."""

    def __init__(self, g2p: G2P, **options: Any) -> None:
        super().__init__(**options)
        self.g2p = g2p

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        return sum(len(phonemes.text) for phonemes in self.g2p.phonemize_many(texts, "en-us"))


class MemoryChannel:
    """Both ends of one in-memory WebSocket: the server side implements `ServerSession`'s
    Channel; the client side is `to_server` / `from_server`."""

    def __init__(self) -> None:
        self.to_server: asyncio.Queue[Message] = asyncio.Queue()
        self.from_server: asyncio.Queue[Payload | int] = asyncio.Queue()  # int: the close code
        self.close_code: int | None = None
        self.close_reason: str | None = None

    # --- the server's side (ServerSession's Channel) ---------------------------------------
    async def receive(self) -> Message:
        return await self.to_server.get()

    async def send_text(self, data: str) -> None:
        self._check_open()
        self.from_server.put_nowait(data)

    async def send_bytes(self, data: bytes) -> None:
        self._check_open()
        self.from_server.put_nowait(data)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason
            self.from_server.put_nowait(code)

    def _check_open(self) -> None:
        if self.close_code is not None:
            raise OSError("the channel is closed")

    # --- the client's side ----------------------------------------------------------------
    def client_sends(self, payload: Payload) -> None:
        key = "bytes" if isinstance(payload, bytes) else "text"
        self.to_server.put_nowait({"type": "websocket.receive", key: payload})

    def client_disconnects(self) -> None:
        self.to_server.put_nowait({"type": "websocket.disconnect", "code": 1006})


async def started_runtime(
    engine: SpeechEngine, limits: Limits | None = None, workers: int = 2, policy: Policy = PRODUCTION
) -> ServerRuntime:
    """A ServerRuntime with `engine` loaded and warmed up, as the app's lifespan makes it."""
    runtime = ServerRuntime(engine, limits or Limits(), synth_workers=workers, warm_up_text="Hi.", policy=policy)
    await runtime.start()
    assert runtime.ready, runtime.error
    if isinstance(engine, ToneEngine):  # the warm-up is not what a test asked for
        engine.texts.clear()
        engine.text_options.clear()
        engine.aheads.clear()
        engine.behinds.clear()
        engine.chunks_made = 0
    return runtime


class MemoryTransport:
    """A client `Transport` to a real `ServerSession` running on this event loop."""

    def __init__(self, runtime: ServerRuntime, *, frames: FrameMode = "binary") -> None:
        self.runtime = runtime
        self.frames: FrameMode = frames
        self.channel = MemoryChannel()
        self.server: ServerSession | None = None
        self.server_task: asyncio.Task[Any] | None = None
        self.sent: list[Payload] = []
        self._closed = False

    @property
    def description(self) -> str:
        return f"in-memory session ({self.frames} frames)"

    async def connect(self) -> None:
        if self.server_task is not None:
            raise SessionClosedError("connect() may be called once")
        self.server = ServerSession(self.runtime, self.channel)
        self.server_task = asyncio.create_task(self.server.run(), name="memory-server-session")

    async def send(self, payload: Payload) -> None:
        if self._closed or self.server_task is None:
            raise SessionClosedError(f"{self.description} is not open")
        if self.channel.close_code is not None:
            raise ConnectionLostError(f"{self.description}: closed with code {self.channel.close_code}")
        if isinstance(payload, str) and self.frames == "binary":
            payload = payload.encode()
        self.sent.append(payload)
        self.channel.client_sends(payload)

    async def receive(self) -> Payload | None:
        item = await self.channel.from_server.get()
        if isinstance(item, int):
            if item == 1000:
                return None
            if item == CLOSE_TRY_AGAIN_LATER:  # as WebSocketTransport: a refusal, worth retrying
                reason = self.channel.close_reason
                raise SessionConnectError(f"{self.description}: refused, close code {item}", server_code=reason)
            raise ConnectionLostError(f"{self.description}: close code {item} {self.channel.close_reason!r}")
        return item

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.server_task is not None and not self.server_task.done():
            self.channel.client_disconnects()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self.server_task, 5)
        if self.channel.close_code is None:
            self.channel.from_server.put_nowait(1006)  # what a reader blocked in receive() sees


Step = Payload | Literal["end"] | float | Exception
"""A scripted server step: a frame, "end" (a clean end of stream), a pause in seconds, or an error to raise."""


class ScriptedTransport:
    """Plays back `script` as the server's side; records what the client sent."""

    def __init__(self, script: list[Step] | None = None, *, refuse: bool = False) -> None:
        self.script = list(script or [])
        self.refuse = refuse
        self.sent: list[Payload] = []
        self.closed = False
        self._wake = asyncio.Event()

    @property
    def description(self) -> str:
        return "scripted transport"

    async def connect(self) -> None:
        if self.refuse:
            raise SessionConnectError("scripted refusal")

    async def send(self, payload: Payload) -> None:
        if self.closed:
            raise SessionClosedError("closed")
        self.sent.append(payload)

    async def receive(self) -> Payload | None:
        while True:
            if self.closed:
                return None
            if not self.script:  # silence until closed
                self._wake.clear()
                await self._wake.wait()
                continue
            step = self.script.pop(0)
            if step == "end":
                return None
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            if isinstance(step, Exception):
                raise step
            return step

    async def close(self) -> None:
        self.closed = True
        self._wake.set()


class TurnTransport(ScriptedTransport):
    """A `ScriptedTransport` that answers in turns: the steps of `turns[i]` are played once the
    client has sent `i + 1` messages matching `trigger` (a substring of the payload), as a server
    that answers each request only after it arrived. Anything in `script` plays at once."""

    def __init__(self, turns: list[list[Step]], *, trigger: str, script: list[Step] | None = None) -> None:
        super().__init__(script)
        self.turns = [list(turn) for turn in turns]
        self.trigger = trigger

    async def send(self, payload: Payload) -> None:
        await super().send(payload)
        text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
        if self.trigger in text and self.turns:
            self.script.extend(self.turns.pop(0))
            self._wake.set()
