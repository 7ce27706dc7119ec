"""The OpenAI-compatible route streams: time to the first audio chunk vs to the whole response.

The official `openai` SDK (`with_streaming_response`) asks the real server for the 4-sentence
paragraph in each response format; the clock starts when the request is sent. A non-streaming
server would deliver its first byte only when the whole text is synthesized (first ≈ whole);
ours sends the first sentence's audio as soon as it exists. Runs alternate the formats' order.

    .venv/bin/python benchmarks/openai_speech.py [--url http://host:port] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import openai

from common import LocalServer, base_parser, header, kokoro_server, ratio, summary, write_json
from voicestream.texts import paragraph

FORMATS = ("pcm", "mp3", "opus", "aac", "flac", "wav")


def one_request(client: openai.OpenAI, audio_format: str, text: str) -> dict[str, float]:
    started = time.perf_counter()
    first: float | None = None
    size = 0
    with client.audio.speech.with_streaming_response.create(
        model="kokoro",
        voice="af_heart",
        input=text,
        response_format=audio_format,  # type: ignore[arg-type]
    ) as response:
        for chunk in response.iter_bytes():
            if first is None and chunk:
                first = time.perf_counter() - started
            size += len(chunk)
    whole = time.perf_counter() - started
    assert first is not None
    return {"first_chunk_s": first, "whole_s": whole, "bytes": size}


def measure(server: LocalServer, repeats: int) -> dict[str, Any]:
    text = paragraph()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in FORMATS}
    with openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0, timeout=600) as client:
        one_request(client, "pcm", "Warm up.")
        for run in range(repeats):
            order = FORMATS if run % 2 == 0 else tuple(reversed(FORMATS))
            for name in order:
                results[name].append(one_request(client, name, text))
                last = results[name][-1]
                print(f"  run {run + 1} {name:<5} first {last['first_chunk_s']:.2f} s, whole {last['whole_s']:.2f} s")
    rows = {}
    for name, runs in results.items():
        first = summary([r["first_chunk_s"] for r in runs], 3)
        whole = summary([r["whole_s"] for r in runs], 3)
        rows[name] = {
            "first_chunk_s": first,
            "whole_s": whole,
            "whole_over_first_median": ratio(whole["median"], first["median"]),
            "bytes": runs[-1]["bytes"],
        }
    return {"text": text, "formats": rows}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "openai_speech.json", repeats=3)
    args: argparse.Namespace = parser.parse_args()
    with kokoro_server(args.url, args.threads) as server:
        measured = measure(server, args.repeats)
        report = header("openai_speech", args, server, client=f"openai {openai.__version__}", **measured)
    write_json(args.out, report)


if __name__ == "__main__":
    main()
