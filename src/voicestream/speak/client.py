"""A client of the speak function: POST /speak, then its events as they stream back.

The decoding itself (either transport, any chunking) is `wire.speak.SpeakStreamDecoder`; this
adds the HTTP request and turns a refusal (a 4xx/5xx with the one error body) into
`SpeakHTTPError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx

from voicestream.wire.errors import CodedError, ErrorCode, read_error_body
from voicestream.wire.speak import SpeakEvent, SpeakStreamDecoder


class SpeakHTTPError(CodedError):
    """The speak function refused the request; `code` and `status` are its answer's."""

    code = ErrorCode.HTTP_ERROR

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} [{code}]: {message}", code=code, status=status)


async def speak_events(
    client: httpx.AsyncClient, url: str, request: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
) -> AsyncGenerator[SpeakEvent]:
    """POST `request` to a speak function's /speak (`url` is its base URL) and yield its events.

    The transport is the request's own (`"transport"`, default sse). Raises `SpeakHTTPError`
    for a refused request, `FrameError` for a malformed or truncated stream.
    """
    transport = request.get("transport", "sse")
    decoder = SpeakStreamDecoder(transport)
    async with client.stream("POST", url.rstrip("/") + "/speak", json=dict(request), headers=headers) as response:
        if response.status_code != 200:
            raise refusal(response.status_code, await response.aread())
        async for chunk in response.aiter_raw():
            for event in decoder.feed(chunk):
                yield event
    decoder.close()


def refusal(status: int, body: bytes) -> SpeakHTTPError:
    """The error of a refused request, from its body (the one error body, or whatever came)."""
    try:
        error = read_error_body(json.loads(body))
    except ValueError:
        error = None
    if error is None:
        return SpeakHTTPError(status, ErrorCode.HTTP_ERROR, body[:200].decode("utf-8", "replace"))
    return SpeakHTTPError(status, error.code, error.message)
