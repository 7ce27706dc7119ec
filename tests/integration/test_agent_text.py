"""Agent text read right, with the real Kokoro-82M model: entity sentences heard right by Whisper,
and word timings that name the request's own words (`+1 (415) 555-0132` is one timed word
however many words it is spoken as). The model-free rules: tests/unit/test_agent_text.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.agent_text_heard import CASES, GATE, HeardCase, listen
from tests.support.server import LiveServer
from tests.support.timed_speech import timed_speech
from voicestream.engine.onnx.engine import OnnxEngine
from voicestream.engine.text.options import TextOptions

ENTITIES = "Call +1 (415) 555-0132 at 3:45 PM about the $3B deal."
OFF = TextOptions(normalize=False)


def test_timed_words_are_the_texts_own_words(engine: OnnxEngine) -> None:
    chunks = list(engine.synthesize(ENTITIES))
    words = [word for chunk in chunks for word in chunk.words]
    assert [word.word for word in words] == [
        "Call",
        "+1 (415) 555-0132",
        "at",
        "3:45 PM",
        "about",
        "the",
        "$3B",
        "deal",
    ]
    by_name = {word.word: word for word in words}
    # Eleven digits spoken one by one take longer than any plain word of the sentence.
    phone = by_name["+1 (415) 555-0132"]
    assert phone.end_s - phone.start_s > 3 * (by_name["Call"].end_s - by_name["Call"].start_s)
    starts = [word.start_s for word in words]
    assert starts == sorted(starts) and all(word.end_s > word.start_s for word in words)


def test_normalize_false_speaks_the_text_as_misaki_reads_it(engine: OnnxEngine) -> None:
    assert engine.phonemes(ENTITIES, "af_heart", OFF) != engine.phonemes(ENTITIES, "af_heart")
    plain = "Thanks for waiting, I found your booking."
    assert engine.phonemes(plain, "af_heart", OFF) == engine.phonemes(plain, "af_heart")


def test_kokoro_phoneme_markup_passes_through(engine: OnnxEngine) -> None:
    (piece,) = engine.phonemes("Say [Kokoro](/kˈOkəɹO/) at 3:45 PM.", "af_heart")
    assert "kˈOkəɹO" in piece


def test_other_languages_keep_numbers_but_lose_markup(engine: OnnxEngine) -> None:
    spanish = engine.phonemes("Son las **3:45** 🎉.", "ef_dora")
    assert spanish == engine.phonemes("Son las 3:45 .", "ef_dora")  # the emoji went, its space stayed


async def test_words_frames_name_the_original_entities(kokoro_server: LiveServer) -> None:
    _, words = await timed_speech(kokoro_server.ws_url, "Meet me at 3:45 PM on Dec 3rd.")
    assert [word for word, _, _ in words] == ["Meet", "me", "at", "3:45 PM", "on", "Dec 3rd"]


@pytest.mark.parametrize("case", [case for case in CASES if case.name in GATE], ids=lambda case: case.name)
def test_entity_sentences_are_heard_right(engine: OnnxEngine, case: HeardCase) -> None:
    audio = np.concatenate([chunk.samples for chunk in engine.synthesize(case.text)])
    transcript = listen(audio)
    assert case.heard(transcript), (case, transcript)
