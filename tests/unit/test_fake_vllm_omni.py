"""The fake vLLM-Omni /v1/audio/speech/stream route (tests/support/fake_vllm_omni.py) behaves as
docs/vllm-omni.md says upstream does, over a real socket: this is what makes it a fair stand-in
for the client tests. Raw JSON on the wire, so these tests do not lean on voicestream's client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.support.fake_vllm_omni import (
    FAIL_TRIGGER,
    FakeVllmOmni,
    SpeechSettings,
    serve_fake,
    split_units,
    tone_synthesizer,
)
from voicestream.wire import vllm_omni as vo

Frame = dict[str, Any] | bytes
FakeFactory = Callable[..., AbstractContextManager[tuple[FakeVllmOmni, str]]]

STREAM_CONFIG: dict[str, Any] = {
    "type": "session.config",
    "voice": "vivian",
    "language": "English",
    "response_format": "pcm",
    "stream_audio": True,
}


@pytest.fixture
def fake_server() -> FakeFactory:
    @contextmanager
    def start(**options: Any) -> Iterator[tuple[FakeVllmOmni, str]]:
        fake = FakeVllmOmni(**options)
        with serve_fake(fake) as (_live, url):
            yield fake, url

    return start


async def send(ws: ClientConnection, body: dict[str, Any]) -> None:
    await ws.send(json.dumps(body))  # a str is sent as a TEXT frame


async def receive(ws: ClientConnection, wait_s: float = 20.0) -> Frame:
    message = await asyncio.wait_for(ws.recv(), wait_s)
    return json.loads(message) if isinstance(message, str) else message


async def until(ws: ClientConnection, kind: str, wait_s: float = 20.0) -> list[Frame]:
    """Frames up to and including the first control message of type `kind`."""
    frames: list[Frame] = []
    while True:
        frame = await receive(ws, wait_s)
        frames.append(frame)
        if isinstance(frame, dict) and frame["type"] == kind:
            return frames


async def rest_and_close_code(ws: ClientConnection, wait_s: float = 20.0) -> tuple[list[Frame], int | None]:
    """Everything until the server closes the connection, and its close code."""
    frames: list[Frame] = []
    try:
        while True:
            frames.append(await receive(ws, wait_s))
    except ConnectionClosed as closed:
        return frames, closed.rcvd.code if closed.rcvd else None


def controls(frames: list[Frame]) -> list[dict[str, Any]]:
    return [frame for frame in frames if isinstance(frame, dict)]


def audio_of(frames: list[Frame]) -> bytes:
    return b"".join(frame for frame in frames if isinstance(frame, bytes))


async def wait_for(condition: Callable[[], bool], wait_s: float = 10.0) -> None:
    deadline = time.monotonic() + wait_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


# --- the happy path ------------------------------------------------------------------------------


async def test_streamed_utterances_on_one_connection(fake_server: FakeFactory) -> None:
    with fake_server() as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "input.text", "text": "Hello there, "})
            await send(ws, {"type": "input.text", "text": "how are you today?"})
            await send(ws, {"type": "input.done"})
            first = await until(ws, "session.done")
            start, *_, done, session_done = controls(first)
            assert start == {
                "type": "audio.start",
                "utterance_index": 0,
                "sentence_index": 0,
                "sentence_text": "Hello there, how are you today?",
                "format": "pcm",
                "sample_rate": 24_000,
                "channels": 1,
            }
            audio = audio_of(first)
            assert sum(isinstance(frame, bytes) for frame in first) >= 2  # streamed in chunks
            assert done == {
                "type": "audio.done",
                "utterance_index": 0,
                "sentence_index": 0,
                "total_bytes": len(audio),
                "error": False,
            }
            assert session_done == {"type": "session.done", "utterance_index": 0, "total_sentences": 1}
            assert isinstance(first[0], dict) and isinstance(first[1], bytes)  # start, then audio

            # input.done was a flush: the same connection serves the next utterance.
            await send(ws, {"type": "input.text", "text": "Second one."})
            await send(ws, {"type": "input.done"})
            second = controls(await until(ws, "session.done"))
            assert [c["utterance_index"] for c in second] == [1, 1, 1]

            await send(ws, {"type": "session.close"})
            rest, code = await rest_and_close_code(ws)
            assert (rest, code) == ([], 1000)
    (record,) = fake.sessions
    assert record.ended == "session.close"
    assert [g.text for g in record.generations] == ["Hello there, how are you today?", "Second one."]


async def test_whole_clip_when_not_streaming(fake_server: FakeFactory) -> None:
    with fake_server() as (_fake, url):
        async with connect(url) as ws:
            await send(ws, {"type": "session.config", "voice": "ryan"})  # upstream defaults: wav, no streaming
            await send(ws, {"type": "input.text", "text": "One clip."})
            await send(ws, {"type": "input.done"})
            frames = await until(ws, "session.done")
    start, clip, done, _ = frames
    assert isinstance(start, dict) and isinstance(clip, bytes) and isinstance(done, dict)
    assert "sample_rate" not in start and start["format"] == "wav"
    assert clip[:4] == b"RIFF" and clip[8:12] == b"WAVE"
    assert done["total_bytes"] == len(clip)


# --- the traps: binary frames, config first, timeouts, limits --------------------------------------


@pytest.mark.parametrize("configured", [False, True])
async def test_a_binary_frame_ends_the_session(fake_server: FakeFactory, configured: bool) -> None:
    """The mirror image of the Kokoro trap: JSON in a BINARY frame (SageMaker's default
    data_type) is an internal error upstream, and the session is over."""
    with fake_server() as (fake, url):
        async with connect(url) as ws:
            if configured:
                await send(ws, STREAM_CONFIG)
            await ws.send(json.dumps({"type": "input.text", "text": "Hello."}).encode())
            frames, _code = await rest_and_close_code(ws)
    # The handler returns and the server drops the connection (its close code depends on the
    # uvicorn WebSocket implementation, so a client must not rely on one).
    assert frames == [{"type": "error", "message": "Internal error: 'text'"}]
    assert fake.sessions[0].ended == "binary frame"
    assert fake.sessions[0].generations == []


async def test_skipping_session_config_is_an_error_that_ends_the_session(fake_server: FakeFactory) -> None:
    with fake_server() as (fake, url):
        async with connect(url) as ws:
            await send(ws, {"type": "input.text", "text": "Hello."})
            frames, _code = await rest_and_close_code(ws)
    assert frames == [{"type": "error", "message": "Expected session.config, got: input.text"}]
    assert fake.sessions[0].ended == "no config first"


async def test_config_timeout(fake_server: FakeFactory) -> None:
    with fake_server(config_timeout_s=0.3) as (fake, url):
        async with connect(url) as ws:
            started = time.monotonic()
            frames, _code = await rest_and_close_code(ws)
            waited = time.monotonic() - started
    assert frames == [{"type": "error", "message": "Timeout waiting for session.config"}]
    assert 0.25 <= waited < 10
    assert fake.sessions[0].ended == "config timeout"


async def test_idle_timeout_does_not_run_during_synthesis(fake_server: FakeFactory) -> None:
    """Sequential processing: while a request is synthesized (~1.4 s here) the server reads
    nothing, so a 0.5 s idle timeout cannot fire; it fires once the server waits again."""
    with fake_server(idle_timeout_s=0.5, realtime_factor=0.6) as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "input.text", "text": "A sentence long enough to take a while to say."})
            await send(ws, {"type": "input.done"})
            frames, _code = await rest_and_close_code(ws)
    (generation,) = fake.sessions[0].generations
    assert generation.outcome == "complete"
    assert generation.finished_at is not None and generation.finished_at - generation.started_at > 0.5
    assert [c["type"] for c in controls(frames)] == ["audio.start", "audio.done", "session.done", "error"]
    assert controls(frames)[-1]["message"] == "Idle timeout: no message received"
    assert fake.sessions[0].ended == "idle timeout"


async def test_text_limit_is_the_whole_message_and_a_larger_one_is_dropped(fake_server: FakeFactory) -> None:
    with fake_server() as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            envelope = len(json.dumps({"type": "input.text", "text": ""}))
            padding = vo.MAX_INPUT_TEXT_MESSAGE_CHARS - envelope - len("Kept.")
            at_limit = {"type": "input.text", "text": "Kept." + " " * padding}
            assert len(json.dumps(at_limit)) == vo.MAX_INPUT_TEXT_MESSAGE_CHARS
            await send(ws, at_limit)
            await send(ws, {"type": "input.text", "text": "Dropped." + " " * (padding - 2)})  # one character over
            error = await receive(ws)
            assert error == {"type": "error", "message": "input.text message too large"}
            await send(ws, {"type": "input.text", "text": " And this."})
            await send(ws, {"type": "input.done"})
            frames = controls(await until(ws, "session.done"))
    # The session survived; the text at the limit was kept, the one over it is gone.
    assert frames[0]["sentence_text"] == "Kept." + " " * padding + " And this."
    assert fake.sessions[0].errors == ["input.text message too large"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"stream_audio": True, "response_format": "wav"}, "requires response_format='pcm'"),
        ({"stream_audio": True, "response_format": "pcm", "speed": 1.5}, "requires speed=1.0"),
        ({"split_granularity": "word"}, "split_granularity"),
        ({"response_format": "ogg"}, "response_format"),
    ],
)
async def test_an_invalid_first_config_ends_the_session(
    fake_server: FakeFactory, config: dict[str, Any], message: str
) -> None:
    with fake_server() as (_fake, url):
        async with connect(url) as ws:
            await send(ws, {"type": "session.config", **config})
            (error,), _code = await rest_and_close_code(ws)
    assert isinstance(error, dict) and error["message"].startswith("Invalid session config: ")
    assert message in error["message"]


async def test_later_config_errors_keep_the_session_and_its_config(fake_server: FakeFactory) -> None:
    with fake_server() as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "session.config", "response_format": "ogg"})
            invalid = await receive(ws)
            assert isinstance(invalid, dict) and invalid["message"].startswith("Invalid session config")
            await send(ws, {"type": "input.text", "text": "Half"})
            await send(ws, {**STREAM_CONFIG, "voice": "ryan"})  # between text and input.done: refused
            refused = await receive(ws)
            await send(ws, {"type": "input.cancel"})
            unknown = await receive(ws)
            await send(ws, {"type": "input.text", "text": 7})
            not_text = await receive(ws)
            await send(ws, {"type": "input.text", "text": " way."})
            await send(ws, {"type": "input.done"})
            frames = controls(await until(ws, "session.done"))
    assert refused == {
        "type": "error",
        "message": "session.config cannot be applied while an utterance is in progress; send input.done first",
    }
    assert unknown == {"type": "error", "message": "Unknown message type: input.cancel"}
    assert not_text == {"type": "error", "message": "input.text requires a string value"}
    assert frames[0]["sentence_text"] == "Half way." and frames[0]["format"] == "pcm"
    assert fake.sessions[0].generations[0].voice == "vivian"


async def test_unknown_model_and_malformed_json_end_an_unconfigured_session(fake_server: FakeFactory) -> None:
    with fake_server() as (_fake, url):
        async with connect(url) as ws:
            await send(ws, {"type": "session.config", "model": "other/model"})
            assert (await rest_and_close_code(ws))[0] == [
                {"type": "error", "message": "The model `other/model` does not exist."}
            ]
        async with connect(url) as ws:
            await ws.send("{not json")
            assert (await rest_and_close_code(ws))[0] == [{"type": "error", "message": "Invalid JSON message"}]


# --- splitting -----------------------------------------------------------------------------------


async def test_sentence_granularity_speaks_before_input_done(fake_server: FakeFactory) -> None:
    with fake_server() as (_fake, url):
        async with connect(url) as ws:
            await send(ws, {**STREAM_CONFIG, "split_granularity": "sentence"})
            await send(ws, {"type": "input.text", "text": "Hello there. How are"})
            first = controls(await until(ws, "audio.done"))  # no input.done sent yet
            await send(ws, {"type": "input.text", "text": " you? Pi is 3.14 today"})
            second = controls(await until(ws, "audio.done"))
            await send(ws, {"type": "input.done"})
            last = controls(await until(ws, "session.done"))
    assert [first[0]["sentence_text"], second[0]["sentence_text"], last[0]["sentence_text"]] == [
        "Hello there.",
        "How are you?",
        "Pi is 3.14 today",
    ]
    assert [first[0]["sentence_index"], second[0]["sentence_index"], last[0]["sentence_index"]] == [0, 1, 2]
    assert last[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 3}


@pytest.mark.parametrize(
    ("granularity", "units"),
    [
        ("none", ["Well, I think so; yes. Dr. Who? 你好。世界"]),
        ("sentence", ["Well, I think so; yes.", "Dr.", "Who?", "你好。", "世界"]),
        ("clause", ["Well,", "I think so;", "yes.", "Dr.", "Who?", "你好。", "世界"]),
    ],
)
async def test_granularities_on_the_wire(fake_server: FakeFactory, granularity: str, units: list[str]) -> None:
    with fake_server() as (_fake, url):
        async with connect(url) as ws:
            await send(ws, {**STREAM_CONFIG, "split_granularity": granularity})
            await send(ws, {"type": "input.text", "text": "Well, I think so; yes. Dr. Who? 你好。世界"})
            await send(ws, {"type": "input.done"})
            frames = controls(await until(ws, "session.done"))
    starts = [c for c in frames if c["type"] == "audio.start"]
    dones = [c for c in frames if c["type"] == "audio.done"]
    assert [s["sentence_text"] for s in starts] == units
    assert [s["sentence_index"] for s in starts] == [d["sentence_index"] for d in dones] == list(range(len(units)))


def test_split_rules() -> None:
    assert split_units("No end yet", "sentence", flush=False) == ([], "No end yet")
    assert split_units("Ends here.", "sentence", flush=False) == ([], "Ends here.")  # maybe "e.g."
    assert split_units("Ends here. ", "sentence", flush=False) == (["Ends here."], "")
    assert split_units("Ends here.", "sentence", flush=True) == (["Ends here."], "")
    assert split_units("It is 3.5 m. Next", "sentence", flush=False) == (["It is 3.5 m."], "Next")
    assert split_units("Wow!!! Really", "sentence", flush=False) == (["Wow!!!"], "Really")
    assert split_units("नमस्ते। कैसे हो?", "sentence", flush=True) == (["नमस्ते।", "कैसे हो?"], "")
    assert split_units("a,b", "clause", flush=False) == (["a,"], "b")  # clause marks need no space
    assert split_units("  ", "none", flush=True) == ([], "")


# --- failures, ordering, cancel ------------------------------------------------------------------


async def test_mid_sentence_failure_reports_partial_audio_and_the_session_goes_on(fake_server: FakeFactory) -> None:
    with fake_server() as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "input.text", "text": f"This sentence will {FAIL_TRIGGER} after its first chunk."})
            await send(ws, {"type": "input.done"})
            failed = await until(ws, "session.done")
            await send(ws, {"type": "input.text", "text": "Still here."})
            await send(ws, {"type": "input.done"})
            recovered = controls(await until(ws, "session.done"))
    start, error, done, session_done = controls(failed)
    assert start["type"] == "audio.start"
    assert error == {
        "type": "error",
        "message": "Generation failed for utterance 0, sentence 0: injected failure",
        "partial_audio": True,
        "action": "discard",
    }
    assert done == {
        "type": "audio.done",
        "utterance_index": 0,
        "sentence_index": 0,
        "total_bytes": len(audio_of(failed)),
        "error": True,
    }
    assert len(audio_of(failed)) > 0
    assert session_done["total_sentences"] == 1
    assert recovered[-2]["error"] is False and recovered[-1]["utterance_index"] == 1
    assert [g.outcome for g in fake.sessions[0].generations] == ["failed", "complete"]


async def test_messages_wait_while_a_request_is_synthesized(fake_server: FakeFactory) -> None:
    with fake_server(realtime_factor=0.5) as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            for text in ("First sentence of two.", "Second."):
                await send(ws, {"type": "input.text", "text": text})
                await send(ws, {"type": "input.done"})
            frames = await until(ws, "session.done") + await until(ws, "session.done")
    record = fake.sessions[0]
    first, second = record.generations
    second_text_received = [t for t, kind in record.received if kind == "input.text"][1]
    assert first.finished_at is not None and second_text_received >= first.finished_at
    assert second.started_at >= first.finished_at
    kinds = [frame["type"] if isinstance(frame, dict) else "audio" for frame in frames]
    first_done = kinds.index("session.done")
    assert "audio" not in kinds[first_done + 1 : first_done + 2]  # the second request starts with audio.start


async def test_closing_the_socket_aborts_the_request_in_progress(fake_server: FakeFactory) -> None:
    """There is no cancel message: a client cancels by closing the connection."""
    with fake_server(realtime_factor=1.0) as (fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "input.text", "text": "A long sentence that nobody will hear to its end, sadly."})
            await send(ws, {"type": "input.done"})
            while not isinstance(await receive(ws), bytes):
                pass
        await wait_for(
            lambda: bool(fake.sessions[0].generations) and fake.sessions[0].generations[0].outcome == "aborted"
        )
    assert fake.sessions[0].ended == "client disconnected"


async def test_servers_before_the_flush_change_close_after_session_done(fake_server: FakeFactory) -> None:
    with fake_server(close_after_done=True) as (_fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "input.text", "text": "Only one."})
            await send(ws, {"type": "input.done"})
            frames, _code = await rest_and_close_code(ws)
    assert controls(frames)[-1]["type"] == "session.done"


async def test_word_timestamps_without_an_aligner(fake_server: FakeFactory) -> None:
    with fake_server() as (_fake, url):
        async with connect(url) as ws:
            await send(ws, {**STREAM_CONFIG, "word_timestamps": True})
            await send(ws, {"type": "input.text", "text": "Timed."})
            await send(ws, {"type": "input.done"})
            frames = controls(await until(ws, "session.done"))
    assert [c["type"] for c in frames] == ["error", "session.done"]
    assert frames[0]["message"].startswith("word_timestamps=true but the server was launched without --forced-aligner")


# --- audio -----------------------------------------------------------------------------------------


def test_tone_audio_is_deterministic_and_scales_with_the_text() -> None:
    synthesize = tone_synthesizer()
    short = b"".join(synthesize("Hello there.", SpeechSettings()))
    again = b"".join(synthesize("Hello there.", SpeechSettings()))
    longer = b"".join(synthesize("Hello there. " * 4, SpeechSettings()))
    assert short == again and len(short) % 2 == 0
    assert 3.5 < len(longer) / len(short) < 4.5
    assert b"".join(synthesize("", SpeechSettings())) == b""


async def test_voicestream_protocol_module_and_fake_agree(fake_server: FakeFactory) -> None:
    """The client-side encoder and parser against the fake: a text over the message limit goes
    out as several input.text messages (none rejected) and every reply parses."""
    text = "Hello." + " " * 200_000 + "World."
    with fake_server() as (fake, url):
        async with connect(url, max_size=2**22) as ws:
            await ws.send(vo.encode_client_message(vo.SessionConfig(voice="vivian", language="English")))
            messages = vo.input_text_messages(text)
            assert len(messages) == 2
            for message in messages:
                await ws.send(vo.encode_client_message(message))
            await ws.send(vo.encode_client_message(vo.InputDone()))
            replies = [
                vo.parse_server_message(json.dumps(frame)) for frame in controls(await until(ws, "session.done"))
            ]
            await ws.send(vo.encode_client_message(vo.SessionClose()))
            assert (await rest_and_close_code(ws))[1] == 1000
    assert fake.sessions[0].errors == []
    start, done, session_done = replies
    assert isinstance(start, vo.AudioStart) and start.sentence_text == text
    assert start.sample_rate == vo.DEFAULT_SAMPLE_RATE
    assert isinstance(done, vo.AudioDone) and not done.error and done.total_bytes
    assert session_done == vo.SessionDone(total_sentences=1, utterance_index=0)
