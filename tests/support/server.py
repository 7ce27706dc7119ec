"""The real server app under uvicorn on a real 127.0.0.1 socket, in a background thread.

`start_server(app)` is a context manager yielding a `LiveServer` once /ping answers 200.
`LiveServer.on_loop(fn)` runs a function on the server's own event loop (to count its tasks,
read its runtime stats) without racing it. The server itself runs through
`voicestream.devserver`, like the demo's and the benchmarks'.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.applications import Starlette

from voicestream.devserver import RunningServer, bind_free_port, serve_in_thread, wait_until_ready
from voicestream.kokoro_server.runtime import ServerRuntime
from voicestream.wire.bidi import BIDI_PATH

T = TypeVar("T")


@dataclass
class LiveServer:
    app: Starlette
    running: RunningServer

    @property
    def port(self) -> int:
        return self.running.port

    @property
    def http_url(self) -> str:
        return self.running.url

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{BIDI_PATH}"

    @property
    def runtime(self) -> ServerRuntime:
        runtime: ServerRuntime = self.app.state.runtime
        return runtime

    def on_loop(self, function: Callable[[], T], timeout: float = 10.0) -> T:
        return self.running.call(function, timeout)

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
    `wait_ready` is False. `send_buffer`: see `voicestream.devserver.serve_in_thread`."""
    listener = None if send_buffer is None else bind_free_port(send_buffer)
    with serve_in_thread(app, "uvicorn-test-server", listener=listener, **uvicorn_options) as running:
        live = LiveServer(app=app, running=running)
        if wait_ready:
            wait_until_ready(live.http_url, ready_timeout)
        yield live
