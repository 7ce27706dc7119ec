"""An ASGI app under uvicorn on a free 127.0.0.1 port, in a background thread: the one way the
demo, the benchmarks and the tests run a server in-process.

    with serve_in_thread(app, "kokoro-server") as server:
        httpx.get(f"{server.url}/ping")

The context returns once uvicorn listens; `wait_until_ready` polls a readiness path until it
answers 200 (the Kokoro server's /ping says 503 while the model loads). `RunningServer.call`
runs a function on the server's own event loop, to read its state without racing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import uvicorn

from voicestream.httpserver import uvicorn_options as server_options
from voicestream.wire.errors import CodedError, ErrorCode

T = TypeVar("T")


class ServerStartError(CodedError):
    """The server did not start, or did not become ready in time."""

    code = ErrorCode.NOT_READY


@dataclass(frozen=True)
class RunningServer:
    server: uvicorn.Server
    port: int
    loop: asyncio.AbstractEventLoop

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, function: Callable[[], T], timeout: float = 10.0) -> T:
        """Run `function` on the server's event loop and return its result."""

        async def run() -> T:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)


def bind_free_port(send_buffer: int | None = None) -> socket.socket:
    """A listening socket on 127.0.0.1:<free port>: for an app that must know its own URL before
    it is built (the local stack). `send_buffer` fixes the kernel send buffer of accepted
    connections (Linux copies it from the listening socket), so a test reaches backpressure
    within kilobytes."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if send_buffer is not None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


@contextlib.contextmanager
def serve_in_thread(
    app: Any,
    name: str = "server",
    *,
    listener: socket.socket | None = None,
    start_timeout_s: float = 60.0,
    **uvicorn_options: Any,
) -> Iterator[RunningServer]:
    """Run `app` until the block ends, then shut it down gracefully; on `listener` if given
    (see `bind_free_port`), else on a free port. The server has the limits of
    `httpserver.uvicorn_options` (as `voicestream serve`), `uvicorn_options` on top."""
    options: dict[str, Any] = {**server_options(), "log_level": "warning", **uvicorn_options}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, **options))
    sockets = None if listener is None else [listener]
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise ServerStartError(f"the {name} did not start")
        time.sleep(0.02)
    bound = server.servers[0]
    running = RunningServer(server=server, port=bound.sockets[0].getsockname()[1], loop=bound.get_loop())
    try:
        yield running
    finally:
        server.should_exit = True
        thread.join(30)
        if listener is not None:
            listener.close()


def wait_until_ready(url: str, timeout_s: float, path: str = "/ping") -> None:
    """Poll `url + path` until it answers 200; `ServerStartError` naming the last answer when
    it does not in time, or at once when the answer says loading failed."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            response = httpx.get(url + path, timeout=5)
            if response.status_code == 200:
                return
            last = f"HTTP {response.status_code}: {response.text[:300]}"
            if response.headers.get("content-type", "").startswith("application/json"):
                with contextlib.suppress(ValueError):
                    if response.json().get("status") == "failed":
                        raise ServerStartError(f"{url} failed to start: {last}")
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise ServerStartError(f"{url}{path} did not answer 200 within {timeout_s:g} s ({last})")
        time.sleep(0.1)
