"""The streaming clients a user runs, as processes: `voicestream speak` with text piped in as it is
written, `voicestream call` against the real speak app behind a SigV4-verifying front (the
function URL's AWS_IAM auth: the same check the SageMaker fakes make), and `voicestream serve
--speak-url`'s proxy signing for a browser that holds no keys.

The speak app's bidi sessions go to the real Kokoro server with the real model; the audio that
comes out is checked by Whisper. Nothing is timed: "streamed" is shown causally (audio is in the
file while stdin is still open). The same clients when the other side fails:
tests/unit/test_clients.py, whose helpers this uses.
"""

from __future__ import annotations

import io
import subprocess
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.support.server import LiveServer
from tests.unit.test_clients import ACCESS_KEY, FAST, REGION, SECRET, VOICESTREAM, caller_env, signed_front
from voicestream.devserver import bind_free_port, serve_in_thread
from voicestream.local_stack import create_proxy_app
from voicestream.origins import allowed_hosts
from voicestream.speak.app import create_app as create_speak_app
from voicestream.speak.config import SpeakConfig
from voicestream.wire.speak import Done, SentenceAudio, SpeakStreamDecoder

TEXT = "Your table is booked for eight tonight. The restaurant is near the river."


def wav_pcm(path: Path) -> bytes:
    with wave.open(str(path), "rb") as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24_000, 1, 2)
        return wav.readframes(wav.getnframes())


@pytest.fixture
def speak_url(kokoro_server: LiveServer) -> Iterator[str]:
    config = SpeakConfig(kokoro_ws_url=kokoro_server.ws_url, replay_pace=FAST)
    with signed_front(create_speak_app(config, log_stream=io.StringIO(), metrics=False)) as url:
        yield url


def test_speak_reads_stdin_as_it_is_written(kokoro_server: LiveServer, tmp_path: Path, asr: ModuleType) -> None:
    out = tmp_path / "spoken.wav"
    first, rest = "Thanks for waiting, I found your booking.", " Your flight leaves at nine tomorrow morning."
    command = [*VOICESTREAM, "speak", "--url", kokoro_server.http_url, "--out", str(out)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None
    try:
        # Token by token, as an LLM writes; the next sentence's first word tells the chunker
        # that the first one has ended.
        head, tail = rest.split(" ", 2)[1], " " + rest.split(" ", 2)[2]
        for token in [*first.split(" "), head]:
            process.stdin.write(token.encode() + b" ")
            process.stdin.flush()
        # stdin stays open: the first sentence must be spoken now, not at the end of input.
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size > 44 + 24_000):
            assert process.poll() is None, "speak ended early"
            assert time.monotonic() < deadline, "no audio while stdin is open"
            time.sleep(0.1)
        process.stdin.write(tail.lstrip().encode())
        process.stdin.close()
        process.wait(timeout=120)  # its stderr is a few lines: the pipe cannot fill
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
    report = stderr.decode()
    assert process.returncode == 0, report
    # The first clause ("Thanks for waiting,": FIRST_CLAUSE_MIN_WORDS words) is cut on its own.
    assert "first audio at" in report and "complete: 3 sentence(s)" in report
    assert asr.word_error_rate(first + rest, asr.transcribe(wav_pcm(out))) <= 0.2


def test_call_signs_streams_and_reports(speak_url: str, tmp_path: Path, asr: ModuleType) -> None:
    out = tmp_path / "call.wav"
    result = subprocess.run(
        [*VOICESTREAM, "call", speak_url, "--text", TEXT, "--region", REGION, "--out", str(out)],
        env=caller_env(),
        capture_output=True,
        timeout=180,
    )
    report = result.stderr.decode()
    assert result.returncode == 0, report
    assert "first audio at the caller:" in report and "complete: 2 sentence(s)" in report
    assert asr.word_error_rate(TEXT, asr.transcribe(wav_pcm(out))) <= 0.2


def test_call_with_the_wrong_key_is_one_clear_403_line(speak_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [*VOICESTREAM, "call", speak_url, "--prompt", "Hi", "--region", REGION, "--out", str(tmp_path / "x.wav")],
        env=caller_env(secret="not-the-secret"),
        capture_output=True,
        timeout=60,
    )
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("voicestream: HTTP 403 forbidden") and "lambda:InvokeFunctionUrl" in lines[0]


def test_serve_speak_url_proxies_for_a_browser_without_keys(speak_url: str, asr: ModuleType) -> None:
    from botocore.credentials import Credentials

    listener = bind_free_port()
    hosts = allowed_hosts("127.0.0.1", listener.getsockname()[1])
    proxy = create_proxy_app(speak_url, Credentials(ACCESS_KEY, SECRET), region=REGION, hosts=hosts)
    with serve_in_thread(proxy, "proxy", listener=listener) as running:
        # What the page does: a plain POST /speak, no credentials anywhere.
        decoder = SpeakStreamDecoder("binary")
        events = []
        body = {"text": TEXT, "transport": "binary"}
        with httpx.stream("POST", f"{running.url}/speak", json=body, timeout=120) as response:
            assert response.status_code == 200, response.read()
            assert "authorization" not in {k.lower() for k in response.request.headers}
            for chunk in response.iter_raw():
                events.extend(decoder.feed(chunk))
        decoder.close()
        assert httpx.get(f"{running.url}/voices").json()["default"] == "af_heart"
        assert httpx.get(f"{running.url}/").status_code == 200  # the page itself
        refused = httpx.post(f"{running.url}/speak", json={"text": "Hi.", "mode": "sideways"})
    done = events[-1]  # the front answers 403 to anything unsigned: 200 means the proxy signed it
    assert isinstance(done, Done) and done.status == "complete"
    audio = b"".join(e.data for e in events if isinstance(e, SentenceAudio))
    assert asr.word_error_rate(TEXT, asr.transcribe(audio)) <= 0.2
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_mode"  # the function's own answer


async def test_speak_through_a_sagemaker_endpoint(
    kokoro_server: LiveServer, tmp_path: Path, asr: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`voicestream speak --endpoint`'s path: the SageMaker transport (the real SDK; only the HTTP/2
    service is fake, relaying to the real server as the sidecar does)."""
    from tests.support.fake_sagemaker import FakeSageMakerRuntime
    from voicestream.clients.audio_out import WavFileSink
    from voicestream.clients.speak_command import GivenText, session_factory, speak
    from voicestream.speak.run import SpeakOptions

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeSageMakerRuntime(
        region=REGION, credentials={ACCESS_KEY: SECRET}, endpoints={"kokoro": kokoro_server.ws_url}
    )
    sink = WavFileSink(tmp_path / "sagemaker.wav")
    report = io.StringIO()
    factory = session_factory(None, "kokoro", REGION, http_client_factory=fake.connection)
    status = await speak(GivenText(TEXT), factory, SpeakOptions(), sink, report)
    sink.close()
    assert status == 0, report.getvalue()
    assert "first audio at" in report.getvalue() and "complete: 2 sentence(s)" in report.getvalue()
    assert len(fake.streams) == 1  # one session carried both sentences
    assert asr.word_error_rate(TEXT, asr.transcribe(wav_pcm(tmp_path / "sagemaker.wav"))) <= 0.2
