"""`voicestream serve --speak-url`: the signing proxy lets only this machine's own page use the
operator's credentials. Real proxy under uvicorn on a real socket, in front of a fake function
URL (a SigV4 check over a recording app); real botocore credentials (a credential process).

What a hostile page can do is what these tests do: a content-type-less "simple" POST, a huge
or slow body, a rebound Host name, a foreign Origin; and a browser that leaves mid-stream.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import botocore.session
import httpx
import pytest
from botocore.credentials import Credentials
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests.statemachines.sigv4 import RequireSigV4
from voicestream.aws.function_url import SpeakProxy
from voicestream.aws.sigv4 import caller_credentials, signed_headers
from voicestream.cli import main
from voicestream.devserver import RunningServer, bind_free_port, serve_in_thread
from voicestream.local_stack import RemoteBindRefused, check_proxy_bind, create_proxy_app
from voicestream.origins import allowed_hosts

REGION = "eu-west-1"
ACCESS_KEY, SECRET = "AKIDCALLER", "caller-secret"
HANG_GUARD_S = 60.0  # only keeps a broken proxy from hanging the suite; never asserted on


@dataclass
class Upstream:
    """A function URL that answers 200 with one chunk, then holds the stream open until the
    caller leaves; it records what reached it."""

    url: str
    bodies: list[bytes] = field(default_factory=list)
    left: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def upstream_function() -> Iterator[Upstream]:
    upstream = Upstream(url="")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        upstream.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"event: first\n\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        upstream.left.set()

    front = RequireSigV4(app, secrets=lambda: {ACCESS_KEY: SECRET}, region=REGION, service="lambda")
    with serve_in_thread(front, "fake-function-url", lifespan="off") as running:
        upstream.url = running.url
        yield upstream


@contextlib.contextmanager
def proxy_for(upstream: Upstream) -> Iterator[RunningServer]:
    listener = bind_free_port()
    port = listener.getsockname()[1]
    app = create_proxy_app(
        upstream.url, Credentials(ACCESS_KEY, SECRET), region=REGION, hosts=allowed_hosts("127.0.0.1", port)
    )
    with serve_in_thread(app, "signing-proxy", listener=listener) as running:
        yield running


def answer(client: socket.socket) -> bytes:
    """The server's response: its head, then the body its Content-Length announces (they may come
    in separate reads). Not read until the connection closes: uvicorn holds it open for its
    keep-alive timeout after answering, which would only make the test wait."""
    client.settimeout(HANG_GUARD_S)
    received = b""
    while b"\r\n\r\n" not in received and (chunk := client.recv(65536)):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lengths = [line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = int(lengths[0]) if lengths else 0
    while len(body) < length and (chunk := client.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with upstream_function() as running:
        yield running


def test_a_same_origin_json_post_is_signed_and_forwarded(upstream: Upstream) -> None:
    with proxy_for(upstream) as proxy:
        origin = f"http://127.0.0.1:{proxy.port}"
        with httpx.stream("POST", f"{proxy.url}/speak", json={"text": "Hi."}, headers={"origin": origin}) as response:
            assert response.status_code == 200
            assert next(response.iter_raw()) == b"event: first\n\n"
    assert upstream.bodies == [b'{"text":"Hi."}']  # it passed the SigV4 check


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_simple_cross_site_post_is_refused_before_signing(upstream: Upstream, content_type: str | None) -> None:
    """What `fetch(url, {mode: "no-cors", body})` from any page sends: no JSON content type."""
    headers = {} if content_type is None else {"content-type": content_type}
    with proxy_for(upstream) as proxy:
        response = httpx.post(f"{proxy.url}/speak", content=b'{"text": "Hi."}', headers=headers)
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    assert upstream.bodies == []


def test_a_huge_body_is_refused_without_reading_it(upstream: Upstream) -> None:
    with proxy_for(upstream) as proxy, socket.create_connection(("127.0.0.1", proxy.port)) as client:
        client.sendall(
            b"POST /speak HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
            b"content-length: 1000000000\r\n\r\n{" % proxy.port
        )
        reply = answer(client)
    assert reply.startswith(b"HTTP/1.1 413"), reply
    assert b"message_too_large" in reply and upstream.bodies == []


def test_a_slow_body_meets_the_deadline(upstream: Upstream) -> None:
    proxy = SpeakProxy(upstream.url, Credentials(ACCESS_KEY, SECRET), region=REGION, body_timeout_s=0.5)
    app = Starlette(routes=[Route("/speak", proxy.handle, methods=["POST"])])
    with (
        serve_in_thread(app, "signing-proxy") as running,
        socket.create_connection(("127.0.0.1", running.port)) as client,
    ):
        client.sendall(
            b"POST /speak HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 20\r\n\r\n{"
        )
        reply = answer(client)  # the rest of the body never comes
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert b"request_timeout" in reply and upstream.bodies == []


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:{port}", "127.0.0.1:1", "10.0.0.5:{port}"])
def test_a_foreign_host_is_misdirected(upstream: Upstream, host: str) -> None:
    """DNS rebinding: the page's own name, re-pointed at 127.0.0.1, arrives as the Host."""
    with proxy_for(upstream) as proxy:
        headers = {"host": host.format(port=proxy.port)}
        spoken = httpx.post(f"{proxy.url}/speak", json={"text": "Hi."}, headers=headers)
        page = httpx.get(f"{proxy.url}/", headers=headers)
    assert spoken.status_code == 421 and spoken.json()["code"] == "misdirected_request"
    assert page.status_code == 421 and upstream.bodies == []


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]"])
def test_every_loopback_name_is_answered(upstream: Upstream, name: str) -> None:
    with proxy_for(upstream) as proxy:
        assert httpx.get(f"{proxy.url}/health", headers={"host": f"{name}:{proxy.port}"}).status_code == 200


@pytest.mark.parametrize("origin", ["https://attacker.example", "http://localhost:1", "null"])
def test_a_foreign_origin_is_forbidden(upstream: Upstream, origin: str) -> None:
    with proxy_for(upstream) as proxy:
        response = httpx.post(f"{proxy.url}/speak", json={"text": "Hi."}, headers={"origin": origin})
    assert response.status_code == 403 and response.json()["code"] == "forbidden_origin"
    assert upstream.bodies == []


def test_the_upstream_closes_when_the_browser_leaves(upstream: Upstream) -> None:
    """The function is still thinking (no bytes after the first): only a watched disconnect
    can tell the proxy that nobody listens any more."""
    with proxy_for(upstream) as proxy:
        with httpx.stream("POST", f"{proxy.url}/speak", json={"text": "Hi."}) as response:
            assert next(response.iter_raw()) == b"event: first\n\n"
        assert upstream.left.wait(30), "the proxy kept the function's stream open"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.org"])
def test_a_non_loopback_bind_needs_the_explicit_flag(host: str) -> None:
    with pytest.raises(RemoteBindRefused, match="--allow-remote"):
        check_proxy_bind(host, allow_remote=False)
    check_proxy_bind(host, allow_remote=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_a_loopback_bind_needs_no_flag(host: str) -> None:
    check_proxy_bind(host, allow_remote=False)


def test_the_command_refuses_a_wildcard_bind(capsys: pytest.CaptureFixture[str]) -> None:
    url = "https://abc123.lambda-url.eu-west-1.on.aws/"
    assert main(["serve", "--speak-url", url, "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_credentials_are_refreshed_before_they_expire(tmp_path: Path) -> None:
    """A credential process (as SSO and assumed roles) hands out credentials that expire in 5
    minutes, a new key each time: every signature must use fresh ones, not those of the start."""
    counter = tmp_path / "count"
    process = tmp_path / "credentials.py"
    process.write_text(
        "import datetime, json, pathlib\n"
        f"counter = pathlib.Path({str(counter)!r})\n"
        "n = int(counter.read_text()) + 1 if counter.exists() else 1\n"
        "counter.write_text(str(n))\n"
        "expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)\n"
        "print(json.dumps({'Version': 1, 'AccessKeyId': f'AKIDROTATED{n}', 'SecretAccessKey': 's',\n"
        "                  'SessionToken': 't', 'Expiration': expires.strftime('%Y-%m-%dT%H:%M:%SZ')}))\n"
    )
    config = tmp_path / "config"
    config.write_text(f"[profile rotating]\ncredential_process = {sys.executable} {process}\n")
    core = botocore.session.Session()
    core.set_config_variable("config_file", str(config))
    credentials = caller_credentials(boto3.Session(botocore_session=core, profile_name="rotating"))

    def key_of_a_signature() -> str:
        headers = signed_headers(
            "POST", "https://x.lambda-url.eu-west-1.on.aws/speak", b"{}", region=REGION, credentials=credentials
        )
        return headers["Authorization"].split("Credential=", 1)[1].split("/", 1)[0]

    first, second = key_of_a_signature(), key_of_a_signature()
    assert first != second and second.startswith("AKIDROTATED")


def test_health_names_the_target_only(upstream: Upstream) -> None:
    with proxy_for(upstream) as proxy:
        body = httpx.get(f"{proxy.url}/health").json()
    assert body["speak"] == f"{upstream.url}/speak" and json.dumps(body).count("AKID") == 0
