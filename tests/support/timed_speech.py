"""One text through a bidi session with word timings on: its audio and the words the server timed.
Shared by the word-timing test and benchmarks/word_timings.py."""

from __future__ import annotations

from voicestream.speech import Audio, BidiSession, RequestCompleted

Timed = tuple[str, float, float]  # word, start_s, end_s


async def timed_speech(ws_url: str, text: str, silence_timeout: float = 300) -> tuple[bytes, list[Timed]]:
    async with BidiSession.websocket(ws_url, words=True, silence_timeout=silence_timeout) as session:
        request_id = await session.send(text)
        audio = bytearray()
        async for event in session.events():
            if isinstance(event, Audio):
                audio += event.data
            elif isinstance(event, RequestCompleted) and event.request_id == request_id:
                break
        return bytes(audio), [(w.word, w.start_s, w.end_s) for w in session.timings[request_id].words]
