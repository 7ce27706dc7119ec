"""Deploy-validate's task: prove an InService endpoint actually speaks, the way clients call it.

An endpoint can report InService while every real request fails: the anchor's container read
only text frames, and SageMaker delivers payloads sent with data_type BINARY (its default) as
binary frames. So the checks go through SageMaker itself with BINARY payloads:

1. `bidi_connect`: one InvokeEndpointWithBidirectionalStream session opens.
2. `bidi_three_sentences`: three sentences, pipelined on that session; each must get audio of a
   plausible length for its text and a `synthesis_complete` that agrees with the audio received.
3. `bidi_device`: the server's `pong` names the device it synthesizes on, and it is the
   expected one (`expected_device`: cuda on GPU instances). A GPU endpoint whose container
   cannot use the GPU would otherwise pass every check while speaking slowly on the CPU.
4. `bidi_malformed_message`: a non-JSON payload gets a structured `error` frame, and the same
   session still answers afterwards (a `ping` → `pong`).
5. `invocations_stream`: POST /invocations through InvokeEndpointWithResponseStream streams audio
   of a plausible length.

A Qwen3-TTS endpoint (`speech_model: qwen3-tts`) speaks vLLM-Omni's protocol instead; its
checks are in `validate_vllm_omni`; what both share (settings, a check's result) in `checks`.

The report says, per check, whether it passed, what it saw and how long it took; `cause` is one
readable paragraph of what broke, which the state machine uses as its failure cause.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from voicestream.aws.clients import client as aws_client
from voicestream.speech import (
    Audio,
    BidiSession,
    Pong,
    RequestCompleted,
    SessionError,
    SessionTimeoutError,
    UpstreamSettings,
    open_session,
)
from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.errors import ErrorCode, ErrorMessage

from .checks import Check, ValidationSettings, not_run, plausible_audio
from .validate_vllm_omni import vllm_omni_checks

MALFORMED_PAYLOAD = b"{this is not json"
# 16-bit mono PCM at the server's sample rate.
PCM_BYTES_PER_MS = SAMPLE_RATE * 2 / 1000
# The two causes that look exactly alike from outside: a session that opens and then hears nothing.
AMI_HINT = (
    "a GPU variant on an inference AMI without SageMaker's bidirectional-streaming sidecar: the "
    "WebSocket never reaches the container and every session hangs; its InferenceAmiVersion must be "
    "al2023-ami-sagemaker-inference-gpu-4-1 or newer (docs/deploy.md)"
)
BINARY_HINT = (
    "the server accepted the session but never answered a payload sent as data_type BINARY "
    "(SageMaker's default). Two causes look exactly like this: (1) "
    + AMI_HINT
    + "; (2) a container that reads only text WebSocket frames: it must decode binary frames as UTF-8 JSON"
)


@dataclass
class ValidationReport:
    endpoint_name: str
    region: str
    passed: bool
    summary: str
    cause: str
    checks: list[Check]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EndpointValidator:
    """Runs the checks. `http_client_factory` makes the HTTP client of each SageMaker HTTP/2
    session (default: awscrt) and `runtime_client` replaces the boto3 sagemaker-runtime client;
    the tests point both at fakes of the service that forward to a real local server."""

    def __init__(self, *, http_client_factory: Callable[[], Any] | None = None, runtime_client: Any = None) -> None:
        self.http_client_factory = http_client_factory
        self.runtime_client = runtime_client

    def run(self, settings: ValidationSettings) -> ValidationReport:
        if settings.speech_model == "qwen3-tts":
            checks = asyncio.run(vllm_omni_checks(settings, self.http_client_factory))
        else:
            checks = asyncio.run(self._bidi_checks(settings))
            checks.append(self._invocations_stream(settings))
        failed = [c for c in checks if not c.passed]
        summary = f"{len(checks) - len(failed)} of {len(checks)} checks passed"
        cause = ""
        if failed:
            reasons = "; ".join(f"{c.name}: {c.detail}" for c in failed)
            cause = f"endpoint {settings.endpoint_name!r} is InService but failed validation ({summary}): {reasons}"
        return ValidationReport(
            endpoint_name=settings.endpoint_name,
            region=settings.region,
            passed=not failed,
            summary=summary,
            cause=cause,
            checks=checks,
        )

    # -- the bidirectional session -------------------------------------------------------------

    async def _bidi_checks(self, settings: ValidationSettings) -> list[Check]:
        session = open_session(
            UpstreamSettings(
                endpoint=settings.endpoint_name,
                region=settings.region,
                connect_timeout=settings.connect_timeout_s,
                silence_timeout=settings.silence_timeout_s,
                http_client_factory=self.http_client_factory,
            )
        )
        assert isinstance(session, BidiSession)  # the malformed-message check writes to its transport
        started = time.perf_counter()
        try:
            await session.connect()
        except SessionError as exc:
            detail = str(exc) + (f" (possibly {AMI_HINT})" if isinstance(exc, SessionTimeoutError) else "")
            failed = Check("bidi_connect", False, detail, time.perf_counter() - started)
            never = ("bidi_three_sentences", "bidi_device", "bidi_malformed_message")
            return [failed, *not_run(never, "the session did not open")]
        checks = [Check("bidi_connect", True, "session open", time.perf_counter() - started)]
        try:
            checks.append(await self._three_sentences(session, settings.sentences))
            if not checks[-1].passed:
                skipped = ("bidi_device", "bidi_malformed_message")
                checks.extend(not_run(skipped, "the sentences check failed first"))
                return checks
            # A wrong device fails the report, but the session still answers: go on.
            checks.append(await self._device(session, settings.expected_device))
            if checks[-1].data:
                checks.append(await self._malformed_message(session))
            else:
                checks.extend(not_run(("bidi_malformed_message",), "the session stopped answering"))
        finally:
            await session.close()
        return checks

    async def _device(self, session: BidiSession, expected: str | None) -> Check:
        """Where the server synthesizes, from its pong; a mismatch fails (all other checks still run)."""
        started = time.perf_counter()
        await session.ping()
        pong: Pong | None = None
        try:
            async for event in session.events():
                if isinstance(event, Pong):
                    pong = event
                    break
        except SessionError as exc:
            return Check("bidi_device", False, f"no pong: {exc}", time.perf_counter() - started)
        seconds = time.perf_counter() - started
        if pong is None:
            return Check("bidi_device", False, "the session ended before a pong", seconds)
        data = {"engine": pong.engine, "device": pong.device, "expected_device": expected}
        if pong.device is None:
            detail = "the server does not report its device (an image older than this check?)"
            return Check("bidi_device", expected is None, detail, seconds, data)
        where = f"{pong.engine} on {pong.device}"
        # "cuda:1" is CUDA too; only the kind of device is the contract.
        if expected is not None and pong.device.split(":", 1)[0] != expected:
            detail = (
                f"the server synthesizes with {where}, expected {expected}: on a GPU instance this means "
                "the container cannot use the GPU (NVIDIA driver / InferenceAmiVersion, docs/deploy.md)"
            )
            return Check("bidi_device", False, detail, seconds, data)
        return Check("bidi_device", True, where, seconds, data)

    async def _three_sentences(self, session: BidiSession, sentences: Sequence[str]) -> Check:
        started = time.perf_counter()
        ids = [await session.send(text) for text in sentences]
        received = {rid: 0 for rid in ids}
        completes: dict[str, RequestCompleted] = {}
        frames = 0
        try:
            async for event in session.events():
                frames += 1
                if isinstance(event, Audio) and event.request_id in received:
                    received[event.request_id] += len(event.data)
                elif isinstance(event, RequestCompleted):
                    completes[event.request_id] = event
                elif isinstance(event, ErrorMessage):
                    detail = f"the server answered error {event.code}: {event.message}"
                    return Check("bidi_three_sentences", False, detail, time.perf_counter() - started)
                if len(completes) == len(ids):
                    break
        except SessionError as exc:
            detail = f"after sending {len(ids)} sentences as BINARY payloads: {exc}"
            if isinstance(exc, SessionTimeoutError) and frames == 0:
                detail += f" ({BINARY_HINT})"
            return Check("bidi_three_sentences", False, detail, time.perf_counter() - started)
        problems: list[str] = []
        per_sentence: list[dict[str, Any]] = []
        for rid, text in zip(ids, sentences, strict=True):
            complete = completes[rid]
            timing = complete.timings
            per_sentence.append(
                {
                    "text": text,
                    "audio_bytes": received[rid],
                    "audio_ms": complete.audio_ms,
                    "first_audio_s": timing.first_audio_s,
                    "total_s": timing.total_s,
                }
            )
            if received[rid] != complete.audio_bytes:
                problems.append(
                    f"{rid}: received {received[rid]} audio bytes, synthesis_complete says {complete.audio_bytes}"
                )
            if abs(received[rid] / PCM_BYTES_PER_MS - complete.audio_ms) > max(50.0, 0.05 * complete.audio_ms):
                problems.append(f"{rid}: {received[rid]} PCM bytes do not last the reported {complete.audio_ms} ms")
            wrong = plausible_audio(text, complete.audio_ms)
            if wrong:
                problems.append(f"{rid}: {wrong}")
        detail = "; ".join(problems) or f"{len(ids)} sentences spoken in one session"
        return Check(
            "bidi_three_sentences", not problems, detail, time.perf_counter() - started, {"sentences": per_sentence}
        )

    async def _malformed_message(self, session: BidiSession) -> Check:
        started = time.perf_counter()
        # Straight to the transport: the session itself only ever sends well-formed messages.
        await session.transport.send(MALFORMED_PAYLOAD)
        await session.ping()
        error: ErrorMessage | None = None
        try:
            async for event in session.events():
                if isinstance(event, ErrorMessage):
                    error = event
                elif isinstance(event, Pong):
                    break
        except SessionError as exc:
            detail = f"after a malformed payload the session broke: {exc}"
            return Check("bidi_malformed_message", False, detail, time.perf_counter() - started)
        seconds = time.perf_counter() - started
        if error is None:
            return Check("bidi_malformed_message", False, "no error frame for a malformed payload", seconds)
        data = {"code": error.code, "message": error.message}
        if error.code != ErrorCode.INVALID_JSON:
            detail = f"expected error code {ErrorCode.INVALID_JSON.value!r}, got {error.code!r}"
            return Check("bidi_malformed_message", False, detail, seconds, data)
        return Check("bidi_malformed_message", True, "structured error, and the session still answers", seconds, data)

    # -- POST /invocations -----------------------------------------------------------------------

    def _invocations_stream(self, settings: ValidationSettings) -> Check:
        started = time.perf_counter()
        runtime = self.runtime_client or aws_client("sagemaker-runtime", settings.region)
        body = json.dumps({"text": settings.invocation_text, "format": "pcm"})
        parts = 0
        audio = 0
        first_part_s: float | None = None
        try:
            answer = runtime.invoke_endpoint_with_response_stream(
                EndpointName=settings.endpoint_name, Body=body, ContentType="application/json"
            )
            for event in answer["Body"]:
                chunk = event.get("PayloadPart", {}).get("Bytes", b"")
                if chunk:
                    parts += 1
                    audio += len(chunk)
                    if first_part_s is None:
                        first_part_s = time.perf_counter() - started
        except (ClientError, BotoCoreError) as exc:
            return Check("invocations_stream", False, f"InvokeEndpointWithResponseStream failed: {exc}", 0.0)
        seconds = time.perf_counter() - started
        audio_ms = audio / PCM_BYTES_PER_MS
        data = {"parts": parts, "audio_bytes": audio, "audio_ms": audio_ms, "first_part_s": first_part_s}
        if parts == 0:
            return Check("invocations_stream", False, "the response stream carried no audio", seconds, data)
        wrong = plausible_audio(settings.invocation_text, audio_ms)
        if wrong:
            return Check("invocations_stream", False, wrong, seconds, data)
        return Check("invocations_stream", True, f"{parts} parts, {audio_ms:.0f} ms of audio", seconds, data)
