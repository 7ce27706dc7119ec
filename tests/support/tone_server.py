"""`python -m tests.support.tone_server PORT`: the real Kokoro server app around the tone engine
with word timings, on 127.0.0.1:PORT (the plugin tests' word-timing server: the ONNX engine
does not time words yet)."""

from __future__ import annotations

import sys

import uvicorn

from tests.support.fakes import ToneEngine
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits


def main() -> None:
    port = int(sys.argv[1])
    app = create_app(ToneEngine(ms_per_char=15, chunk_ms=80, step_delay_s=0.01, words=True), Limits())
    uvicorn.run(app, host="127.0.0.1", port=port, ws="websockets-sansio", log_level="warning")


if __name__ == "__main__":
    main()
