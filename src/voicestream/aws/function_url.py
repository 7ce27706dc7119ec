"""The deployed speak function's URL (AuthType AWS_IAM), signed with the caller's credentials.

- `call_speak`: POST /speak signed for service `lambda` (or unsigned, to a speak function served
  locally), the reply's events as they stream (binary frames or SSE,
  `wire.speak.SpeakStreamDecoder`). What AWS or the function refuses becomes one
  `FunctionUrlError` whose message is one clear line: the 403 of a caller without
  lambda:InvokeFunctionUrl, the 429 of throttling, the function's own 4xx body.
- `SpeakProxy`: an ASGI endpoint that forwards a browser's POST /speak to the URL, signing it
  server-side, and streams the answer back unchanged (the browser never holds AWS keys).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from voicestream.asgi import JSON_MEDIA_TYPE, StreamingBody, error_response, read_body
from voicestream.aws.sigv4 import function_url_region, signed_headers
from voicestream.speak.request import BODY_TIMEOUT_S, MAX_BODY_BYTES
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError, read_error_body
from voicestream.wire.framing import FrameError
from voicestream.wire.speak import SpeakEvent, SpeakStreamDecoder

SPEAK_PATH = "/speak"
_FORWARDED_RESPONSE_HEADERS = ("content-type", "x-correlation-id", "cache-control")

logger = logging.getLogger("voicestream.aws.function_url")


class FunctionUrlError(CodedError):
    """The function URL refused or failed the request; `str()` is one line for people."""

    code = ErrorCode.HTTP_ERROR
    status = 502


def speak_url(url: str) -> str:
    """The /speak URL of a function URL (given with or without /speak)."""
    base = url.rstrip("/")
    return base if base.endswith(SPEAK_PATH) else base + SPEAK_PATH


def resolve_region(url: str, region: str | None) -> str:
    """The region to sign for: the one given, else the function URL's own."""
    found = region or function_url_region(url)
    if not found:
        raise FunctionUrlError(
            f"cannot tell the region of {url}: pass --region (a function URL's host names it)",
            code="missing_region",
            status=400,
        )
    return found


def refusal(status: int, body: bytes, region: str) -> FunctionUrlError:
    """One clear line for a refused request, from its status and body."""
    detail = _message_of(body)
    if status == 403:
        return FunctionUrlError(
            f"HTTP 403 forbidden: the caller may not invoke this function URL (it needs "
            f"lambda:InvokeFunctionUrl and lambda:InvokeFunction on the function) or the request was "
            f"not signed for lambda in {region}. AWS said: {detail}",
            code="forbidden",
            status=403,
        )
    if status == 429:
        return FunctionUrlError(
            f"HTTP 429 throttled: the function is at its concurrency limit; retry later. AWS said: {detail}",
            code="throttled",
            status=429,
        )
    error = _error_body(body)
    if error is not None:
        return FunctionUrlError(f"HTTP {status} [{error.code}]: {error.message}", code=error.code, status=status)
    return FunctionUrlError(f"HTTP {status}: {detail}", status=status)


def _error_body(body: bytes) -> Any:
    try:
        return read_error_body(json.loads(body))
    except ValueError:
        return None


def _message_of(body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace").strip() or "(no body)"
    if isinstance(parsed, dict):
        for key in ("Message", "message"):
            if isinstance(parsed.get(key), str):
                return str(parsed[key])
    return json.dumps(parsed)[:200]


async def call_speak(
    client: httpx.AsyncClient,
    url: str,
    request: Mapping[str, Any],
    *,
    credentials: Any | None,
    region: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> AsyncGenerator[SpeakEvent]:
    """POST `request` to the function's /speak and yield the reply's events: signed (SigV4 for
    `lambda` in `region`, default the URL's own) with `credentials`, unsigned with None (a speak
    function served locally). `headers` go along (and are signed).

    The transport is the request's own (`"transport"`, default binary here). Raises
    `FunctionUrlError` for a refusal or a broken stream."""
    body = {"transport": "binary", **request}
    raw = json.dumps(body).encode()
    target = speak_url(url)
    headers = {"content-type": "application/json", **(headers or {})}
    if credentials is not None:
        region = resolve_region(url, region)
        headers = signed_headers("POST", target, raw, region=region, credentials=credentials, headers=headers)
    decoder = SpeakStreamDecoder(body["transport"])
    try:
        async with client.stream("POST", target, content=raw, headers=headers) as response:
            if response.status_code != 200:
                raise refusal(response.status_code, await response.aread(), region or "its region")
            async for chunk in response.aiter_raw():
                for event in decoder.feed(chunk):
                    yield event
        decoder.close()
    except FrameError as exc:
        raise FunctionUrlError(f"the reply stream from {target} is broken: {exc}") from exc
    except httpx.HTTPError as exc:
        raise FunctionUrlError(f"cannot reach {target}: {exc}", code=ErrorCode.TTS_UNAVAILABLE) from exc


class SpeakProxy:
    """POST /speak → the function URL, signed here; the answer streams back as it comes.

    The body is read as `/speak` reads it (`asgi.read_body`: JSON only, 64 KiB, a deadline), so
    a page's content-type-less "simple" POST is refused before anything is signed. The
    credentials are signed from per request (`signed_headers`), so refreshable ones (SSO, a
    role) are renewed before they expire. When the browser leaves, the upstream request closes."""

    def __init__(
        self,
        url: str,
        credentials: Any,
        *,
        region: str | None = None,
        client: httpx.AsyncClient | None = None,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        self.target = speak_url(url)
        self.body_timeout_s = body_timeout_s
        self.region = resolve_region(url, region)
        self.credentials = credentials
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=120.0))

    async def handle(self, request: Request) -> Response | StreamingBody:
        try:
            raw = await read_body(request, MAX_BODY_BYTES, self.body_timeout_s)
        except ProtocolError as refused:
            return error_response(refused)
        headers = {"content-type": JSON_MEDIA_TYPE}
        for name in ("x-correlation-id", "x-request-id"):
            if name in request.headers:
                headers[name] = request.headers[name]
        signed = signed_headers(
            "POST", self.target, raw, region=self.region, credentials=self.credentials, headers=headers
        )
        try:
            upstream = await self.client.send(
                self.client.build_request("POST", self.target, content=raw, headers=signed), stream=True
            )
        except httpx.HTTPError as exc:
            logger.warning("cannot reach %s: %r", self.target, exc)
            unreachable = CodedError(f"cannot reach {self.target}", code=ErrorCode.TTS_UNAVAILABLE, status=502)
            return error_response(unreachable)
        forwarded = {name: upstream.headers[name] for name in _FORWARDED_RESPONSE_HEADERS if name in upstream.headers}
        media_type = forwarded.pop("content-type", "application/octet-stream")
        return StreamingBody(_relay(upstream), media_type, forwarded, status=upstream.status_code)

    async def aclose(self) -> None:
        await self.client.aclose()


async def _relay(upstream: httpx.Response) -> AsyncIterator[bytes]:
    """The upstream's bytes; closed (in `finally`) when the browser leaves, too."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    finally:
        with contextlib.suppress(httpx.HTTPError):
            await upstream.aclose()
