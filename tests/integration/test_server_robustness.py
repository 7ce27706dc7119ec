"""The session survives anything a client sends (that audio never reads as a control frame is in
tests/unit/test_server_robustness.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection as SyncConnection
from websockets.sync.client import connect as sync_connect

from tests.support.server import LiveServer
from voicestream.wire.framing import parse_control_frame


def random_frames() -> st.SearchStrategy[bytes | str]:
    """Junk, near-misses and valid control messages; never a speakable synthesize (no model
    time) and never `close` (it would end the session under test)."""
    not_speakable = st.one_of(
        st.none(), st.integers(), st.floats(), st.just(""), st.just(" \n"), st.lists(st.integers(), max_size=3)
    )
    field_values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=12),
        st.sampled_from(["af_heart", "bm_george", "pcm", "mp3", "wav", "nobody", "af_heart:2,am_adam:1"]),
    )
    objects = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["synthesize", "config", "cancel", "ping", "dance", "", "CLOSE"]) | st.integers(),
            "text": not_speakable,
            "voice": field_values,
            "speed": field_values,
            "format": field_values,
            "request_id": field_values,
        },
    )
    as_json = objects.map(json.dumps)
    return st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300),
        as_json,
        as_json.map(str.encode),
        st.binary(max_size=40).map(lambda junk: b"{" + junk + b"}"),
    )


def replies_until_barrier(ws: SyncConnection) -> list[dict[str, object]]:
    """Every reply to what was sent so far. The barrier is a message whose error names it, so
    it cannot be confused with a reply to a random frame (a random `ping` also gets a pong)."""
    barrier = f"barrier-{uuid.uuid4().hex}"
    ws.send(json.dumps({"type": "barrier", "request_id": barrier}).encode())
    replies: list[dict[str, object]] = []
    while True:
        payload = ws.recv(timeout=30)
        control = parse_control_frame(payload)
        assert control is not None, f"audio where none was requested: {payload!r}"
        if control.get("request_id") == barrier:
            assert control["code"] == "unknown_type"
            return replies
        replies.append(control)


@pytest.fixture
def baseline_tasks(kokoro_server: LiveServer) -> Iterator[list[str]]:
    yield kokoro_server.task_names()


def test_random_frames_never_break_the_session_or_leak(kokoro_server: LiveServer, baseline_tasks: list[str]) -> None:
    runtime = kokoro_server.runtime
    with sync_connect(kokoro_server.ws_url) as ws:
        assert replies_until_barrier(ws) == []
        assert len(kokoro_server.session_tasks()) == 2  # this session's synthesis and send tasks

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(st.lists(random_frames(), min_size=1, max_size=5))
        def throw(frames: list[bytes | str]) -> None:
            for frame in frames:
                ws.send(frame)
            for reply in replies_until_barrier(ws):
                assert reply["type"] in ("error", "cancelled", "pong"), reply
                if reply["type"] == "error":
                    assert isinstance(reply["code"], str) and reply["code"] != "internal_error"

        throw()
        assert replies_until_barrier(ws) == []  # alive and still in order
        assert runtime.stats.sessions_active == 1
        ws.send(b'{"type":"close"}')
        assert parse_control_frame(ws.recv(timeout=30)) == {"type": "session_closed", "reason": "close"}
    # The server finishes its side of the close asynchronously.
    kokoro_server.wait_until(
        lambda server: server.runtime.stats.sessions_active == 0 and server.task_names() == baseline_tasks
    )
    assert runtime.stats.steps_running == 0
