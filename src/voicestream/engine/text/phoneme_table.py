"""Phonemes looked up instead of converted: a `PhonemeSource` (frontend.py) for fixed texts.

The prepared GPU check (benchmarks/gpu_check.py) speaks a few fixed sentences on a machine where
misaki, spaCy and their English model (over 100 MiB of wheels) cannot be installed: `prepare`
converts those sentences here with the real G2P and writes the table, and the check's engine
reads its phonemes from it. A text the table does not hold is an error that names it, never a
silent guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from voicestream.engine.base import EngineError
from voicestream.engine.text.frontend import PhonemeSource
from voicestream.engine.text.g2p import Phonemes, SpokenWord

FORMAT_VERSION = 1


class PhonemeTable:
    """(language, text) → Phonemes, read-only once built; thread-safe."""

    def __init__(self, entries: Mapping[tuple[str, str], Phonemes]) -> None:
        self._entries = dict(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def phonemize_many(self, texts: Sequence[str], language: str) -> list[Phonemes]:
        missing = [text for text in texts if (language, text) not in self._entries]
        if missing:
            raise EngineError(
                f"no phonemes for {missing[0]!r} ({language}) in the phoneme table of {len(self)} texts: "
                "rebuild it with every text the run speaks"
            )
        return [self._entries[language, text] for text in texts]

    def warm(self, language: str) -> None:
        """Nothing to start: the table is in memory."""

    def close(self) -> None:
        """Nothing held beyond memory."""

    @classmethod
    def convert(cls, source: PhonemeSource, texts: Iterable[str], language: str) -> PhonemeTable:
        """The table of `texts` converted by `source` (the real G2P)."""
        unique = sorted(set(texts))
        converted = source.phonemize_many(unique, language)
        return cls({(language, text): phonemes for text, phonemes in zip(unique, converted, strict=True)})

    def save(self, path: Path) -> None:
        rows = [
            {
                "language": language,
                "text": text,
                "phonemes": phonemes.text,
                "words": [[word.text, word.start, word.end] for word in phonemes.words],
            }
            for (language, text), phonemes in sorted(self._entries.items())
        ]
        path.write_text(json.dumps({"version": FORMAT_VERSION, "entries": rows}, ensure_ascii=False, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> PhonemeTable:
        document = json.loads(path.read_text())
        if document.get("version") != FORMAT_VERSION:
            raise EngineError(f"{path}: phoneme table version {document.get('version')!r}, expected {FORMAT_VERSION}")
        return cls(
            {
                (row["language"], row["text"]): Phonemes(
                    row["phonemes"], tuple(SpokenWord(text, start, end) for text, start, end in row["words"])
                )
                for row in document["entries"]
            }
        )
