"""Word timings of the ONNX engine: each word once, in order, in the chunk where it starts.
Where Whisper hears them is tested on the wire
(tests/integration/test_word_timings.py). Real Kokoro-82M int8 model.
"""

from __future__ import annotations

import json
from importlib import resources

from tests.support.word_alignment import normalize
from voicestream.chunker import split_sentences
from voicestream.engine.base import AudioChunk
from voicestream.engine.onnx.engine import OnnxEngine

LONG_SENTENCES = (
    "Our team will move every order from the north depot to the new site next week so please check that your "
    "delivery address and phone number are correct before friday because the courier cannot call you back after "
    "the van leaves and we would hate for anything to go missing.",
    "To reset your router unplug it from the wall wait about thirty seconds plug it back in and then give the "
    "lights a minute or two to settle before you try connecting your laptop to the network again.",
)


def bench_sentences() -> list[str]:
    texts = json.loads(resources.files("voicestream.data").joinpath("bench_texts.json").read_text())
    return [s for key, text in texts.items() if key != "notes" for s in split_sentences(text)]


def check_placement(chunks: list[AudioChunk]) -> None:
    """Every word lies in the chunk where it starts; starts never go back; ends follow starts."""
    chunk_start = 0.0
    previous = -1.0
    for chunk in chunks:
        chunk_end = chunk_start + chunk.duration_s
        for word in chunk.words:
            assert chunk_start - 1e-6 <= word.start_s < chunk_end, (word, chunk_start, chunk_end)
            assert word.start_s >= previous and word.end_s > word.start_s, word
            previous = word.start_s
        chunk_start = chunk_end
    last = [word for chunk in chunks for word in chunk.words][-1]
    assert last.end_s <= chunk_start + 1e-6


def test_every_word_once_in_order_across_pieces_and_windows(engine: OnnxEngine) -> None:
    # Over 510 phonemes: two pieces, each with windows (and the lookahead's join in a long piece);
    # the bench sentences with a time and a hyphenated name, not all of them (minutes of audio).
    bench = bench_sentences()
    text = " ".join([bench[0], bench[1], bench[8], *LONG_SENTENCES])
    pieces = engine.phoneme_pieces(text, "af_heart")
    assert len(pieces) >= 2
    chunks = list(engine.synthesize(text))
    check_placement(chunks)
    words = [normalize(word.word) for chunk in chunks for word in chunk.words]
    expected = [normalize(word.text) for piece in pieces for word in piece.words]
    assert words == expected
    # The text's own words, in order (misaki keeps "9:40" and "Baixa-Chiado" as one word each).
    assert words[:6] == ["thanks", "for", "waiting", "i", "found", "your"]
    assert "baixachiado" in words and "940" in words


def test_a_faster_speed_gives_earlier_words(engine: OnnxEngine) -> None:
    text = bench_sentences()[2]
    normal = [word for chunk in engine.synthesize(text) for word in chunk.words]
    fast = [word for chunk in engine.synthesize(text, speed=1.5) for word in chunk.words]
    assert [w.word for w in fast] == [w.word for w in normal]
    assert fast[-1].end_s < 0.8 * normal[-1].end_s


def test_voices_without_word_alignment_give_audio_and_no_words(engine: OnnxEngine) -> None:
    chunks = list(engine.synthesize("Hola, ¿cómo estás?", voice="ef_dora"))
    assert sum(len(chunk.samples) for chunk in chunks) > 0
    assert all(chunk.words == () for chunk in chunks)
