"""Per-request options of the text front end (what a request may change about how its text is read)."""

from __future__ import annotations

from dataclasses import dataclass

from voicestream.wire.pronunciation import Lexicon


@dataclass(frozen=True, slots=True)
class TextOptions:
    """`normalize`: read agent text right (agent_text.py: markup and emoji dropped; for English
    voices times, dates, phone numbers, URLs, units ... said as words). False speaks the text as
    misaki reads it, after the robustness rules of normalize.py, which always apply.

    `lexicon`: words said the way it spells them (wire/pronunciation.py; applied after
    normalization, as inline markup, before G2P). `phonemes`: the text IS Kokoro phonemes
    (phoneme input): no normalization, no G2P, every symbol checked against the vocabulary."""

    normalize: bool = True
    lexicon: Lexicon = ()
    phonemes: bool = False


DEFAULT_TEXT_OPTIONS = TextOptions()
"""The defaults, as one shared (immutable) value for parameter defaults."""
