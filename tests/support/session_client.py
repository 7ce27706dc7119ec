"""A strict test-side reader of the bidi session: every frame classified by the one rule, and
the ordering promises (no interleaving, one end per request) checked as it reads."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection

from voicestream.wire.framing import parse_control_frame

TIMEOUT_S = 180.0


@dataclass
class Frame:
    control: dict[str, Any] | None
    audio: bytes = b""

    @property
    def type(self) -> str | None:
        return None if self.control is None else str(self.control["type"])


@dataclass
class RequestResult:
    request_id: str
    start: dict[str, Any]
    audio: bytearray = field(default_factory=bytearray)
    frames: int = 0
    end: dict[str, Any] | None = None


async def next_frame(ws: ClientConnection, wait_s: float = TIMEOUT_S) -> Frame:
    payload = await asyncio.wait_for(ws.recv(), wait_s)
    control = parse_control_frame(payload)
    if control is not None:
        return Frame(control)
    # Audio is always a binary frame; a text frame that is not a JSON object is a server bug.
    assert isinstance(payload, bytes), f"text frame that is not a control message: {payload!r}"
    return Frame(None, payload)


async def send_json(ws: ClientConnection, body: dict[str, Any], binary: bool = True) -> None:
    """Send like SageMaker does by default (a BINARY frame), or as a TEXT frame."""
    text = json.dumps(body)
    await ws.send(text.encode() if binary else text)


async def collect(
    ws: ClientConnection, count: int, wait_s: float = TIMEOUT_S
) -> tuple[list[RequestResult], list[dict[str, Any]]]:
    """Read until `count` requests have ended; returns them in the order they started, and
    the other control messages but `queued` keepalives (sent when nothing went out for a while,
    which on a loaded machine may happen in any test: they say how fast, not what). Fails on
    interleaved audio or a second end for a request."""
    results: list[RequestResult] = []
    others: list[dict[str, Any]] = []
    current: RequestResult | None = None
    while sum(1 for result in results if result.end is not None) < count:
        frame = await next_frame(ws, wait_s)
        if frame.control is None:
            assert current is not None, "audio frame outside any request"
            current.audio += frame.audio
            current.frames += 1
        elif frame.type == "synthesis_start":
            assert current is None, f"request {frame.control['request_id']} started inside {current}"
            current = RequestResult(frame.control["request_id"], frame.control)
            results.append(current)
        elif frame.type == "synthesis_complete" or (
            frame.type == "error" and current is not None and frame.control.get("request_id") == current.request_id
        ):
            assert current is not None and frame.control["request_id"] == current.request_id, frame.control
            current.end = frame.control
            current = None
        elif frame.type != "queued":
            others.append(frame.control)
    return results, others


async def roundtrip_ping(ws: ClientConnection, wait_s: float = TIMEOUT_S) -> list[Frame]:
    """Send an application ping; return every frame that came before the pong."""
    await send_json(ws, {"type": "ping"})
    before: list[Frame] = []
    while (frame := await next_frame(ws, wait_s)).type != "pong":
        before.append(frame)
    return before
