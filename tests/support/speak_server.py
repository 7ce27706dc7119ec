"""The real speak app under uvicorn on a real 127.0.0.1 socket, in a background thread.

`start_speak_server(config)` yields a `SpeakServer` once GET /health answers 200; requests
then go over real TCP exactly as the Lambda Web Adapter would send them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from voicestream.devserver import serve_in_thread, wait_until_ready
from voicestream.speak.app import create_app
from voicestream.speak.config import SpeakConfig


@dataclass
class SpeakServer:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def start_speak_server(config: SpeakConfig, log_stream: TextIO | None = None) -> Iterator[SpeakServer]:
    app = create_app(config, log_stream=log_stream)
    with serve_in_thread(app, "uvicorn-speak", lifespan="off") as running:
        wait_until_ready(running.url, 10, path="/health")
        yield SpeakServer(port=running.port)
