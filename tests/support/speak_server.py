"""The real speak app under uvicorn on a real 127.0.0.1 socket, in a background thread.

`start_speak_server(config)` yields a `SpeakServer` once GET /health answers 200; requests
then go over real TCP exactly as the Lambda Web Adapter would send them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import httpx
import uvicorn

from voicestream.agent.app import create_app
from voicestream.agent.config import SpeakConfig


@dataclass
class SpeakServer:
    port: int
    server: uvicorn.Server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def start_speak_server(config: SpeakConfig, log_stream: TextIO | None = None) -> Iterator[SpeakServer]:
    app = create_app(config, log_stream=log_stream)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="uvicorn-speak", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the speak server did not start")
        time.sleep(0.02)
    live = SpeakServer(port=server.servers[0].sockets[0].getsockname()[1], server=server)
    try:
        assert httpx.get(f"{live.url}/health", timeout=10).status_code == 200
        yield live
    finally:
        server.should_exit = True
        thread.join(30)
