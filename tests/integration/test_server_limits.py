"""Issue 17 on the real server, the real model and real sockets: huge numbers are coded errors,
the work of a request is bounded, one session's G2P never holds up another's, voice blends
do not grow memory, and a request waiting for a worker is kept alive.

Timing is never asserted: where the point is "not delayed", the test asserts an order that the
old single-lock G2P could not produce (benchmarks/robustness.py measures the delays).
"""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import TEST_THREADS, ServerFactory
from tests.support.server import LiveServer, start_server
from tests.support.session_client import collect, next_frame, send_json
from voicestream.engine import G2PSettings, load_engine
from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server import create_app
from voicestream.speech import BidiSession, Queued, RequestCompleted
from voicestream.wire.bidi import Limits

HUGE = "1" + "0" * 400  # an integer JSON allows and no float can hold
JSON = {"content-type": "application/json"}
# Four ~300-character sentences (the chunker's cut) that normalization leaves alone and misaki's
# G2P needs ~7 s each for on a quiet 2-core machine: ~30 s in one G2P task, twice the patient
# engine's limit whatever the machine's speed. (Distinct sentences: equal ones convert once.)
PATHOLOGICAL = " ".join("a-" * (150 - n) + "a." for n in range(4))


def post_invocation(server: LiveServer, raw: str) -> httpx.Response:
    return httpx.post(f"{server.http_url}/invocations", content=raw, headers=JSON, timeout=120)


# --- item 1: integers no float can hold --------------------------------------------------------


def test_a_huge_speed_on_post_invocations_is_invalid_speed(kokoro_server: LiveServer) -> None:
    response = post_invocation(kokoro_server, '{"text": "Hi.", "speed": ' + HUGE + "}")
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"type", "code", "message", "request_id"}
    assert body["type"] == "error" and body["code"] == "invalid_speed" and "401 digits" in body["message"]


async def test_a_huge_speed_in_a_session_is_invalid_speed_and_the_session_goes_on(kokoro_server: LiveServer) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await ws.send('{"type": "synthesize", "text": "Hi.", "request_id": "huge", "speed": ' + HUGE + "}")
        error = (await next_frame(ws)).control
        assert error is not None and (error["type"], error["code"], error["request_id"]) == (
            "error",
            "invalid_speed",
            "huge",
        )
        await ws.send('{"type": "config", "speed": -' + HUGE + "}")
        config_error = (await next_frame(ws)).control
        assert config_error is not None and config_error["code"] == "invalid_speed"
        await send_json(ws, {"type": "synthesize", "text": "Still here.", "request_id": "after"})
        (result,), _ = await collect(ws, 1)
        assert result.end is not None and result.end["type"] == "synthesis_complete" and result.audio


# --- item 2: the work of one request ---------------------------------------------------------------


def test_two_thousand_nines_are_refused_as_too_much_work(kokoro_server: LiveServer) -> None:
    """Before: a cardinal of 2,000 digits (or an OverflowError in num2words): minutes of one worker."""
    response = post_invocation(kokoro_server, json.dumps({"text": "9" * 2000}))
    assert response.status_code == 413
    body = response.json()
    assert body["code"] == "text_too_complex" and "phonemes" in body["message"]


def test_a_long_number_within_the_budget_is_read_as_digit_groups(kokoro_server: LiveServer) -> None:
    response = post_invocation(kokoro_server, json.dumps({"text": "My card is 4111111111111111."}))
    assert response.status_code == 200 and len(response.content) > 24_000  # more than half a second


def test_a_pile_of_accents_is_spoken_as_one_letter(kokoro_server: LiveServer) -> None:
    response = post_invocation(kokoro_server, json.dumps({"text": "a" + "\u0301" * 1999}))
    assert response.status_code == 200 and response.content


# --- item 3: one session's G2P never holds up another's --------------------------------------------


@pytest.fixture(scope="module")
def patient_engine(kokoro_engine: SpeechEngine) -> Iterator[SpeechEngine]:
    """Another real engine (beside `kokoro_engine`), with a long G2P limit, so the order below
    has seconds of margin."""
    engine = load_engine("onnx", threads=TEST_THREADS, g2p=G2PSettings(workers=2, timeout_s=15))
    yield engine
    engine.close()


async def test_a_pathological_text_neither_stalls_other_sessions_nor_runs_unbounded(
    patient_engine: SpeechEngine,
) -> None:
    """Session A's text needs minutes of G2P; session B says a short sentence meanwhile.
    Before: one lock around G2P, so B's first audio waited for A's G2P (13.6 s in the issue,
    minutes here), and A's G2P ran to its end. Now B completes while A's G2P still runs, and
    A's G2P is stopped at its limit with text_too_complex."""
    with start_server(create_app(patient_engine, Limits())) as server:
        async with connect(server.ws_url) as stuck, connect(server.ws_url) as other:
            await send_json(stuck, {"type": "synthesize", "text": PATHOLOGICAL, "request_id": "stuck"})
            assert (await next_frame(stuck)).type == "synthesis_start"
            await send_json(other, {"type": "synthesize", "text": "Hello there.", "request_id": "other"})
            order: list[str] = []

            async def ended(ws: ClientConnection, name: str) -> dict[str, object]:
                while True:
                    frame = await next_frame(ws)
                    if frame.type in ("synthesis_complete", "error"):
                        order.append(name)
                        assert frame.control is not None
                        return frame.control

            stuck_end, other_end = await asyncio.gather(ended(stuck, "stuck"), ended(other, "other"))
    assert other_end["type"] == "synthesis_complete"
    assert stuck_end["type"] == "error" and stuck_end["code"] == "text_too_complex"
    assert order == ["other", "stuck"]


# --- item 4: voice blends --------------------------------------------------------------------------


def test_five_hundred_distinct_blends_do_not_grow_memory(kokoro_engine: SpeechEngine) -> None:
    """Before: each distinct blend string kept a 522 KB table forever (500 blends: +247 MB)."""

    def blends(start: int) -> None:
        for step in range(start, start + 250):
            # Building the request computes its style table (inference is lazy: never run here).
            kokoro_engine.synthesize("Hi.", f"af_heart:{step},af_bella:{1000 - step}")

    blends(1)  # the cache is full after this
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # peak RSS (KiB): growth shows here too
    blends(300)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 60, f"peak RSS grew {grown_mib:.0f} MiB over 250 more blends (unbounded: ~125 MiB)"


# --- item 6: a request waiting for a worker is kept alive --------------------------------------------


async def test_a_request_behind_a_long_synthesis_gets_queued_frames_and_completes(
    server_factory: ServerFactory,
) -> None:
    """One synthesis worker: B's sentence waits behind A's long one. B's client gives up after
    1.5 s without a frame; the server's `queued` frames (every 0.3 s) keep it going."""
    long_sentence = (
        "This sentence is long on purpose, so that its synthesis keeps the only worker busy for a "
        "good while, and the short request behind it has to wait its turn without any audio at all."
    )
    with server_factory(Limits(keepalive_s=0.3), synth_workers=1) as server:
        async with (
            BidiSession.websocket(server.ws_url, silence_timeout=60) as first,
            BidiSession.websocket(server.ws_url, silence_timeout=1.5) as second,
        ):
            await first.send(long_sentence)
            await asyncio.sleep(0.2)
            await second.send("Me too.")
            seen = []
            async with asyncio.timeout(180):
                async for event in second.events():
                    seen.append(event)
                    if isinstance(event, RequestCompleted):
                        break
    assert isinstance(seen[-1], RequestCompleted)
    assert any(isinstance(event, Queued) for event in seen)
