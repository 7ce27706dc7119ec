"""The container without Docker: its `serve` entrypoint run as SageMaker runs it, on the real
model (its Dockerfile is checked in tests/unit/test_server_container.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from voicestream.devserver import wait_until_ready
from voicestream.env import default_model_dir

# `serve` loads the real Kokoro-82M in its own process, where no fixture marks it.
pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
SERVE = ROOT / "container" / "serve"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_entrypoint_starts_the_server_and_stops_on_sigterm() -> None:
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "VOICESTREAM_BACKEND": "onnx",  # the CPU engine: the image's torch default needs the GPU build
        "VOICESTREAM_HOST": "127.0.0.1",
        "VOICESTREAM_PORT": str(port),
        "VOICESTREAM_THREADS": "1",
        "VOICESTREAM_MODEL_DIR": str(default_model_dir()),
    }
    # `serve` exactly as SageMaker passes it (docker run <image> serve).
    process = subprocess.Popen(
        [str(SERVE), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}", 300)
        response = httpx.post(f"http://127.0.0.1:{port}/invocations", json={"text": "Hi."}, timeout=120)
        assert response.status_code == 200 and len(response.content) > 4800
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells why.
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete." in output
    lines = [line for line in output.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is a JSON object
    events = [record["event"] for record in records]
    assert "engine_ready" in events and "invocation_done" in events
    assert all("request_id" in record and "session_id" in record for record in records)
