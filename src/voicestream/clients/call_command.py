"""`voicestream call URL`: the deployed speak function, SigV4-signed with the caller's AWS
credentials; the reply's audio played or written as it streams, then its timings.

Every failure is one line: a refusal by AWS (403 without permission to invoke, 429 throttled),
a refusal by the function (its 4xx error body), or an `error` event in the reply (the speech
endpoint unavailable: `tts_unavailable`, ...).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TextIO

import httpx

from voicestream.aws.function_url import call_speak
from voicestream.clients.audio_out import AudioSink
from voicestream.clients.speak_command import summary
from voicestream.wire.speak import Done, ReplyError, SentenceAudio

# What each error code of the reply means for the person at the terminal.
_REPLY_ERRORS = {
    "tts_unavailable": "the speech endpoint is unavailable",
    "tts_error": "the speech session failed mid-reply",
    "model_error": "the language model failed",
    "timeout": "the reply took too long",
}


async def call(
    url: str,
    request: Mapping[str, Any],
    *,
    credentials: Any,
    region: str | None,
    sink: AudioSink,
    report: TextIO,
    timeout_s: float = 120.0,
) -> int:
    """0 when the reply was spoken completely; 1 when it failed (one line says why)."""
    started = time.perf_counter()
    first_audio_ms: float | None = None
    status = 1
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s)) as client:
        async for event in call_speak(client, url, request, credentials=credentials, region=region):
            if isinstance(event, SentenceAudio):
                sink.write(event.data)
                if first_audio_ms is None:
                    first_audio_ms = (time.perf_counter() - started) * 1000
                    print(f"first audio at the caller: {first_audio_ms:.0f} ms", file=report, flush=True)
            elif isinstance(event, ReplyError):
                meaning = _REPLY_ERRORS.get(event.code, "the reply failed")
                print(f"voicestream call: {meaning} [{event.code}]: {event.message}", file=report, flush=True)
            elif isinstance(event, Done):
                status = 0 if event.status == "complete" else 1
                print(f"{summary(event)} (function's clock)", file=report, flush=True)
    return status
