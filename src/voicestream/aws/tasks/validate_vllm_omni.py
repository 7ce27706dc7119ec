"""Deploy-validate's checks for a Qwen3-TTS endpoint (vLLM-Omni's DLC), the way clients call it.

Through SageMaker with `model_invocation_path="v1/audio/speech/stream"` and every payload part
UTF8 (a BINARY part would reach the container as a binary frame, which ends vLLM-Omni's
session), in one `VllmOmniSession`:

1. `vllm_omni_connect`: the stream opens and `session.config` goes out.
2. `vllm_omni_sentences`: three sentences, pipelined, one utterance each: every one must come
   back with its `audio.start`/`audio.done` pairs closed before its `session.done` (the session
   fails on any pairing violation), more than 2,000 bytes of PCM (the seed sample's bar), and a
   plausible length for its text.
3. `vllm_omni_cancel`: barge-in as voicestream does it (close the stream, open a new one): a
   sentence cancelled after its first audio, then another that is spoken in full.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from voicestream.speech import (
    Audio,
    Cancelled,
    ErrorMessage,
    RequestCompleted,
    SessionError,
    UpstreamSettings,
    VllmOmniSession,
    open_session,
)
from voicestream.wire.vllm_omni import SessionConfig

from .checks import Check, ValidationSettings, not_run, plausible_audio

MIN_AUDIO_BYTES = 2000
# The DLC's docs warn that first requests may exceed 60 s while torch.compile warms up.
FIRST_REQUEST_S = 180.0
VOICE_CONFIG = SessionConfig(voice="vivian", language="English")
CANCELLED_TEXT = (
    "This sentence is interrupted after its first audio, as a listener who starts talking would interrupt it."
)
AFTER_CANCEL_TEXT = "And this one is spoken in full after the interruption."


async def vllm_omni_checks(settings: ValidationSettings, http_client_factory: Callable[[], Any] | None) -> list[Check]:
    session = open_session(
        UpstreamSettings(
            "vllm-omni",
            endpoint=settings.endpoint_name,
            region=settings.region,
            vllm_omni=VOICE_CONFIG,
            connect_timeout=settings.connect_timeout_s,
            silence_timeout=max(settings.silence_timeout_s, FIRST_REQUEST_S),
            http_client_factory=http_client_factory,
        )
    )
    assert isinstance(session, VllmOmniSession)  # the checks read its connections and pairs
    started = time.perf_counter()
    try:
        await session.connect()
    except SessionError as exc:
        failed = Check("vllm_omni_connect", False, str(exc), time.perf_counter() - started)
        return [failed, *not_run(("vllm_omni_sentences", "vllm_omni_cancel"), "the session did not open")]
    checks = [Check("vllm_omni_connect", True, "session open, session.config sent", time.perf_counter() - started)]
    try:
        checks.append(await _sentences(session, settings.sentences))
        if checks[-1].passed:
            checks.append(await _cancel_and_go_on(session))
        else:
            checks.extend(not_run(("vllm_omni_cancel",), "the sentences check failed first"))
    finally:
        await session.close()
    return checks


async def _sentences(session: VllmOmniSession, sentences: Sequence[str]) -> Check:
    started = time.perf_counter()
    ids = [await session.send(text) for text in sentences]
    completes: dict[str, RequestCompleted] = {}
    try:
        async for event in session.events():
            if isinstance(event, ErrorMessage):
                detail = f"the server answered error {event.code}: {event.message}"
                return Check("vllm_omni_sentences", False, detail, time.perf_counter() - started)
            if isinstance(event, RequestCompleted):
                completes[event.request_id] = event
                if len(completes) == len(ids):
                    break
    except SessionError as exc:  # a pairing violation, a silent server, a broken stream
        detail = f"after sending {len(ids)} sentences as UTF8 payloads: {exc}"
        return Check("vllm_omni_sentences", False, detail, time.perf_counter() - started)
    problems: list[str] = []
    per_sentence: list[dict[str, Any]] = []
    for rid, text in zip(ids, sentences, strict=True):
        complete = completes[rid]
        pairs = session.pairs.get(rid, 0)
        per_sentence.append(
            {
                "text": text,
                "audio_bytes": complete.audio_bytes,
                "audio_ms": complete.audio_ms,
                "pairs": pairs,
                "first_audio_s": complete.timings.first_audio_s,
                "total_s": complete.timings.total_s,
            }
        )
        if pairs < 1:
            problems.append(f"{rid}: session.done without any audio.start/audio.done pair")
        if complete.audio_bytes <= MIN_AUDIO_BYTES:
            problems.append(f"{rid}: {complete.audio_bytes} bytes of audio (needs more than {MIN_AUDIO_BYTES})")
        wrong = plausible_audio(text, complete.audio_ms)
        if wrong:
            problems.append(f"{rid}: {wrong}")
    detail = "; ".join(problems) or f"{len(ids)} sentences spoken, start/done paired, in one session"
    data = {"sentences": per_sentence}
    return Check("vllm_omni_sentences", not problems, detail, time.perf_counter() - started, data)


async def _cancel_and_go_on(session: VllmOmniSession) -> Check:
    started = time.perf_counter()
    cancelled = await session.send(CANCELLED_TEXT)
    after: str | None = None
    heard = 0
    try:
        async for event in session.events():
            if isinstance(event, Audio) and event.request_id == cancelled and after is None:
                await session.cancel()
                after = await session.send(AFTER_CANCEL_TEXT)
            elif isinstance(event, Audio) and event.request_id == after:
                heard += len(event.data)
            elif isinstance(event, ErrorMessage) and event.request_id in (cancelled, after):
                detail = f"the server answered error {event.code}: {event.message}"
                return Check("vllm_omni_cancel", False, detail, time.perf_counter() - started)
            elif isinstance(event, RequestCompleted) and event.request_id in (cancelled, after):
                break
            elif isinstance(event, Cancelled):
                continue
    except SessionError as exc:
        return Check("vllm_omni_cancel", False, f"barge-in broke the session: {exc}", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    outcome = session.timings[cancelled].outcome
    data = {"cancelled_outcome": outcome, "after_audio_bytes": heard, "connections": session.connections}
    if outcome != "cancelled" or after is None or session.timings[after].outcome != "complete":
        detail = f"the first sentence ended {outcome!r}, the next one {after and session.timings[after].outcome!r}"
        return Check("vllm_omni_cancel", False, detail, seconds, data)
    if heard <= MIN_AUDIO_BYTES:
        return Check("vllm_omni_cancel", False, f"{heard} bytes of audio after the barge-in", seconds, data)
    detail = f"cancelled after its first audio; the next sentence spoken on connection {session.connections}"
    return Check("vllm_omni_cancel", True, detail, seconds, data)
