"""VllmOmniSession against the faithful fake of vLLM-Omni's /v1/audio/speech/stream
(tests/support/fake_vllm_omni.py) over real 127.0.0.1 sockets, straight and through the fake
SageMaker runtime (the real aws-sdk-sagemaker-runtime-http2 code above it).

The fake enforces what upstream enforces: a binary frame or a first message other than
session.config ends the session. So the first test fails if the client ever sends either.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.fake_sagemaker import FakeSageMakerRuntime
from tests.support.fake_vllm_omni import FAIL_TRIGGER, ROUTE, FakeVllmOmni, SessionRecord, serve_fake
from voicestream.speech import (
    Audio,
    Cancelled,
    ConnectionLostError,
    ErrorMessage,
    Event,
    RequestCompleted,
    SessionConnectError,
    SynthesisStart,
    Transport,
    VllmOmniSession,
    WebSocketTransport,
)
from voicestream.wire.vllm_omni import SessionConfig, pcm_duration_ms

BOUND_S = 120.0
SENTENCES = ("Hello there.", "This is the second sentence, a little longer.", "And a third.")
CONFIG = SessionConfig(voice="vivian", language="English")
REGION, ENDPOINT = "us-west-2", "voicestream-qwen3-tts"
ACCESS_KEY, SECRET_KEY = "AKIAFAKEVOICESTREAM2", "fake-secret-key-for-vllm-omni-tests"


@contextlib.contextmanager
def fake_server(**options: Any) -> Iterator[tuple[FakeVllmOmni, str]]:
    fake = FakeVllmOmni(**options)
    with serve_fake(fake) as (_live, url):
        yield fake, url


async def collect(session: VllmOmniSession, until: type, count: int = 1) -> list[Event]:
    seen: list[Event] = []
    async with asyncio.timeout(BOUND_S):
        async for event in session.events():
            seen.append(event)
            if sum(isinstance(e, until) for e in seen) == count:
                return seen
    raise AssertionError(f"the session ended before {count} {until.__name__}: {seen}")


def kinds(record: SessionRecord) -> list[str]:
    return [kind for _, kind in record.received]


async def until(condition: Callable[[], bool], wait_s: float = 30.0) -> None:
    deadline = time.monotonic() + wait_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_pipelined_sentences_with_text_frames_and_the_config_first() -> None:
    with fake_server() as (fake, url):
        async with VllmOmniSession.websocket(url, CONFIG) as session:
            ids = [await session.send(sentence) for sentence in SENTENCES]
            events = await collect(session, RequestCompleted, len(ids))
    [record] = fake.sessions
    # The contract the fake enforces: had the client sent a binary frame, or anything before
    # session.config, the fake would have ended the session with an error and no audio.
    assert kinds(record)[0] == "session.config"
    assert "binary" not in kinds(record) and record.errors == []
    assert kinds(record)[1:] == ["input.text", "input.done"] * 3 + ["session.close"]
    assert record.ended == "session.close"
    assert [g.text for g in record.generations] == list(SENTENCES)
    assert [g.voice for g in record.generations] == ["vivian"] * 3
    completed = [e for e in events if isinstance(e, RequestCompleted)]
    assert [e.request_id for e in completed] == ids
    for rid, generation, done in zip(ids, record.generations, completed, strict=True):
        audio = b"".join(e.data for e in events if isinstance(e, Audio) and e.request_id == rid)
        assert len(audio) == generation.audio_bytes == done.audio_bytes > 2000
        assert done.audio_ms == pytest.approx(pcm_duration_ms(len(audio)))
    starts = [e for e in events if isinstance(e, SynthesisStart)]
    assert [(s.request_id, s.sample_rate, s.format) for s in starts] == [(rid, 24_000, "pcm") for rid in ids]


async def test_binary_frames_end_the_session_with_the_servers_reason() -> None:
    """The mirror image of the Kokoro trap, as a negative control: a client sending binary
    frames gets no audio and a failed session."""
    with fake_server() as (fake, url):

        def binary_transport() -> Transport:
            return WebSocketTransport(url, frames="binary", path=ROUTE)

        async with VllmOmniSession(binary_transport, CONFIG, keepalive_s=None) as session:
            await session.send("Hello there.")
            # The server's error text may be lost with the connection (it resets while our
            # frames are in flight), so the reason is checked on the server's side.
            with pytest.raises(ConnectionLostError):
                await collect(session, RequestCompleted)
    [record] = fake.sessions
    assert record.generations == [] and record.ended == "binary frame"
    assert record.errors == ["Internal error: 'text'"]


async def test_model_options_pass_through_the_config() -> None:
    config = SessionConfig(
        voice="vivian", language="Chinese", instructions="Speak warmly.", task_type="Base",
        ref_audio="https://example.com/me.wav", ref_text="Hello, this is me.", split_granularity="sentence",
    )  # fmt: skip
    with fake_server() as (fake, url):
        async with VllmOmniSession.websocket(url, config) as session:
            rid = await session.send("One sentence. And another one.")
            events = await collect(session, RequestCompleted)
    [record] = fake.sessions
    settings = {(g.text, g.voice) for g in record.generations}
    assert settings == {("One sentence.", "vivian"), ("And another one.", "vivian")}  # split by the server
    assert [type(e).__name__ for e in events if not isinstance(e, Audio)] == ["SynthesisStart", "RequestCompleted"]
    assert session.timings[rid].audio_bytes == sum(g.audio_bytes for g in record.generations)


async def test_a_new_voice_for_one_request() -> None:
    with fake_server() as (fake, url):
        async with VllmOmniSession.websocket(url, CONFIG) as session:
            await session.send("First.", voice="ryan")
            await session.send("Second.")
            await collect(session, RequestCompleted, 2)
    assert [g.voice for g in fake.sessions[0].generations] == ["ryan", "vivian"]


async def test_cancel_aborts_upstream_and_the_session_goes_on_on_a_new_connection() -> None:
    # Slow generation (one second of work per second of audio): there is time to cancel.
    with fake_server(realtime_factor=1.0) as (fake, url):
        async with VllmOmniSession.websocket(url, CONFIG) as session:
            long = await session.send("A long answer that takes many seconds to speak out loud. " * 3)
            queued = await session.send("Queued behind it.")
            await collect(session, Audio)
            await session.cancel()
            events = await collect(session, Cancelled)
            assert events[-1] == Cancelled(request_ids=(long, queued))
            await until(lambda: fake.sessions[0].ended is not None)
            again = await session.send("After the barge-in.")
            done = await collect(session, RequestCompleted)
    first, second = fake.sessions
    assert [g.outcome for g in first.generations] == ["aborted"]  # upstream stopped generating
    assert first.ended == "client disconnected"
    assert kinds(second)[0] == "session.config"  # the new connection starts with the config again
    assert [g.text for g in second.generations] == ["After the barge-in."]
    assert [e.request_id for e in done if isinstance(e, RequestCompleted)] == [again]
    assert session.connections == 2


async def test_an_idle_timeout_between_requests_is_transparent() -> None:
    with fake_server(idle_timeout_s=0.5) as (fake, url):
        async with VllmOmniSession.websocket(url, CONFIG, keepalive_s=None) as session:
            await session.send("Before the pause.")
            await collect(session, RequestCompleted)
            await until(lambda: fake.sessions[0].ended == "idle timeout")
            await session.send("After the pause.")
            events = await collect(session, RequestCompleted)
    assert not any(isinstance(e, ErrorMessage) for e in events)
    assert session.connections == 2 and len(fake.sessions) == 2


async def test_keepalive_holds_an_idle_connection_open() -> None:
    with fake_server(idle_timeout_s=1.0) as (fake, url):
        async with VllmOmniSession.websocket(url, CONFIG, keepalive_s=0.3) as session:
            await asyncio.sleep(2.5)
            await session.send("Still here.")
            await collect(session, RequestCompleted)
    [record] = fake.sessions
    assert record.errors == [] and session.connections == 1
    assert kinds(record).count("input.text") >= 4  # the keepalives, then the sentence


async def test_servers_that_close_after_each_utterance_still_get_every_sentence() -> None:
    """vLLM-Omni before the flush change (DLC <= v1.4) ends the connection after session.done;
    the sentences already sent behind it are sent again on a new connection."""
    with fake_server(close_after_done=True) as (fake, url):
        config = SessionConfig(voice="vivian", split_granularity="sentence")  # what those versions accept
        async with VllmOmniSession.websocket(url, config) as session:
            ids = [await session.send(sentence) for sentence in SENTENCES]
            events = await collect(session, RequestCompleted, 3)
    assert [e.request_id for e in events if isinstance(e, RequestCompleted)] == ids
    spoken = [g.text for record in fake.sessions for g in record.generations]
    assert spoken == list(SENTENCES)
    assert session.connections == len(fake.sessions) >= 2


async def test_a_failed_sentence_is_reported_and_the_next_one_is_spoken() -> None:
    with fake_server() as (fake, url):
        async with VllmOmniSession.websocket(url, CONFIG) as session:
            bad = await session.send(f"This one will {FAIL_TRIGGER} halfway through its audio.")
            good = await session.send("This one is fine.")
            events = await collect(session, RequestCompleted)
    (error,) = [e for e in events if isinstance(e, ErrorMessage)]
    assert (error.request_id, error.code) == (bad, "generation_failed")
    assert session.timings[bad].outcome == "error" and session.timings[good].outcome == "complete"
    assert [g.outcome for g in fake.sessions[0].generations] == ["failed", "complete"]


async def test_a_refused_connection_is_a_connect_error() -> None:
    with fake_server() as (_fake, url):
        pass  # the server is gone now
    session = VllmOmniSession.websocket(url, CONFIG, connect_timeout=10.0)
    with pytest.raises(SessionConnectError):
        await session.connect()


# --- through SageMaker ---------------------------------------------------------------------------


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


async def test_through_sagemaker_every_part_is_utf8_on_the_speech_route(aws_credentials: None) -> None:
    with fake_server() as (fake, url):
        base = url.removesuffix(ROUTE)  # the sidecar knows the container, the client names the route
        service = FakeSageMakerRuntime(region=REGION, credentials={ACCESS_KEY: SECRET_KEY}, endpoints={ENDPOINT: base})
        session = VllmOmniSession.sagemaker(ENDPOINT, REGION, CONFIG, http_client_factory=service.connection)
        async with session:
            ids = [await session.send(sentence) for sentence in SENTENCES[:2]]
            events = await collect(session, RequestCompleted, 2)
    assert [e.request_id for e in events if isinstance(e, RequestCompleted)] == ids
    [stream] = service.streams
    assert stream.headers["x-amzn-sagemaker-model-invocation-path"] == "v1/audio/speech/stream"
    assert stream.model_url == url
    assert {part.data_type for part in stream.received} == {"UTF8"}
    assert stream.received[0].payload.startswith(b'{"type":"session.config"')
    assert kinds(fake.sessions[0])[0] == "session.config" and "binary" not in kinds(fake.sessions[0])
    # Audio came back as BINARY parts, control messages as UTF8.
    assert {part.data_type for part in stream.sent} == {"UTF8", "BINARY"}
