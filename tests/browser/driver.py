"""The Python side of tests/browser/driver.mjs: a real Chromium, one JSON command per line.

`Browser()` starts node with the driver (playwright-core from tests/browser/node_modules, which
`make test` installs with `npm ci`) and Debian's /usr/bin/chromium (`make test-integration` installs it when missing).
Every call waits for its answer; a failed browser action raises `BrowserError` with
Playwright's message.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CHROMIUM = Path(os.environ.get("VOICESTREAM_CHROMIUM", "/usr/bin/chromium"))


class BrowserError(AssertionError):
    """The browser could not do what the test asked."""


def missing_requirements() -> list[str]:
    """What the browser tests need and this machine lacks (they fail, with this list, rather than skip)."""
    missing = []
    if shutil.which("node") is None:
        missing.append("node (apt-get install nodejs npm)")
    if not (HERE / "node_modules" / "playwright-core").is_dir():
        missing.append("playwright-core (cd tests/browser && npm ci; `make test` does it)")
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium; make test-integration does it as root)")
    return missing


class Browser:
    def __init__(self, timeout_s: float = 120.0) -> None:
        missing = missing_requirements()
        if missing:
            raise BrowserError("the browser test needs: " + "; ".join(missing))
        self.timeout_s = timeout_s
        self._next_id = 0
        self._stderr: list[str] = []
        self._process = subprocess.Popen(
            ["node", str(HERE / "driver.mjs")],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._drain_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.version = self._answer(0)["chromium"]

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put("")  # the driver exited

    def _drain_stderr(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self._stderr.append(line.rstrip())

    def _answer(self, expected_id: int, timeout_s: float | None = None) -> Any:
        try:
            line = self._lines.get(timeout=timeout_s or self.timeout_s)
        except queue.Empty:
            line = ""
        if not line:
            stderr = "\n".join(self._stderr[-20:])
            raise BrowserError(f"the browser driver did not answer (exit {self._process.poll()}):\n{stderr}")
        message = json.loads(line)
        if message["id"] != expected_id:
            raise BrowserError(f"driver answered {message['id']}, expected {expected_id}")
        if not message["ok"]:
            raise BrowserError(message["error"])
        return message["value"]

    def call(self, op: str, **arguments: Any) -> Any:
        assert self._process.stdin is not None
        self._next_id += 1
        self._process.stdin.write(json.dumps({"id": self._next_id, "op": op, **arguments}) + "\n")
        self._process.stdin.flush()
        # A `wait` may take its whole timeout before it answers.
        return self._answer(self._next_id, self.timeout_s + arguments.get("timeout_ms", 0) / 1000)

    def goto(self, url: str) -> Any:
        return self.call("goto", url=url)

    def click(self, selector: str) -> None:
        self.call("click", selector=selector)

    def fill(self, selector: str, value: str) -> None:
        self.call("fill", selector=selector, value=value)

    def select(self, selector: str, value: str) -> None:
        self.call("select", selector=selector, value=value)

    def eval(self, expression: str) -> Any:
        return self.call("eval", expression=expression)

    def wait(self, expression: str, timeout_s: float = 60.0) -> None:
        """Until `expression` is truthy in the page; BrowserError (with the page's state) if never."""
        try:
            self.call("wait", expression=expression, timeout_ms=int(timeout_s * 1000))
        except BrowserError as error:
            state = self.eval(
                "({stats: window.voicestream?.stats, status: document.getElementById('status')?.textContent})"
            )
            raise BrowserError(f"{error}\nwaiting for: {expression}\npage: {state}") from None

    def screenshot(self, path: Path) -> Path:
        return Path(self.call("screenshot", path=str(path)))

    def problems(self) -> list[str]:
        """Page errors and console errors since the last call."""
        problems: list[str] = self.call("problems")
        return problems

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            try:
                self._process.stdin.write(json.dumps({"id": -1, "op": "close"}) + "\n")
                self._process.stdin.flush()
                # node exits only at stdin's EOF (the open pipe keeps its event loop alive): without
                # it every close waited the 30 s below and killed the driver.
                self._process.stdin.close()
                self._process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait(10)
        for reader in self._readers:  # they end at the pipes' EOF, now that the driver exited
            reader.join(10)
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()
