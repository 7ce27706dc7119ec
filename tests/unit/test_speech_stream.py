"""The Gradio client's core without Gradio: the metrics of a run (computed by hand here),
one text streamed from a scripted vLLM-Omni server, stopped early or failing, the ticks that
collect the encoder's frames while the upstream is quiet, and Stop reaching the run it ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.clocks import ManualClock
from tests.support.fakes import ScriptedTransport, Step, TurnTransport
from voicestream.integrations.speech_stream import (
    StopButtons,
    UpstreamChoice,
    stream_speech,
    until_stopped,
    upstream_choices,
    with_idle_ticks,
)
from voicestream.integrations.stream_metrics import StreamClock
from voicestream.speech import SpeechSession, Transport, VllmOmniSession
from voicestream.wire.errors import CodedError
from voicestream.wire.vllm_omni import SessionConfig

PCM = b"\x01\x00" * 2400  # 100 ms


def test_metrics_of_a_run_by_hand() -> None:
    clock = ManualClock()
    run = StreamClock("kokoro", bytes_per_second=48_000, clock=clock)
    run.connected(0.05)
    for at in (100.3, 100.4, 100.6, 100.7):  # gaps 100, 200, 100 ms
        clock.now = at
        run.chunk(4_800)  # 100 ms each
    assert run.metrics().end_to_end_ms is None and run.metrics().status == "running"
    clock.now = 101.0
    run.end("complete")
    clock.now = 200.0  # later reads do not move the end
    metrics = run.metrics()
    assert metrics.connect_ms == pytest.approx(50)
    assert metrics.first_audio_ms == pytest.approx(300)
    assert metrics.audio_ms == pytest.approx(400)
    assert metrics.end_to_end_ms == pytest.approx(1000)
    assert metrics.real_time_factor == pytest.approx(2.5)
    assert metrics.jitter_p50_ms == pytest.approx(100)
    assert metrics.jitter_p95_ms == pytest.approx(190)
    assert metrics.as_dict()["chunks"] == 4 and metrics.status == "complete"


def msg(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def utterance(chunks: int) -> list[Step]:
    return [
        msg("audio.start", sentence_index=0, sentence_text="x", format="pcm", sample_rate=24_000),
        *[PCM] * chunks,
        msg("audio.done", sentence_index=0),
        msg("session.done", total_sentences=1),
    ]


def opener(transport: ScriptedTransport) -> Any:
    def open_session(choice: UpstreamChoice, voice: str | None, language: str | None) -> SpeechSession:
        def once() -> Transport:
            return transport

        config = SessionConfig(voice=voice or "vivian", language=language or "Auto")
        return VllmOmniSession(once, config, close_timeout=0.2)

    return open_session


CHOICE = UpstreamChoice("vLLM-Omni (scripted)", "vllm-omni", url="ws://127.0.0.1:9")


async def test_first_audio_at_once_then_batches_then_final_metrics() -> None:
    server = TurnTransport([utterance(6)], trigger="input.done")
    items = [item async for item in stream_speech(CHOICE, "Hello.", language="English", open_session=opener(server))]
    sizes = [len(pcm) for pcm, _ in items]
    # connected (no audio), first chunk alone, then >= 250 ms pieces, then the rest with the end.
    assert sizes == [0, len(PCM), 3 * len(PCM), 2 * len(PCM)]
    final = items[-1][1]
    assert final.status == "complete" and final.chunks == 6 and final.audio_ms == pytest.approx(600)
    assert items[0][1].connect_ms is not None and final.end_to_end_ms is not None
    config = json.loads(str(server.sent[0]))
    assert (config["type"], config["language"]) == ("session.config", "English")


async def test_stopping_early_cancels_the_upstream_work() -> None:
    server = TurnTransport([[*utterance(50)[:3], 5.0]], trigger="input.done")  # audio, then a long silence
    stream = stream_speech(CHOICE, "A long text.", open_session=opener(server))
    async with contextlib.aclosing(stream):
        async for pcm, _metrics in stream:
            if pcm:
                break  # the listener pressed Stop
    # vLLM-Omni's cancel: the connection is closed (which aborts the request upstream), and
    # closing the stream waited for it.
    assert server.closed
    assert [json.loads(str(payload))["type"] for payload in server.sent] == [
        "session.config",
        "input.text",
        "input.done",
    ]


async def test_a_refused_text_ends_with_an_error_after_its_metrics() -> None:
    failing: list[Step] = [msg("error", message="Generation failed for utterance 0, sentence 0: boom")]
    server = TurnTransport([failing], trigger="input.done")
    seen: list[str] = []
    with pytest.raises(CodedError, match="refused the text: \\[generation_failed\\]"):
        async for _pcm, metrics in stream_speech(CHOICE, "Hi.", open_session=opener(server)):
            seen.append(metrics.status)
    assert seen[-1].startswith("error: the speech server refused the text")


async def test_ticks_only_while_the_upstream_is_quiet_after_audio_and_at_most_per_audio() -> None:
    loop = asyncio.get_running_loop()
    audio_sent, more_sent = asyncio.Event(), asyncio.Event()

    async def upstream() -> AsyncIterator[bytes]:
        yield b""  # connected: quiet after it, but nothing to collect yet
        await audio_sent.wait()
        yield b"pcm"
        await more_sent.wait()
        yield b"more"

    loop.call_later(0.2, audio_sent.set)  # 20 tick periods of quiet before any audio
    seen: list[bytes | None] = []
    async for item in with_idle_ticks(upstream(), bool, every_s=0.01, per_audio=3):
        seen.append(item)
        if seen.count(None) == 3:
            loop.call_later(0.2, more_sent.set)  # another 20 periods: the three ticks were all
    assert seen == [b"", b"pcm", None, None, None, b"more"]


async def test_closing_the_ticks_mid_wait_closes_the_upstream() -> None:
    closed = asyncio.Event()

    async def upstream() -> AsyncIterator[bytes]:
        try:
            yield b"pcm"
            await asyncio.Event().wait()  # the upstream goes quiet for good
            yield b"never"
        finally:
            closed.set()  # where stream_speech cancels the server's work

    ticked = with_idle_ticks(upstream(), bool, every_s=0.01, per_audio=5)
    assert await anext(ticked) == b"pcm"
    assert await anext(ticked) is None
    await ticked.aclose()  # the listener pressed Stop
    assert closed.is_set()


def test_upstream_choices() -> None:
    choices = upstream_choices(kokoro_url="ws://127.0.0.1:8080", endpoint="tts", region="us-west-2")
    assert [(c.upstream, c.url, c.endpoint, c.region) for c in choices] == [
        ("kokoro", "ws://127.0.0.1:8080", None, None),
        ("vllm-omni", None, "tts", "us-west-2"),
    ]
    assert choices[1].label == "SageMaker tts in us-west-2 (Qwen3-TTS on vLLM-Omni)"
    session = choices[1].session("ryan", "German")
    assert isinstance(session, VllmOmniSession)
    assert (session.config.voice, session.config.language) == ("ryan", "German")
    with pytest.raises(CodedError, match="at least one upstream"):
        upstream_choices()
    with pytest.raises(CodedError, match="needs a region"):
        upstream_choices(endpoint="tts")


async def test_stop_reaches_only_its_sessions_run_and_only_while_it_runs() -> None:
    buttons = StopButtons()
    assert buttons.press("page-1") is False  # no run: nothing to stop, nothing remembered
    with buttons.run("page-1") as stop, buttons.run("page-2") as other:
        assert not stop.is_set()
        assert buttons.press("page-1") is True
        assert stop.is_set() and not other.is_set()
    assert buttons.press("page-1") is False
    old = buttons.run("page-1")
    first = old.__enter__()
    with buttons.run("page-1") as second:
        old.__exit__(None, None, None)  # the older run ending leaves the newer one reachable
        assert buttons.press("page-1") is True
        assert second.is_set() and not first.is_set()


async def test_a_stop_ends_the_stream_while_the_upstream_is_quiet_and_closes_it() -> None:
    closed = asyncio.Event()
    release = asyncio.Event()

    async def upstream() -> AsyncIterator[int]:
        try:
            yield 1
            await release.wait()  # quiet: no item until the test says so, which it never does
            yield 2
        finally:
            closed.set()

    stop = asyncio.Event()
    stream = until_stopped(upstream(), stop)
    assert await anext(stream) == 1
    waiting = asyncio.ensure_future(anext(stream))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()
    stop.set()
    with pytest.raises(StopAsyncIteration):
        await waiting
    assert closed.is_set()  # the upstream generator was closed (its session cancelled)


async def test_a_stream_that_ends_on_its_own_passes_every_item() -> None:
    async def upstream() -> AsyncIterator[int]:
        for item in range(4):
            yield item

    assert [item async for item in until_stopped(upstream(), asyncio.Event())] == [0, 1, 2, 3]
