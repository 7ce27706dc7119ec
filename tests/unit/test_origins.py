"""The Host and Origin rules (`voicestream.origins`) on ASGI scopes: what each header allows."""

from __future__ import annotations

import pytest
from starlette.types import Receive, Scope, Send

from voicestream.origins import RequestGuard, allowed_hosts, is_loopback


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("never called by these tests")


def scope(kind: str = "http", **headers: str) -> Scope:
    return {"type": kind, "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.2", "localhost.attacker.example", "10.0.0.1"])
def test_other_addresses(host: str) -> None:
    assert not is_loopback(host)


def test_allowed_hosts_name_the_bind_and_loopback() -> None:
    assert allowed_hosts("0.0.0.0", 8080) == {"localhost:8080", "127.0.0.1:8080", "[::1]:8080"}
    assert "192.168.1.2:8080" in allowed_hosts("192.168.1.2", 8080)
    assert "[fe80::1]:8080" in allowed_hosts("fe80::1", 8080)
    assert "box.lan:8080" in allowed_hosts("127.0.0.1", 8080, ["Box.lan"])
    assert "localhost" in allowed_hosts("127.0.0.1", 80)  # browsers leave out the default port


def test_host_checked_guard() -> None:
    guard = RequestGuard(app, hosts=allowed_hosts("127.0.0.1", 8080))
    assert guard.refusal(scope(host="127.0.0.1:8080")) is None
    assert guard.refusal(scope(host="LocalHost:8080", origin="http://localhost:8080")) is None
    refused = guard.refusal(scope(host="attacker.example:8080"))
    assert refused is not None and (refused.code, refused.status) == ("misdirected_request", 421)
    assert guard.refusal(scope(host="127.0.0.1:8080", origin="http://localhost:8080")) is not None  # another origin
    assert guard.refusal(scope()) is not None  # no Host at all


def test_server_guard_checks_websocket_origins_only() -> None:
    guard = RequestGuard(app, origins=["https://app.example.com/"], http_origins=False)
    assert guard.refusal(scope("websocket", host="anything")) is None
    assert guard.refusal(scope("websocket", origin="https://app.example.com")) is None
    refused = guard.refusal(scope("websocket", host="h", origin="http://h"))  # no Host list: no same-origin
    assert refused is not None and (refused.code, refused.status) == ("forbidden_origin", 403)
    assert guard.refusal(scope("http", origin="https://attacker.example")) is None
