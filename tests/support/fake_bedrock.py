"""Amazon Bedrock's ConverseStream, played by a local HTTP server.

Only the service is fake. boto3/botocore (request serialization, SigV4 signing, the HTTP
connection pool, the AWS event-stream decoder) and Strands' BedrockModel and Agent all run
for real against `endpoint_url`. The server speaks the real wire format: HTTP/1.1 chunked
`application/vnd.amazon.eventstream` messages (prelude, headers, payload, CRC32s; encoded
with smithy's event-stream encoder), modelled errors as an HTTP status plus
`x-amzn-ErrorType`, and in-stream exceptions as `:message-type: exception` messages.

Each request takes the next scripted `Turn` (default: the last one again) and is recorded.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from smithy_aws_event_stream.events import EventMessage

_PATH = re.compile(r"^/model/(?P<model>[^/]+)/converse-stream$")
_CONTENT_TYPE = "application/vnd.amazon.eventstream"


@dataclass(frozen=True)
class Turn:
    """What the fake answers to one request.

    `deltas` are streamed as contentBlockDelta events, `delay_s` apart after `first_delay_s`.
    `http_error` = (status, error type, message) answers with a modelled HTTP error instead;
    `stream_error` = (exception type, message) is sent in-stream after the deltas.
    """

    deltas: tuple[str, ...] = ()
    first_delay_s: float = 0.0
    delay_s: float = 0.0
    http_error: tuple[int, str, str] | None = None
    stream_error: tuple[str, str] | None = None


@dataclass
class Recorded:
    model_id: str
    body: dict[str, Any]
    headers: dict[str, str]
    events_sent: int = 0
    disconnected: bool = False  # the client went away before the stream ended
    finished: threading.Event = field(default_factory=threading.Event)


def event_message(event_type: str, payload: dict[str, Any]) -> bytes:
    return EventMessage(
        headers={":message-type": "event", ":event-type": event_type, ":content-type": "application/json"},
        payload=json.dumps(payload).encode(),
    ).encode()


def exception_message(exception_type: str, message: str) -> bytes:
    return EventMessage(
        headers={
            ":message-type": "exception",
            ":exception-type": exception_type,
            ":content-type": "application/json",
        },
        payload=json.dumps({"message": message}).encode(),
    ).encode()


class FakeBedrock:
    def __init__(self, turns: list[Turn] | None = None) -> None:
        self.turns: list[Turn] = list(turns or [Turn(deltas=("Hello there.",))])
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # shutdown() waits for serve_forever to poll (every 0.5 s by default): each test would pay it.
        serve = functools.partial(self._server.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, name="fake-bedrock", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeBedrock:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_turn(self, model_id: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[Turn, Recorded]:
        with self._lock:
            turn = self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]
            record = Recorded(model_id, body, headers)
            self.requests.append(record)
            return turn, record


@contextmanager
def fake_bedrock(turns: list[Turn] | None = None) -> Iterator[FakeBedrock]:
    fake = FakeBedrock(turns).start()
    try:
        yield fake
    finally:
        fake.stop()


def _handler_for(fake: FakeBedrock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            match = _PATH.match(self.path)
            if match is None:
                self._error(404, "UnknownOperationException", f"no route {self.path}")
                return
            if not (self.headers.get("Authorization") or "").startswith("AWS4-HMAC-SHA256 Credential="):
                self._error(403, "AccessDeniedException", "request is not SigV4-signed")
                return
            from urllib.parse import unquote

            turn, record = fake.next_turn(unquote(match["model"]), json.loads(raw), dict(self.headers))
            try:
                if turn.http_error is not None:
                    self._error(*turn.http_error)
                    return
                self._stream(turn, record)
            finally:
                record.finished.set()

        def _error(self, status: int, error_type: str, message: str) -> None:
            body = json.dumps({"message": message}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/coral/")
            self.send_header("x-amzn-RequestId", "fake-request")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _chunk(self, record: Recorded, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            record.events_sent += 1

        def _stream(self, turn: Turn, record: Recorded) -> None:
            self.send_response(200)
            self.send_header("Content-Type", _CONTENT_TYPE)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-amzn-RequestId", "fake-request")
            self.end_headers()
            try:
                self._chunk(record, event_message("messageStart", {"role": "assistant"}))
                time.sleep(turn.first_delay_s)
                for index, delta in enumerate(turn.deltas):
                    if index:
                        time.sleep(turn.delay_s)
                    payload = {"contentBlockIndex": 0, "delta": {"text": delta}}
                    self._chunk(record, event_message("contentBlockDelta", payload))
                if turn.stream_error is not None:
                    self._chunk(record, exception_message(*turn.stream_error))
                else:
                    self._chunk(record, event_message("contentBlockStop", {"contentBlockIndex": 0}))
                    self._chunk(record, event_message("messageStop", {"stopReason": "end_turn"}))
                    usage = {"inputTokens": 10, "outputTokens": len(turn.deltas), "totalTokens": 10 + len(turn.deltas)}
                    self._chunk(record, event_message("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                record.disconnected = True
            self.close_connection = True

    return Handler
