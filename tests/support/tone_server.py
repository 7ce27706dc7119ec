"""`python -m tests.support.tone_server PORT`: the real Kokoro server app around the tone engine
with word timings, on 127.0.0.1:PORT (the plugin tests' word-timing server: words timed by a
rule the test knows, where the ONNX engine's come from its duration predictor)."""

from __future__ import annotations

import sys

import uvicorn

from tests.support.fakes import ToneEngine
from voicestream.httpserver import uvicorn_options
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.logs import logging_config
from voicestream.wire.bidi import Limits


def main() -> None:
    port = int(sys.argv[1])
    app = create_app(ToneEngine(ms_per_char=15, chunk_ms=80, step_delay_s=0.01, words=True), Limits())
    # JSON log lines on stderr, as the real server writes them (tests read `cancelled` there).
    # The transport limits of every server voicestream runs (voicestream.httpserver).
    uvicorn.run(app, host="127.0.0.1", port=port, log_config=logging_config("INFO"), **uvicorn_options())


if __name__ == "__main__":
    main()
