"""The real server reports its open sessions as CloudWatch EMF lines on stdout (the template's
sessions scaling and alarms read them), only when VOICESTREAM_METRICS_ENDPOINT names the endpoint."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.conftest import ServerFactory
from tests.support.session_client import next_frame, send_json
from voicestream.wire.bidi import Limits


def metric_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"open_sessions"' in line]


async def test_the_server_reports_its_open_sessions_per_endpoint(
    server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICESTREAM_METRICS_ENDPOINT", "voicestream-kokoro")
    with server_factory(Limits(max_sessions=4)) as server:
        reporter = server.app.state.session_metrics
        assert reporter is not None
        async with connect(server.ws_url) as ws:
            await send_json(ws, {"type": "ping"})
            assert (await next_frame(ws, 30)).control is not None  # the session is open
            opened = reporter.report()
        runtime = server.app.state.runtime
        deadline = time.monotonic() + 30
        while runtime.stats.sessions_active:  # the server notices the close on its own loop
            assert time.monotonic() < deadline, "the session never closed on the server"
            await asyncio.sleep(0.01)
        closed = reporter.report()
    out = capsys.readouterr().out
    lines = metric_lines(out)
    assert lines[0]["OpenSessions"] == 0  # the thread's first line, at startup
    assert json.loads(opened)["OpenSessions"] == 1 and json.loads(closed)["OpenSessions"] == 0
    assert opened in out.splitlines() and closed in out.splitlines()  # written to stdout as returned
    assert {line["EndpointName"] for line in lines} == {"voicestream-kokoro"}
    assert {line["MaxSessions"] for line in lines} == {4}


def test_without_an_endpoint_name_nothing_is_reported(
    server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VOICESTREAM_METRICS_ENDPOINT", raising=False)
    with server_factory(Limits()) as server:
        assert server.app.state.session_metrics is None
    assert metric_lines(capsys.readouterr().out) == []
