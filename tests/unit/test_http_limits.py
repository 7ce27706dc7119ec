"""The HTTP limits in the unit tier: JSON bodies only, the body deadline (asgi.read_body, over
ASGI messages in memory), the uvicorn options, the new settings and wire messages.
tests/integration/test_http_edges.py holds real sockets to the same limits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request

from voicestream.asgi import read_body, require_json
from voicestream.env import ConfigError, Env, ServerSettings, limits, server_settings
from voicestream.httpserver import HeaderDeadlineProtocol, uvicorn_options
from voicestream.wire.bidi import Limits, Queued, encode_server_message, parse_server_message
from voicestream.wire.errors import ErrorCode, ProtocolError


def request(content_type: str | None, chunks: list[bytes], stall: bool = False) -> Request:
    """A POST whose body arrives as `chunks`, then (with `stall`) never finishes."""
    headers = [] if content_type is None else [(b"content-type", content_type.encode())]
    scope = {"type": "http", "method": "POST", "path": "/invocations", "headers": headers, "query_string": b""}
    pending = list(chunks)

    async def receive() -> dict[str, Any]:
        if pending:
            body = pending.pop(0)
            return {"type": "http.request", "body": body, "more_body": bool(pending) or stall}
        await asyncio.Event().wait()  # a client that stopped sending
        raise AssertionError("unreachable")

    return Request(scope, receive)


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON"])
async def test_json_bodies_are_read(content_type: str) -> None:
    assert await read_body(request(content_type, [b'{"text":', b' "hi"}']), 1000, timeout_s=5) == b'{"text": "hi"}'


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx"])
def test_other_bodies_are_415(content_type: str | None) -> None:
    with pytest.raises(ProtocolError) as caught:
        require_json(request(content_type, []))
    assert caught.value.code == ErrorCode.UNSUPPORTED_MEDIA_TYPE and caught.value.status == 415


async def test_a_body_that_stops_arriving_is_408() -> None:
    with pytest.raises(ProtocolError) as caught:
        await read_body(request("application/json", [b'{"text": "h'], stall=True), 1000, timeout_s=0.2)
    assert caught.value.code == ErrorCode.REQUEST_TIMEOUT and caught.value.status == 408
    assert "11 bytes came" in caught.value.message


async def test_the_size_limit_still_applies() -> None:
    with pytest.raises(ProtocolError) as caught:
        await read_body(request("application/json", [b"x" * 600, b"x" * 600]), 1000, timeout_s=5)
    assert caught.value.code == ErrorCode.MESSAGE_TOO_LARGE and caught.value.status == 413


def test_uvicorn_options_carry_the_limits() -> None:
    options = uvicorn_options(header_timeout_s=3.5, max_connections=7, max_message_bytes=1000)
    assert issubclass(options["http"], HeaderDeadlineProtocol) and options["http"].header_timeout_s == 3.5
    assert options["limit_concurrency"] == 7 and options["timeout_keep_alive"] > 0
    assert options["ws_max_size"] == 1000 and options["ws_per_message_deflate"] is False
    assert uvicorn_options()["ws_max_size"] == Limits().max_message_bytes
    with pytest.raises(ValueError):
        uvicorn_options(header_timeout_s=0)
    with pytest.raises(ValueError):
        uvicorn_options(max_connections=0)
    with pytest.raises(ValueError):
        uvicorn_options(max_message_bytes=0)
    assert uvicorn_options(close_timeout_s=2.5)["http"].close_timeout_s == 2.5
    with pytest.raises(ValueError):
        uvicorn_options(close_timeout_s=0)


def test_new_server_settings_from_env() -> None:
    settings = server_settings(
        Env(
            {
                "VOICESTREAM_G2P_WORKERS": "3",
                "VOICESTREAM_G2P_TIMEOUT_S": "2.5",
                "VOICESTREAM_HEADER_TIMEOUT_S": "4",
                "VOICESTREAM_MAX_CONNECTIONS": "100",
            }
        )
    )
    assert (settings.g2p_workers, settings.g2p_timeout_s, settings.header_timeout_s, settings.max_connections) == (
        3,
        2.5,
        4.0,
        100,
    )
    defaults = ServerSettings()
    assert (defaults.g2p_workers, defaults.g2p_timeout_s, defaults.header_timeout_s) == (2, 5.0, 10.0)


@pytest.mark.parametrize(
    "environ",
    [
        {"VOICESTREAM_G2P_WORKERS": "0"},
        {"VOICESTREAM_G2P_TIMEOUT_S": "0"},
        {"VOICESTREAM_HEADER_TIMEOUT_S": "-1"},
        {"VOICESTREAM_MAX_CONNECTIONS": "none"},
    ],
)
def test_bad_new_settings_name_the_variable(environ: dict[str, str]) -> None:
    (name,) = environ
    with pytest.raises(ConfigError, match=name):
        server_settings(Env(environ))


def test_new_limits_from_env() -> None:
    applied = limits(Env({"VOICESTREAM_MAX_PHONEMES": "800", "VOICESTREAM_BODY_TIMEOUT_S": "3"}))
    assert applied == Limits(max_phonemes=800, body_timeout_s=3.0)


def test_queued_is_a_server_message_of_the_contract() -> None:
    message = Queued(request_id="r7", waited_ms=5012.5)
    text = encode_server_message(message)
    assert text == '{"type":"queued","request_id":"r7","waited_ms":5012.5}'
    assert parse_server_message(text) == message


def test_new_codes_have_their_statuses() -> None:
    assert ProtocolError(ErrorCode.TEXT_TOO_COMPLEX, "x").status == 413
    assert ProtocolError(ErrorCode.REQUEST_TIMEOUT, "x").status == 408
