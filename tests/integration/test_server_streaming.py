"""The real server with an engine that streams inside a sentence (several chunks per sentence):
cancel stops within one decoder window, and pipelined requests keep their order and bytes.

The engine is the real ONNX engine behind a recorder of when each chunk was asked for and
produced (one chunk = one decoder window), so the test sees the work the server caused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from websockets.asyncio.client import connect

from tests.support.server import start_server
from tests.support.session_client import collect, next_frame, roundtrip_ping, send_json
from voicestream.engine.base import AudioChunk, SpeechEngine
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.encoders import to_pcm16
from voicestream.wire.bidi import Limits

LONG = (
    "Our team will move every order from the north depot to the new site next week so please check that your "
    "delivery address and phone number are correct before friday because the courier cannot call you back after "
    "the van leaves and we would hate for anything to go missing."
)
PIPELINED = (
    "The museum opens at ten in the morning and closes at six in the evening on every weekday.",
    "Tickets cost eighteen euros for adults and children under twelve enter for free.",
    "The nearest metro station is about a five minute walk from the main entrance.",
)


class RecordingEngine(SpeechEngine):
    """The real engine; records (asked, produced) times of every chunk it yields."""

    def __init__(self, inner: SpeechEngine) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.windows: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def _load(self) -> None:
        self.inner.load()

    def voices(self) -> tuple[str, ...]:
        return self.inner.voices()

    def _synthesize(
        self, text: str, voice: str, speed: float, listener: Listener, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        return self._recorded(self.inner.synthesize(text, voice, speed, text_options=text_options))

    def _recorded(self, chunks: Iterator[AudioChunk]) -> Iterator[AudioChunk]:
        while True:
            asked = time.perf_counter()
            chunk = next(chunks, None)
            if chunk is None:
                return
            with self._lock:
                self.windows.append((asked, time.perf_counter()))
            yield chunk


async def test_cancel_mid_sentence_stops_within_one_window(kokoro_engine: SpeechEngine) -> None:
    windows_in_sentence = sum(1 for _ in kokoro_engine.synthesize(LONG))
    assert windows_in_sentence >= 5  # enough that stopping early shows (12, 24, 48, 96, 192, ... frames)
    engine = RecordingEngine(kokoro_engine)
    with start_server(create_app(engine, Limits())) as server:
        engine.windows.clear()  # the server's warm-up synthesis
        async with connect(server.ws_url) as ws:
            await send_json(ws, {"text": LONG, "request_id": "long"})
            assert (await next_frame(ws)).type == "synthesis_start"
            assert (await next_frame(ws)).control is None  # the first window's audio is here
            cancel_sent = time.perf_counter()
            await send_json(ws, {"type": "cancel"})
            while (frame := await next_frame(ws)).type != "cancelled":
                assert frame.control is None, frame
            cancelled_at = time.perf_counter()
            assert frame.control == {"type": "cancelled", "request_ids": ["long"]}
            await server.until(lambda live: live.runtime.stats.steps_running == 0)
            asked_after_cancel = [asked for asked, _ in engine.windows if asked > cancel_sent]
            asked_after_cancelled = [asked for asked, _ in engine.windows if asked > cancelled_at]
            print(
                f"{len(engine.windows)} of {windows_in_sentence} windows decoded; asked after cancel: "
                f"{len(asked_after_cancel)}"
            )
            # At most the window begun as the cancel arrived; none once `cancelled` is out.
            assert len(asked_after_cancel) <= 1 and asked_after_cancelled == []
            assert len(engine.windows) < windows_in_sentence
            assert await roundtrip_ping(ws) == []  # nothing of the cancelled request follows


async def test_pipelined_sentences_keep_their_order_and_their_samples(kokoro_engine: SpeechEngine) -> None:
    alone = [list(kokoro_engine.synthesize(text)) for text in PIPELINED]
    expected = [to_pcm16_chunks(iter(chunks)) for chunks in alone]
    engine = RecordingEngine(kokoro_engine)
    with start_server(create_app(engine, Limits())) as server:
        engine.windows.clear()  # the server's warm-up synthesis
        async with connect(server.ws_url) as ws:
            for index, text in enumerate(PIPELINED):
                await send_json(ws, {"text": text, "request_id": f"r{index}", "format": "pcm"})
            results, others = await collect(ws, len(PIPELINED))
    assert others == []
    assert [result.request_id for result in results] == ["r0", "r1", "r2"]
    for result, pcm in zip(results, expected, strict=True):
        assert result.end is not None and result.end["type"] == "synthesis_complete"
        assert bytes(result.audio) == pcm  # every window, in order, nothing lost or repeated
    assert len(engine.windows) == sum(len(chunks) for chunks in alone)


def to_pcm16_chunks(chunks: Iterator[AudioChunk]) -> bytes:
    return b"".join(to_pcm16(chunk.samples) for chunk in chunks)
