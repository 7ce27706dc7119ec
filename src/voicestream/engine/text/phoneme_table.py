"""Phonemes looked up instead of converted: a `PhonemeSource` (frontend.py) for fixed texts.

The prepared GPU check (benchmarks/gpu_check.py) speaks a few fixed sentences on a machine where
misaki, spaCy and their English model (over 100 MiB of wheels) cannot be installed: `prepare`
has a front end convert those sentences here with the real G2P through a `Recording` source,
writes the table of what it was asked, and the check's engine reads its phonemes from it. A text
the table does not hold is an error that names it, never a silent guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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


class Recording:
    """A PhonemeSource that answers from another and keeps every answer: the table of exactly
    the texts a front end asked for (after its normalization and markup), whatever those are."""

    def __init__(self, source: PhonemeSource) -> None:
        self._source = source
        self._entries: dict[tuple[str, str], Phonemes] = {}

    def phonemize_many(self, texts: Sequence[str], language: str) -> list[Phonemes]:
        converted = self._source.phonemize_many(texts, language)
        self._entries.update({(language, text): phonemes for text, phonemes in zip(texts, converted, strict=True)})
        return converted

    def warm(self, language: str) -> None:
        self._source.warm(language)

    def close(self) -> None:
        self._source.close()

    def table(self) -> PhonemeTable:
        return PhonemeTable(self._entries)
