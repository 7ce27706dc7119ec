"""Kokoro's nine languages through the bidi route: the real server on a real socket, the reply
streamed in as an LLM's tokens (`append`, `flush`) so that the session's chunker cuts it at that
language's punctuation, and an offline multilingual Whisper hears each language's audio back
(WER ≤ 10%; CER ≤ 10% for Japanese and Chinese, and for Hindi in Urdu letters, the script
Whisper writes it in: tests/support/asr.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.languages import CASES, HINDI_PHONEMES, LanguageCase, stream_reply
from tests.support.server import LiveServer
from voicestream.engine.base import SpeechEngine
from voicestream.engine.text.g2p import G2P
from voicestream.env import default_model_dir
from voicestream.speech import Audio, BidiSession, RequestCompleted
from voicestream.wire.bidi import SAMPLE_RATE, Words
from voicestream.wire.errors import ErrorMessage

MAX_ERROR = 0.10


async def speak_streamed(server: LiveServer, case: LanguageCase) -> tuple[bytes, tuple[str, ...]]:
    """The case's text appended four characters at a time, then flushed: its PCM audio and the
    requests the chunker made of it."""
    return await stream_reply(server.ws_url, case.voice, case.text)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.language)
async def test_each_language_is_heard_right_through_the_bidi_route(
    kokoro_server: LiveServer, asr: ModuleType, case: LanguageCase
) -> None:
    audio, pieces = await speak_streamed(kokoro_server, case)
    assert len(pieces) == case.pieces  # the chunker cut the language's own punctuation
    heard = asr.transcribe_language(audio, case.whisper)
    assert asr.error_rate(case.metric, case.text, heard) <= MAX_ERROR, heard


async def test_hindi_is_spoken_with_its_phonemes_through_the_bidi_route(kokoro_server: LiveServer) -> None:
    """The short vowels that Urdu letters (the ASR gate's) do not write: the exact phonemes."""
    (case,) = [c for c in CASES if c.language == "hi"]
    g2p = G2P()
    try:
        assert g2p.phonemize(case.text, "hi") == HINDI_PHONEMES
    finally:
        g2p.close()
    audio, pieces = await speak_streamed(kokoro_server, case)
    assert len(pieces) == case.pieces  # cut at "?" (the danda ends the text)
    seconds = len(audio) / 2 / SAMPLE_RATE
    assert 2.0 < seconds < 8.0, seconds  # 41 phonemes: all of them spoken, none dropped or repeated


async def test_only_english_requests_get_word_timings(kokoro_server: LiveServer) -> None:
    """`words: true` in a language whose G2P aligns no words: the audio, and no `words` frame."""
    timed: dict[str, int] = {}
    audio: dict[str, int] = {}
    async with BidiSession.websocket(kokoro_server.ws_url, silence_timeout=120) as session:
        await session.send("Good morning.", voice="af_heart", words=True, request_id="en")
        await session.send("こんにちは。", voice="jf_alpha", words=True, request_id="ja")
        async for event in session.events():
            if isinstance(event, Words):
                timed[event.request_id] = timed.get(event.request_id, 0) + len(event.words)
            elif isinstance(event, Audio):
                audio[event.request_id] = audio.get(event.request_id, 0) + len(event.data)
            elif isinstance(event, ErrorMessage):
                pytest.fail(str(event))
            elif isinstance(event, RequestCompleted) and event.request_id == "ja":
                break
    assert timed == {"en": 2} and audio.keys() == {"en", "ja"}


def test_japanese_and_mandarin_are_converted_offline_by_misakis_g2ps() -> None:
    """What `kokoro` itself would say for Kokoro v1.0 (cutlet over unidic-lite; jieba + pypinyin),
    in G2P workers like the server's: misaki's pitch-free kana romanization and tone arrows."""
    g2p = G2P()
    try:
        assert g2p.phonemize("こんにちは。散歩に行きましょう！", "ja") == "koɲɲiʨiβa. sampo ɲi ikʲi maɕoː!"
        assert g2p.phonemize("你好。我们去散步吧！", "cmn") == "ni↓xau↓. wo↓mən ʨʰy↘ sa↘npu↘ pa!"
    finally:
        g2p.close()


def test_every_languages_phonemes_are_in_kokoros_vocabulary(kokoro_engine: SpeechEngine) -> None:
    """A symbol outside the vocabulary is dropped silently before the model: none may be (the
    engine fixture: the model's files are there)."""
    vocab = json.loads((Path(default_model_dir()) / "config.json").read_text())["vocab"]
    g2p = G2P()
    try:
        for case in CASES:
            phonemes = g2p.phonemize(case.text, case.language)
            assert phonemes, case.language
            assert {ch for ch in phonemes if ch not in vocab} <= {"¿", "¡"}, case.language  # Spanish marks: silent
    finally:
        g2p.close()
