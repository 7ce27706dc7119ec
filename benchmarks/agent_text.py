"""Agent text read right: is each entity of an LLM reply heard as it should be, with the
normalization stage (engine/text/agent_text.py) on and off?

Every case of tests/support/agent_text_heard.py (money, times, dates, phone numbers, e-mail,
URLs, units, markdown, emoji, acronyms, ordinals, ranges, fractions, temperatures, versions ...)
is synthesized by the real Kokoro-82M int8 ONNX engine with `normalize` on and off, transcribed
by the offline multilingual Whisper base in English (tests/support/agent_text_heard.py: `listen`) and checked
against the case's pattern.
Per case: heard on/off, both transcripts, and the text the G2P was given. Synthesis and
recognition are deterministic: one run each.

    .venv/bin/python benchmarks/agent_text.py [--out benchmarks/results/agent_text.json]
    .venv/bin/python benchmarks/agent_text.py --rescore   # the stored transcripts, current patterns
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import RESULTS, ROOT, command_line, machine, write_json
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy
from voicestream.engine.text.agent_text import normalize_agent_text
from voicestream.engine.text.options import TextOptions

sys.path.insert(0, str(ROOT))  # the ASR helper and the cases live with the tests
from tests.support.agent_text_heard import CASES, GATE, listen


def heard(engine: OnnxEngine, text: str, normalize: bool) -> str:
    chunks = [chunk.samples for chunk in engine.synthesize(text, text_options=TextOptions(normalize=normalize))]
    return listen(np.concatenate(chunks)) if chunks else ""


def measure(engine: OnnxEngine) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for case in CASES:
        on, off = heard(engine, case.text, True), heard(engine, case.text, False)
        row = {
            "case": case.name,
            "text": case.text,
            "spoken_as": normalize_agent_text(case.text).text,
            "expect": case.pattern or f"digits {case.digits}",
            "heard_on": case.heard(on),
            "heard_off": case.heard(off),
            "transcript_on": on,
            "transcript_off": off,
            "gated": case.name in GATE,
        }
        rows.append(row)
        print(f"  {case.name:<16} on {'✓' if row['heard_on'] else '✗'}  off {'✓' if row['heard_off'] else '✗'}  {on!r}")
    return rows


def rescore(path: Path) -> None:
    """The heard verdicts of a result file's transcripts under the current patterns (no synthesis:
    a pattern that refused a right reading Whisper spells its own way is fixed without a rerun)."""
    report = json.loads(path.read_text())
    cases = {case.name: case for case in CASES}
    for row in report["rows"]:
        case = cases[row["case"]]
        row["heard_on"], row["heard_off"] = case.heard(row["transcript_on"]), case.heard(row["transcript_off"])
    report["heard_on"] = sum(row["heard_on"] for row in report["rows"])
    report["heard_off"] = sum(row["heard_off"] for row in report["rows"])
    report["rescored"] = command_line()
    print(f"heard: {report['heard_on']}/{len(report['rows'])} normalized, {report['heard_off']} as written")
    write_json(path, report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="inference threads")
    parser.add_argument("--out", type=Path, default=RESULTS / "agent_text.json")
    parser.add_argument(
        "--rescore", action="store_true", help="re-check the transcripts in --out against the cases' patterns"
    )
    args = parser.parse_args()
    if args.rescore:
        rescore(args.out)
        return
    engine = OnnxEngine(threads=args.threads, strategy=OnnxStrategy(pacing=False))
    engine.load()
    try:
        started = time.perf_counter()
        rows = measure(engine)
        elapsed = time.perf_counter() - started
    finally:
        engine.close()
    report = {
        "benchmark": "agent_text",
        "command": command_line(),
        "machine": machine(),
        "engine": "onnx int8, unpaced",
        "voice": "af_heart",
        "asr": "multilingual Whisper base, language en, on faster-whisper, CPU int8, beam 1, 16 kHz (soxr)",
        "cases": len(rows),
        "heard_on": sum(row["heard_on"] for row in rows),
        "heard_off": sum(row["heard_off"] for row in rows),
        "elapsed_s": round(elapsed, 1),
        "rows": rows,
    }
    print(f"heard: {report['heard_on']}/{len(rows)} normalized, {report['heard_off']}/{len(rows)} as written")
    write_json(args.out, report)


if __name__ == "__main__":
    main()
