"""The plugin tiers run in environments of their own (.venv-pipecat, .venv-livekit: their pins
fight the main environment's), so the servers they talk to run as processes of the main
environment, on real 127.0.0.1 sockets:

- `kokoro_url`: the Kokoro server with the real Kokoro-82M (`python -m voicestream.kokoro_server`,
  whole-sentence decoding: its audio a function of the text);
- `tone_url`: the same server app around the tone engine, which times words (tests/support/tone_server.py);
- `kokoro` / `tone`: the same servers with their JSON logs (what the server saw: `cancelled`, ...).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

# The frameworks warn about their own deprecated classes (and pipecat about audioop) while they
# are imported: import them once here, where those warnings are not ours to fix. The warnings
# our code causes afterwards still fail the tests.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    for framework in ("pipecat.services.tts_service", "livekit.agents"):
        with contextlib.suppress(ImportError):  # each plugin environment has one of them
            importlib.import_module(framework)

ROOT = Path(__file__).resolve().parents[2]
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ServerProcess:
    """A server of the main environment: its URL and its JSON log lines (stderr, one per line)."""

    url: str
    log: Path

    def log_events(self, name: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        return [record for record in records if record.get("event") == name]

    def wait_for_log(self, name: str, wait_s: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_s
        while not (found := self.log_events(name)):
            assert time.monotonic() < deadline, f"the server never logged {name!r}"
            time.sleep(0.1)
        return found


@contextlib.contextmanager
def server_process(
    arguments: list[str], log: Path, ready_s: float = 300.0, settings: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    """Run a server of the main environment on a free port until the block ends, with
    `settings` (VOICESTREAM_* variables) added to its environment."""
    if not MAIN_PYTHON.exists():
        raise RuntimeError(f"{MAIN_PYTHON} is missing: run make venv")
    port = free_port()
    command = [str(MAIN_PYTHON), *[a.replace("{port}", str(port)) for a in arguments]]
    with log.open("wb") as sink:
        environment = {**os.environ, **(settings or {})}
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not answer /ping within {ready_s} s")
            time.sleep(0.2)
        yield ServerProcess(url, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def kokoro(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("kokoro") / "server.log"
    arguments = ["-m", "voicestream.kokoro_server", "--port", "{port}", "--threads", "2", "--decoder-windows", "off"]
    # Each sentence decoded in one run: the server's audio is then a function of the text alone,
    # so a plugin's frames can be compared byte for byte with the server's own answer. (Decoded
    # in windows, a sentence's windows depend on how much audio is still playing before it:
    # docs/engine.md.)
    with server_process(arguments, log) as server:
        yield server


@pytest.fixture(scope="session")
def kokoro_url(kokoro: ServerProcess) -> str:
    return kokoro.url


@pytest.fixture(scope="session")
def tone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("tone") / "server.log"
    with server_process(["-m", "tests.support.tone_server", "{port}"], log, ready_s=60) as server:
        yield server


@pytest.fixture(scope="session")
def tone_url(tone: ServerProcess) -> str:
    return tone.url
