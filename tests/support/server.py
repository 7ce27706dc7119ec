"""The real server app under uvicorn on a real 127.0.0.1 socket, in a background thread.

`start_server(app)` is a context manager yielding a `LiveServer` once /ping answers 200.
`LiveServer.on_loop(fn)` runs a function on the server's own event loop (to count its tasks,
read its runtime stats) without racing it.
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
from starlette.applications import Starlette

from voicestream.server.app import BIDI_PATH
from voicestream.server.runtime import ServerRuntime

T = TypeVar("T")


@dataclass
class LiveServer:
    app: Starlette
    port: int
    server: uvicorn.Server
    loop: asyncio.AbstractEventLoop

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{BIDI_PATH}"

    @property
    def runtime(self) -> ServerRuntime:
        runtime: ServerRuntime = self.app.state.runtime
        return runtime

    def on_loop(self, function: Callable[[], T], timeout: float = 10.0) -> T:
        async def call() -> T:
            return function()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def task_names(self) -> list[str]:
        """Names of the tasks alive on the server loop (other than the one asking)."""

        def names() -> list[str]:
            current = asyncio.current_task()
            return sorted(task.get_name() for task in asyncio.all_tasks() if task is not current)

        return self.on_loop(names)

    def session_tasks(self) -> list[str]:
        return [name for name in self.task_names() if name.startswith("voicestream-")]

    def wait_until(self, condition: Callable[[LiveServer], bool], wait_s: float = 60.0) -> None:
        """`until` for synchronous tests."""
        deadline = time.monotonic() + wait_s
        while not condition(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not reached within {wait_s} s: {condition}")
            time.sleep(0.05)

    async def until(self, condition: Callable[[LiveServer], bool], wait_s: float = 60.0) -> None:
        """Poll until `condition(server)` holds, letting the caller's loop run meanwhile (its
        sockets must close); fail with a clear message when it never does."""
        deadline = time.monotonic() + wait_s
        while not condition(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not reached within {wait_s} s: {condition}")
            await asyncio.sleep(0.05)


@contextlib.contextmanager
def start_server(
    app: Starlette,
    ready_timeout: float = 300.0,
    wait_ready: bool = True,
    send_buffer: int | None = None,
    **uvicorn_options: Any,
) -> Iterator[LiveServer]:
    """Run `app` on 127.0.0.1:<free port> until the block ends; waits for /ping 200 unless
    `wait_ready` is False. `send_buffer` fixes the kernel send buffer of accepted connections
    (Linux copies it from the listening socket), so backpressure is reached within kilobytes."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        ws="websockets-sansio",
        log_level="warning",
        lifespan="on",
        **uvicorn_options,
    )
    server = uvicorn.Server(config)
    sockets = None
    if send_buffer is not None:
        listener_socket = socket.socket()
        listener_socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        listener_socket.bind(("127.0.0.1", 0))
        listener_socket.listen()
        sockets = [listener_socket]
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, name="uvicorn-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    listener = server.servers[0]
    live = LiveServer(app=app, port=listener.sockets[0].getsockname()[1], server=server, loop=listener.get_loop())
    try:
        if wait_ready:
            wait_for_ping(live.http_url, ready_timeout)
        yield live
    finally:
        server.should_exit = True
        thread.join(30)


def wait_for_ping(http_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.TransportError):
            response = httpx.get(f"{http_url}/ping", timeout=5)
            if response.status_code == 200:
                return
            if response.json().get("status") == "failed":
                raise RuntimeError(f"the engine failed to load: {response.text}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"/ping did not answer 200 within {timeout} s")
        time.sleep(0.1)
