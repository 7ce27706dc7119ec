"""Host and Origin on the Kokoro server and the local stack (`voicestream.origins`): a web page
the user opens must not open a session, nor (by DNS rebinding) read /speak or /voices.

Real apps under uvicorn on real sockets with the tone engine; the clients are the real
websockets and httpx libraries, setting the headers a browser would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.support.fakes import ToneEngine
from tests.support.server import LiveServer, start_server
from tests.support.session_client import next_frame, send_json
from voicestream.devserver import RunningServer, bind_free_port, serve_in_thread, wait_until_ready
from voicestream.env import ConfigError, Env, allowed_origins
from voicestream.kokoro_server import create_app
from voicestream.local_stack import create_local_app, kokoro_ws_url
from voicestream.speak.config import SpeakConfig
from voicestream.wire.bidi import Limits

ALLOWED = "https://app.example.com"


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    app = create_app(ToneEngine(), Limits(), allowed_origins=[ALLOWED])
    with start_server(app, ready_timeout=60) as live:
        yield live


@pytest.fixture(scope="module")
def stack() -> Iterator[RunningServer]:
    listener = bind_free_port()
    port = listener.getsockname()[1]
    app = create_local_app(ToneEngine(), speak_config=SpeakConfig(kokoro_ws_url=kokoro_ws_url("127.0.0.1", port)))
    with serve_in_thread(app, "origins-stack", listener=listener, lifespan="on") as running:
        wait_until_ready(running.url, 60)
        yield running


async def spoken_session(url: str, *, port: int | None = None, **headers: str) -> str:
    """Open a session (with `headers`; to 127.0.0.1:`port` whatever the URL's host), ask for
    one word; the first frame's type."""
    sockets: dict[str, Any] = {} if port is None else {"host": "127.0.0.1", "port": port}
    async with connect(url, additional_headers=headers, open_timeout=30, **sockets) as ws:
        await send_json(ws, {"type": "synthesize", "text": "Hi."})
        frame = await next_frame(ws)
    return frame.type or "audio"


async def test_sdk_clients_and_the_sidecar_send_no_origin(server: LiveServer) -> None:
    assert await spoken_session(server.ws_url) != "error"


@pytest.mark.parametrize("origin", ["https://attacker.example", "http://127.0.0.1:8080", "null"])
async def test_a_web_page_cannot_open_a_session(server: LiveServer, origin: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        await spoken_session(server.ws_url, Origin=origin)
    assert refused.value.response.status_code == 403


async def test_a_configured_origin_may_open_a_session(server: LiveServer) -> None:
    assert await spoken_session(server.ws_url, Origin=ALLOWED) != "error"


def test_the_server_checks_no_host(server: LiveServer) -> None:
    """Behind SageMaker or a load balancer the Host is theirs: it is not the server's to check."""
    response = httpx.get(f"{server.http_url}/v1/models", headers={"host": "runtime.sagemaker.example"})
    assert response.status_code == 200


@pytest.mark.parametrize("path", ["/", "/voices", "/health", "/ping", "/v1/audio/voices"])
def test_the_local_stack_answers_no_rebound_host(stack: RunningServer, path: str) -> None:
    response = httpx.get(f"{stack.url}{path}", headers={"host": f"attacker.example:{stack.port}"})
    assert response.status_code == 421 and response.json()["code"] == "misdirected_request"
    assert httpx.get(f"{stack.url}{path}", headers={"host": f"localhost:{stack.port}"}).status_code == 200


def test_the_local_stack_refuses_a_foreign_page_s_post(stack: RunningServer) -> None:
    body = {"text": "Hi.", "transport": "binary"}
    response = httpx.post(f"{stack.url}/speak", json=body, headers={"origin": "https://attacker.example"})
    assert response.status_code == 403 and response.json()["code"] == "forbidden_origin"
    own = f"http://127.0.0.1:{stack.port}"
    with httpx.stream("POST", f"{stack.url}/speak", json=body, headers={"origin": own}, timeout=60) as answer:
        assert answer.status_code == 200  # the page's own POST


async def test_the_local_stack_refuses_a_rebound_handshake(stack: RunningServer) -> None:
    with pytest.raises(InvalidStatus) as refused:
        await spoken_session(kokoro_ws_url("attacker.example", stack.port), port=stack.port)
    assert refused.value.response.status_code == 403


def test_allowed_origins_are_read_and_checked() -> None:
    given = Env({"VOICESTREAM_ALLOWED_ORIGINS": " https://a.example, http://b.example:8080 ,"})
    assert allowed_origins(given) == ("https://a.example", "http://b.example:8080")
    assert allowed_origins(Env({})) == ()
    for bad in ("a.example", "ftp://a.example", "https://a.example/page"):
        with pytest.raises(ConfigError, match="VOICESTREAM_ALLOWED_ORIGINS"):
            allowed_origins(Env({"VOICESTREAM_ALLOWED_ORIGINS": bad}))
