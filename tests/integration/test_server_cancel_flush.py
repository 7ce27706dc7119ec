"""Cancel of one request and streamed input (append, flush) on the real app, a real socket and
the real Kokoro model, through the session client (`BidiSession`)."""

from __future__ import annotations

from types import ModuleType

from tests.support.server import LiveServer
from voicestream.speech import Audio, BidiSession, Cancelled, RequestCompleted
from voicestream.wire.bidi import Flushed

TEXTS = {
    "r0": "The first request is spoken in full. It has two sentences.",
    "r1": "The second request is cancelled.",
    "r2": "The third one is spoken as well.",
}


async def test_cancelling_the_second_of_three_pipelined_requests_keeps_the_first_and_third(
    kokoro_server: LiveServer, asr: ModuleType
) -> None:
    audio: dict[str, bytearray] = {rid: bytearray() for rid in TEXTS}
    cancelled: list[Cancelled] = []
    after_cancel: list[str] = []  # the requests whose audio came after `cancelled`
    async with BidiSession.websocket(kokoro_server.ws_url, silence_timeout=120) as session:
        for rid, text in TEXTS.items():
            await session.send(text, request_id=rid)
        await session.cancel("r1")  # in the socket right behind r2: r1 cannot have ended yet
        async for event in session.events():
            if isinstance(event, Audio):
                audio[event.request_id] += event.data
                if cancelled:
                    after_cancel.append(event.request_id)
            elif isinstance(event, Cancelled):
                cancelled.append(event)
            elif isinstance(event, RequestCompleted) and event.request_id == "r2":
                break
        outcomes = {rid: session.timings[rid].outcome for rid in TEXTS}
    assert [(c.request_ids, c.request_id) for c in cancelled] == [(("r1",), "r1")]
    assert outcomes == {"r0": "complete", "r1": "cancelled", "r2": "complete"}
    assert "r1" not in after_cancel
    for rid in ("r0", "r2"):  # whole: every word of each heard
        assert asr.word_error_rate(TEXTS[rid], asr.transcribe(bytes(audio[rid]))) == 0.0


async def test_streamed_tokens_and_a_flush_are_spoken_sentence_by_sentence(
    kokoro_server: LiveServer, asr: ModuleType
) -> None:
    tokens = ["Good", " morning", " to", " you.", " The", " weather", " is", " fine"]
    audio = bytearray()
    async with BidiSession.websocket(kokoro_server.ws_url, silence_timeout=120) as session:
        for token in tokens:
            utterance = await session.append(token, request_id="reply")
        assert utterance == "reply"
        await session.flush()  # "The weather is fine" has no ender: only the flush speaks it
        flushed: Flushed | None = None
        done: set[str] = set()
        async for event in session.events():
            if isinstance(event, Audio):
                audio += event.data
            elif isinstance(event, Flushed):
                flushed = event
            elif isinstance(event, RequestCompleted):
                done.add(event.request_id)
            if flushed is not None and done >= set(flushed.request_ids):
                break
    assert flushed is not None and flushed.request_ids == ("reply.1", "reply.2")
    assert asr.word_error_rate("".join(tokens), asr.transcribe(bytes(audio))) == 0.0
