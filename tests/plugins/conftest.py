"""The plugin tiers run in environments of their own (.venv-pipecat, .venv-livekit: their pins
fight the main environment's), so the servers they talk to run as processes of the main
environment, on real 127.0.0.1 sockets:

- `kokoro_url`: the Kokoro server with the real Kokoro-82M (`python -m voicestream.kokoro_server`);
- `tone_url`: the same server app around the tone engine, which times words (tests/support/tone_server.py).
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

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


@contextlib.contextmanager
def server_process(arguments: list[str], ready_s: float = 300.0) -> Iterator[str]:
    """Run a server of the main environment on a free port until the block ends; yields its URL."""
    if not MAIN_PYTHON.exists():
        raise RuntimeError(f"{MAIN_PYTHON} is missing: run make venv")
    port = free_port()
    command = [str(MAIN_PYTHON), *[a.replace("{port}", str(port)) for a in arguments]]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{command} exited: {process.stderr.read().decode()[-2000:] if process.stderr else ''}"
                )
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not answer /ping within {ready_s} s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


@pytest.fixture(scope="session")
def kokoro_url() -> Iterator[str]:
    threads = "2"
    with server_process(["-m", "voicestream.kokoro_server", "--port", "{port}", "--threads", threads]) as url:
        yield url


@pytest.fixture(scope="session")
def tone_url() -> Iterator[str]:
    with server_process(["-m", "tests.support.tone_server", "{port}"], ready_s=60) as url:
        yield url
