"""The streaming clients a user runs, as processes, when the other side fails: `voicestream speak`
with no server there, `voicestream call` answered 429 by the SigV4-verifying front (the function
URL's AWS_IAM auth) and against a speak app whose speech server is gone. No model; the helpers
are shared with tests/integration/test_clients.py (the same clients speaking, heard by Whisper)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from tests.statemachines.sigv4 import RequireSigV4
from voicestream.devserver import bind_free_port, serve_in_thread
from voicestream.speak.app import create_app as create_speak_app
from voicestream.speak.config import SpeakConfig
from voicestream.speak.sources import ReplayPace

REGION = "eu-west-1"
ACCESS_KEY, SECRET = "AKIDCALLER", "caller-secret"
VOICESTREAM = [sys.executable, "-m", "voicestream.cli"]
FAST = ReplayPace(first_token_s=0.0, tokens_per_s=500)


def caller_env(secret: str = SECRET) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {
        **env,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@contextlib.contextmanager
def signed_front(app: ASGIApp, rejections: list[str] | None = None) -> Iterator[str]:
    """`app` behind a function URL's AWS_IAM check, on a free port; yields its base URL."""
    secrets = {ACCESS_KEY: SECRET}
    front = RequireSigV4(app, secrets=lambda: secrets, region=REGION, service="lambda", rejections=rejections)
    with serve_in_thread(front, "signed-front", lifespan="off") as running:
        yield running.url


def test_speak_refuses_a_server_that_is_not_there(tmp_path: Path) -> None:
    listener = bind_free_port()  # bound, never listening: connecting is refused at once
    port = listener.getsockname()[1]
    listener.close()
    result = subprocess.run(
        [*VOICESTREAM, "speak", "Hello.", "--url", f"ws://127.0.0.1:{port}", "--out", str(tmp_path / "x.wav")],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert lines[0].startswith("voicestream speak: [tts_unavailable]"), lines


def test_call_throttled_is_one_clear_429_line(tmp_path: Path) -> None:
    async def throttled(request: object) -> JSONResponse:
        return JSONResponse({"Message": "Rate Exceeded."}, status_code=429)

    app = Starlette(routes=[Route("/speak", throttled, methods=["POST"])])
    with signed_front(app) as url:
        result = subprocess.run(
            [*VOICESTREAM, "call", url, "--text", "Hi.", "--region", REGION, "--out", str(tmp_path / "x.wav")],
            env=caller_env(),
            capture_output=True,
            timeout=60,
        )
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and lines == [
        "voicestream: HTTP 429 throttled: the function is at its concurrency "
        "limit; retry later. AWS said: Rate Exceeded."
    ]


def test_call_reports_tts_unavailable_in_one_line(tmp_path: Path) -> None:
    listener = bind_free_port()
    dead = f"ws://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    config = SpeakConfig(kokoro_ws_url=dead, replay_pace=FAST, connect_timeout_s=5)
    with signed_front(create_speak_app(config, log_stream=io.StringIO(), metrics=False)) as url:
        result = subprocess.run(
            [*VOICESTREAM, "call", url, "--text", "Hi there.", "--region", REGION, "--out", str(tmp_path / "x.wav")],
            env=caller_env(),
            capture_output=True,
            timeout=60,
        )
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 1
    assert lines[0].startswith("voicestream call: the speech endpoint is unavailable [tts_unavailable]:"), lines
    assert lines[1].startswith("error: 0 sentence(s)") or lines[1].startswith("error: 1 sentence(s)"), lines
