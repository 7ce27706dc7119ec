"""The chunker's fast first clause: first_clause_min_words 3 vs 4 vs none, on 32 agent replies.

Each reply of src/voicestream/data/agent_replies.json (written for this project: varied
openings, 2 to 5 sentences) is spoken by `run_bidi` (the speak function's core) from the replay
text source at an LLM's pace (first token after 300 ms, then 50 tokens/s) over one real bidi
session to the in-process Kokoro server, once per setting; settings rotate per reply so the
machine's load falls on all alike. Per run: first audio (ms from the reply's start, the speak
function's clock), when the first piece was cut, and the whole reply's audio. Each distinct
piece list is transcribed once by the offline Whisper tiny.en and scored by WER (numbers spelled
out on both sides), since synthesis is deterministic.

    .venv/bin/python benchmarks/first_clause.py [--repeats 1] [--limit 32]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
from importlib import resources
from typing import Any

from common import ROOT, base_parser, header, kokoro_server, ratio, summary, write_json
from intelligibility import spell_numbers
from voicestream.chunker import split_sentences
from voicestream.speak.run import SpeakOptions, run_bidi
from voicestream.speak.sources import ReplayPace, ReplaySource
from voicestream.speech import BidiSession
from voicestream.wire.speak import Done, ReplyError, Sentence, SentenceAudio

sys.path.insert(0, str(ROOT))  # the ASR helper lives with the tests
from tests.support.asr import transcribe, word_error_rate

SETTINGS: dict[str, int | None] = {"3": 3, "4": 4, "none": None}
PACE = ReplayPace(first_token_s=0.3, tokens_per_s=50.0)


def replies() -> list[str]:
    data = json.loads(resources.files("voicestream.data").joinpath("agent_replies.json").read_text())
    return list(data["replies"])


async def speak(ws_url: str, text: str, min_words: int | None) -> dict[str, Any]:
    options = SpeakOptions(first_clause_min_words=min_words)
    events = run_bidi(ReplaySource(text, PACE), lambda: BidiSession.websocket(ws_url), options)
    audio = bytearray()
    pieces: list[str] = []
    done: Done | None = None
    async for event in events:
        if isinstance(event, SentenceAudio):
            audio += event.data
        elif isinstance(event, Sentence):
            pieces.append(event.text)
        elif isinstance(event, ReplyError):
            raise RuntimeError(f"{event.code}: {event.message}")
        elif isinstance(event, Done):
            done = event
    if done is None or done.status != "complete" or done.timings.first_audio_ms is None:
        raise RuntimeError(f"the reply did not complete: {done}")
    return {
        "first_audio_ms": round(done.timings.first_audio_ms, 1),
        "first_piece_ms": done.timings.first_sentence_ms,
        "pieces": pieces,
        "audio": bytes(audio),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "first_clause.json", repeats=1)
    parser.add_argument("--limit", type=int, default=None, help="only the first N replies (a quick look)")
    args = parser.parse_args()
    texts = replies()[: args.limit]
    runs: list[dict[str, Any]] = []
    with kokoro_server(args.url, threads=args.threads) as server:
        for repeat in range(args.repeats):
            for index, text in enumerate(texts):
                names = list(SETTINGS)
                rotation = (index + repeat) % len(names)
                for name in names[rotation:] + names[:rotation]:
                    result = asyncio.run(speak(server.ws_url, text, SETTINGS[name]))
                    runs.append({"repeat": repeat, "reply": index, "setting": name, **result})
            print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
        report = header("first_clause", args, server, pace={"first_token_ms": 300, "tokens_per_s": 50})
    wer_by_pieces: dict[tuple[str, ...], dict[str, Any]] = {}
    for run in runs:
        key = tuple(run["pieces"])
        if key not in wer_by_pieces:
            heard = spell_numbers(transcribe(run["audio"]))
            text = texts[run["reply"]]
            wer_by_pieces[key] = {"wer": word_error_rate(spell_numbers(text), heard), "transcript": heard}
        run["wer"] = wer_by_pieces[key]["wer"]
    settings: dict[str, Any] = {}
    for name in SETTINGS:
        mine = [run for run in runs if run["setting"] == name]
        cut = sum(
            1
            for index, text in enumerate(texts)
            if split_sentences(text, first_clause_min_words=SETTINGS[name])[0] != split_sentences(text)[0]
        )
        settings[name] = {
            "first_clause_min_words": SETTINGS[name],
            "replies_cut_at_a_clause": cut,
            "first_audio_ms": summary(run["first_audio_ms"] for run in mine),
            "first_piece_ms": summary(run["first_piece_ms"] for run in mine if run["first_piece_ms"] is not None),
            "wer_mean": round(statistics.mean(run["wer"] for run in mine if run["repeat"] == 0), 4),
        }
    paired: dict[str, Any] = {}
    for name in ("3", "4"):
        ratios = []
        for run in runs:
            if run["setting"] != name:
                continue
            base = next(
                r for r in runs if (r["repeat"], r["reply"], r["setting"]) == (run["repeat"], run["reply"], "none")
            )
            ratios.append(base["first_audio_ms"] / run["first_audio_ms"])
        cut_only = [
            value
            for value, run in zip(ratios, [r for r in runs if r["setting"] == name], strict=True)
            if run["pieces"][0] != split_sentences(texts[run["reply"]])[0]
        ]
        paired[f"none/{name}"] = {
            "median_of_paired": round(statistics.median(ratios), 3),
            "median_where_cut": round(statistics.median(cut_only), 3) if cut_only else None,
            "replies_cut": len(cut_only),
        }
    report.update(
        {
            "replies": len(texts),
            "settings": settings,
            "first_audio_none_over_setting": paired,
            "ratio_of_medians": {
                name: ratio(settings["none"]["first_audio_ms"]["median"], settings[name]["first_audio_ms"]["median"])
                for name in ("3", "4")
            },
            "runs": [{k: v for k, v in run.items() if k != "audio"} for run in runs],
            "transcripts": [{"pieces": list(key), **value} for key, value in wer_by_pieces.items()],
        }
    )
    write_json(args.out, report)
    for name, row in settings.items():
        print(
            f"min words {name}: first audio median {row['first_audio_ms'].get('median')} ms, "
            f"p95 {row['first_audio_ms'].get('p95')} ms; cut {row['replies_cut_at_a_clause']}/{len(texts)}; "
            f"WER {row['wer_mean'] * 100:.1f}%"
        )
    print("paired none/setting:", paired)


if __name__ == "__main__":
    main()
