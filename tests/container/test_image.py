"""The CPU image under a real Docker engine, started as SageMaker starts it (`docker run <image>
serve`, the model read-only at /opt/ml/model), on the real Kokoro-82M model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.container.conftest import ServingContainer, StartContainer
from tests.container.engine import docker
from voicestream.speech import (
    Audio,
    BidiSession,
    FrameMode,
    RequestCompleted,
    SessionConnectError,
    SynthesisStart,
)

BIDI_LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
SENTENCES = [  # the deploy-validate check's sentences (events/validate.json)
    "The first sentence arrives as a binary frame.",
    "The second one follows in the same session.",
    "And the third proves the session stays open.",
]
STOP_GRACE_S = 5.0  # "within a few seconds": SageMaker and `docker stop` wait longer before SIGKILL


def test_image_has_the_bidi_label_and_sagemakers_contract(cpu_image: str) -> None:
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", cpu_image).stdout)
    assert config["Labels"][BIDI_LABEL] == "true"
    assert config["Cmd"] == ["serve"] and not config.get("Entrypoint")
    assert "8080/tcp" in config["ExposedPorts"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["VOICESTREAM_MODEL_DIR"] == "/opt/ml/model" and env["VOICESTREAM_PORT"] == "8080"
    assert env["VOICESTREAM_BACKEND"] == "onnx"  # the CPU build of the production Dockerfile


def test_the_server_runs_unprivileged_and_writes_only_its_cache(kokoro_container: ServingContainer) -> None:
    name = kokoro_container.container.name

    def shell(script: str) -> int:
        return docker("exec", name, "sh", "-c", script, check=False).returncode

    assert docker("exec", name, "id", "-u").stdout.strip() == "10001"  # the image's user, not root
    assert shell("touch /var/cache/voicestream/probe && rm /var/cache/voicestream/probe") == 0  # its cache
    for path in ("/opt/ml/model/probe", "/opt/voicestream/probe", "/usr/local/bin/probe", "/probe"):
        assert shell(f"touch {path}") != 0, f"{path} is writable"


def test_ping_is_503_while_the_model_loads_and_200_only_after(kokoro_container: ServingContainer) -> None:
    answers = kokoro_container.readiness
    statuses = [answer for answer in answers if answer != "refused"]
    # Refused until the server listens, then 503 while loading, then 200: never back.
    assert answers[: answers.index(statuses[0])] == ["refused"] * answers.index(statuses[0])
    assert statuses[-1] == 200 and set(statuses[:-1]) == {503}, answers
    records = kokoro_container.container.log_records()
    events = [record["event"] for record in records]
    ready_at = events.index("engine_ready")
    first_200 = next(i for i, event in enumerate(events) if '"GET /ping HTTP/1.1" 200' in event)
    assert ready_at < first_200
    assert records[ready_at]["engine"] == "onnx"


def test_invocations_streams_audio(kokoro_container: ServingContainer, asr: ModuleType) -> None:
    text = "Good morning. The weather is fine today."
    chunks: list[bytes] = []
    with httpx.stream("POST", f"{kokoro_container.http_url}/invocations", json={"text": text}, timeout=120) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["transfer-encoding"] == "chunked" and "content-length" not in response.headers
        assert response.headers["x-audio-format"] == "pcm" and response.headers["x-sample-rate"] == "24000"
        chunks = list(response.iter_raw())
    audio = b"".join(chunks)
    assert len(chunks) > 1 and len(audio) > 24_000 * 2, "less than a second of 24 kHz PCM, or not streamed"
    assert asr.word_error_rate(text, asr.transcribe(audio)) == 0.0


async def speak(ws_url: str, text: str, frames: FrameMode) -> bytes:
    async with BidiSession.websocket(ws_url, frames=frames, silence_timeout=120) as session:
        result = await session.synthesize(text)
    assert result.sample_rate == 24_000 and result.format == "pcm"
    return result.audio


async def test_bidi_route_answers_binary_and_text_frames(kokoro_container: ServingContainer, asr: ModuleType) -> None:
    text = "Good morning."
    from_binary = await speak(kokoro_container.ws_url, text, "binary")  # what SageMaker's sidecar sends
    from_text = await speak(kokoro_container.ws_url, text, "text")
    # The frame type changed nothing: the same sentence, every sample of it, heard the same. (Not
    # byte for byte: the engine paces its decoder windows to how long the ones before took,
    # engine/streaming/pacing.py, so on a slow machine two syntheses may place a seam differently.)
    assert len(from_text) == len(from_binary) > 24_000  # over half a second of 16-bit samples
    assert asr.word_error_rate(text, asr.transcribe(from_binary)) == 0.0
    assert asr.word_error_rate(text, asr.transcribe(from_text)) == 0.0


async def test_bidi_session_pipelines_sentences_in_order(kokoro_container: ServingContainer, asr: ModuleType) -> None:
    audio: dict[str, bytearray] = {}
    order: list[str] = []
    async with BidiSession.websocket(kokoro_container.ws_url, silence_timeout=120) as session:
        ids = [await session.send(sentence) for sentence in SENTENCES]  # all sent before any audio
        current = ""
        async with contextlib.aclosing(session.events()) as events:
            async for event in events:
                if isinstance(event, SynthesisStart):
                    current = event.request_id
                    order.append(current)
                    audio[current] = bytearray()
                elif isinstance(event, Audio):
                    assert event.request_id == current
                    audio[current] += event.data
                elif isinstance(event, RequestCompleted) and event.request_id == ids[-1]:
                    break
    assert order == ids
    for sentence, rid in zip(SENTENCES, ids, strict=True):
        assert session.timings[rid].outcome == "complete"
        assert asr.word_error_rate(sentence, asr.transcribe(bytes(audio[rid]))) <= 0.15, sentence


def test_sigterm_stops_the_server_cleanly_within_seconds(serve_container: StartContainer, model_dir: Path) -> None:
    with serve_container("sigterm", model_dir) as serving:
        serving.poll_ping(lambda status: status == 200)
        # A session is open when SageMaker (or `docker stop`) sends SIGTERM.
        with httpx.Client(base_url=serving.http_url) as client:
            assert client.get("/ping").status_code == 200
        started = time.monotonic()
        serving.container.signal("TERM")
        state = serving.container.wait_exit(timeout=30)
        stopped_s = time.monotonic() - started
        # The server runs as PID 1 (the entrypoint execs it): uvicorn's re-raised SIGTERM does not
        # kill PID 1, so a graceful stop exits 0; a SIGKILL or a crash would not.
        assert state["ExitCode"] == 0 and not state["OOMKilled"], serving.container.logs()[-4000:]
        assert stopped_s < STOP_GRACE_S, f"took {stopped_s:.1f} s"
        events = [record["event"] for record in serving.container.log_records()]
        assert "Application shutdown complete." in events


async def bidi_refusal(ws_url: str) -> SessionConnectError:
    """The server's `error` right after the handshake, as the client raises it: from connect()
    when it arrives during the handshake's wait, else as the session's first event."""
    with pytest.raises(SessionConnectError) as refused:
        async with (
            asyncio.timeout(30),
            BidiSession.websocket(ws_url) as session,
            contextlib.aclosing(session.events()) as events,
        ):
            async for event in events:
                raise AssertionError(f"the session was not refused: {event!r}")
    return refused.value


def test_a_missing_model_keeps_ping_503_and_says_why(serve_container: StartContainer, tmp_path: Path) -> None:
    empty = tmp_path / "model"
    empty.mkdir()
    with serve_container("nomodel", empty) as serving:
        serving.poll_ping(lambda status: status == 503)
        deadline = time.monotonic() + 120
        while (body := httpx.get(f"{serving.http_url}/ping", timeout=5).json())["status"] == "loading":
            assert time.monotonic() < deadline, body
            time.sleep(0.2)
        assert body["status"] == "failed" and "/opt/ml/model" in body["error"], body
        assert httpx.get(f"{serving.http_url}/ping", timeout=5).status_code == 503
        refused = httpx.post(f"{serving.http_url}/invocations", json={"text": "Hi."}, timeout=30)
        assert refused.status_code == 503 and refused.json()["code"] == "not_ready"
        # The bidi route says so too, in its first message, then closes the session.
        refusal = asyncio.run(bidi_refusal(serving.ws_url))
        assert refusal.server_code == "not_ready", refusal
        assert "engine_failed" in [record["event"] for record in serving.container.log_records()]
        assert serving.container.state()["Running"]  # it stays up and keeps telling why
