"""Experiments 1 and 4: isolated TTS time to first audio, and what we add on top of the model.

The 4-sentence benchmark paragraph goes to the real server over a real socket through the
real client (`BidiSession` on `WebSocketTransport`), one fresh session per run, as:

- whole_unsplit: one message, synthesized as one text: the anchor's baseline (its server
  splits only at newlines); our server's own sentence split is turned off for these runs;
- whole: one message as our server handles it (it splits every request into sentences);
- sentences: one message per sentence (the project's chunker), pipelined;
- first_clause: the chunker's fast first clause at its default (chunker.FIRST_CLAUSE_MIN_WORDS), pipelined;
- first_clause_3: the fast first clause at 3 words, pipelined.

Variants that send identical messages are measured once and reported under both names.
Variants rotate within each repeat, so drift on a noisy machine hits all alike. Experiment 4
comes from the same runs: client first audio minus the engine's own compute time for the
first chunk (G2P + first inference, timed inside the in-process server), and minus the
server's first_audio_ms (from its synthesis_complete).

    .venv/bin/python benchmarks/isolated.py [--repeats 5] [--url http://host:port]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

from common import (
    LocalServer,
    anchor_style,
    base_parser,
    header,
    kokoro_server,
    ratio,
    run_session,
    summary,
    write_json,
)
from voicestream.chunker import SentenceChunker, split_sentences
from voicestream.texts import paragraph

DEFAULT_MIN_WORDS = SentenceChunker().first_clause_min_words
# Per-session metrics summarised per variant, with the digits they are rounded to.
METRICS = {
    "first_audio_ms": 1,
    "connect_ms": 2,
    "completion_ms": 1,
    "real_time_factor": 3,
    "jitter_ms": 1,
    "max_gap_ms": 1,
    "stall_ms": 1,
}


def variants(text: str) -> dict[str, list[str]]:
    return {
        "whole_unsplit": [text],
        "whole": [text],
        "sentences": split_sentences(text),
        "first_clause": split_sentences(text, first_clause_min_words=DEFAULT_MIN_WORDS),
        "first_clause_3": split_sentences(text, first_clause_min_words=3),
    }


def distinct(pieces: dict[str, list[str]]) -> dict[str, str]:
    """Each variant -> the variant whose runs it shares (itself unless it sends the same)."""
    owner: dict[str, str] = {}
    for name, sent in pieces.items():
        same = next((other for other in owner if owner[other] == other and pieces[other] == sent), None)
        # whole and whole_unsplit send the same message but are different servers.
        owner[name] = same if same is not None and "whole" not in name else name
    return owner


async def measure(server: LocalServer, repeats: int, anchor: LocalServer | None = None) -> dict[str, Any]:
    """Each variant on `server`; `whole_unsplit` on `anchor`, the anchor-style server (a request
    synthesized as one text), when there is one (an in-process server)."""
    text = paragraph()
    pieces = variants(text)
    if anchor is None:
        del pieces["whole_unsplit"]
    owner = distinct(pieces)
    measured = [name for name in pieces if owner[name] == name]
    for warmed in filter(None, (server, anchor)):
        await run_session(warmed.ws_url, ["Warm up the connection path."])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in measured}
    for repeat in range(repeats):
        shift = repeat % len(measured)
        for name in measured[shift:] + measured[:shift]:
            target = anchor if name == "whole_unsplit" and anchor else server
            record = await run_session(target.ws_url, pieces[name], engine=target.engine)
            row = record.metrics()
            row["repeat"] = repeat
            first = record.requests[0]
            if record.first_audio_s is not None and first.engine_first_chunk_ms is not None:
                row["overhead_vs_engine_ms"] = round(record.first_audio_s * 1000 - first.engine_first_chunk_ms, 2)
            if first.first_audio_s is not None and first.server_first_audio_ms is not None:
                row["overhead_vs_server_ms"] = round(first.first_audio_s * 1000 - first.server_first_audio_ms, 2)
            runs[name].append(row)
            print(f"  repeat {repeat} {name:<15} first audio {row['first_audio_ms']:>8} ms")
    return {"text": text, "pieces": pieces, "shares_runs_with": owner, "runs": runs}


def analyse(measured: dict[str, Any]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = measured["runs"]
    owner: dict[str, str] = measured["shares_runs_with"]
    table: dict[str, Any] = {}
    for name, source in owner.items():
        rows = runs[source]
        table[name] = {
            "pieces": len(measured["pieces"][name]),
            "first_piece": measured["pieces"][name][0],
            "same_runs_as": None if source == name else source,
            **{
                metric: summary((row[metric] for row in rows if row.get(metric) is not None), digits)
                for metric, digits in METRICS.items()
            },
        }

    def median_first(name: str) -> float:
        return float(table[name]["first_audio_ms"]["median"])

    def paired(numerator: str, denominator: str) -> float | None:
        """Median of the per-repeat ratios: each pair ran back to back in one repeat."""
        top = {row["repeat"]: row["first_audio_ms"] for row in runs[owner[numerator]]}
        bottom = {row["repeat"]: row["first_audio_ms"] for row in runs[owner[denominator]]}
        ratios = [top[r] / bottom[r] for r in top if bottom.get(r)]
        return round(statistics.median(ratios), 2) if ratios else None

    baseline = "whole_unsplit" if "whole_unsplit" in table else "whole"
    ratios = {
        f"{baseline}/{name}": {
            "of_medians": ratio(median_first(baseline), median_first(name)),
            "median_of_paired": paired(baseline, name),
        }
        for name in table
        if name != baseline
    }
    all_rows = [row for rows in runs.values() for row in rows]
    overhead = {
        "vs_engine_first_chunk_ms": summary(
            (r["overhead_vs_engine_ms"] for r in all_rows if "overhead_vs_engine_ms" in r), 2
        ),
        "vs_server_first_audio_ms": summary(
            (r["overhead_vs_server_ms"] for r in all_rows if "overhead_vs_server_ms" in r), 2
        ),
    }
    return {"variants": table, "ratios": ratios, "baseline": baseline, "overhead": overhead}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "isolated.json", repeats=5)
    args: argparse.Namespace = parser.parse_args()
    with kokoro_server(args.url, args.threads) as server, anchor_style(server, args.threads) as anchor:
        measured = asyncio.run(measure(server, args.repeats, anchor))
        report = header(
            "isolated", args, server, first_clause_min_words=DEFAULT_MIN_WORDS, **measured, **analyse(measured)
        )
    write_json(args.out, report)
    for name, row in report["variants"].items():
        print(
            f"{name:<15} first audio median {row['first_audio_ms']['median']:>8} ms"
            f"  p95 {row['first_audio_ms']['p95']:>8}"
        )
    for name, value in report["ratios"].items():
        print(f"{name:<30} {value}")
    print("overhead", report["overhead"])


if __name__ == "__main__":
    main()
