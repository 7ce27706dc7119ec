"""Per-request options of the text front end, passed from the routes down to `TextFrontend`."""

from __future__ import annotations

from dataclasses import dataclass

from voicestream.wire.pronunciation import Lexicon


@dataclass(frozen=True, slots=True)
class TextOptions:
    """`lexicon`: words said the way it spells them (wire/pronunciation.py; applied after
    normalization, as inline markup, before G2P). `phonemes`: the text IS Kokoro phonemes
    (phoneme input): no normalization, no G2P, every symbol checked against the vocabulary."""

    lexicon: Lexicon = ()
    phonemes: bool = False
