"""The benchmark state machine's experiments and the report they add up to.

Two experiments per trial (the state machine's Map runs trials one at a time):

- isolated (the anchor's test, through the SageMaker endpoint): the same paragraph sent whole
  as one request vs sentence by sentence, pipelined on one session. Each on a fresh session;
  the clock starts when the text is sent (connecting is reported apart), so the two differ only
  in how the text is cut.
- agent (through the speak function's URL, SigV4-signed as its AWS_IAM auth requires): one
  reply in `bidi` mode (sentences streamed as the text arrives) vs `batch` mode (the whole
  reply, then speech), measured from the request to the first audio byte and to the end.

`aggregate` turns the trials into mean/p50/p95/min/max per measure and the ratios that answer
"how much sooner does audio start", which the state machine writes to the results bucket.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from voicestream.aws.sigv4 import SigningError, caller_credentials, signed_headers
from voicestream.chunker import split_sentences
from voicestream.speech import (
    SPEECH_MODELS,
    UPSTREAM_OF,
    RequestCompleted,
    SessionError,
    SpeechModel,
    SpeechSession,
    UpstreamSettings,
    open_session,
)
from voicestream.stats import Summary, ratio, summarize
from voicestream.texts import paragraph
from voicestream.wire.errors import CodedError, ErrorMessage
from voicestream.wire.framing import FrameError
from voicestream.wire.speak import Done, ReplyError, SentenceAudio, SpeakStreamDecoder

Mode = Literal["bidi", "batch"]


class BenchmarkError(CodedError):
    """A trial could not be measured; the message says which and why."""

    code = "benchmark_failed"


@dataclass(frozen=True)
class BenchmarkSettings:
    endpoint_name: str
    region: str
    speak_url: str
    text: str
    prompt: str
    silence_timeout_s: float = 60.0
    speech_model: SpeechModel = "kokoro"

    @classmethod
    def from_event(cls, event: Mapping[str, Any], default_region: str) -> BenchmarkSettings:
        model = event.get("speech_model") or "kokoro"
        if model not in SPEECH_MODELS:
            raise BenchmarkError(f"'speech_model' must be one of {', '.join(SPEECH_MODELS)}, got {model!r}")
        return cls(
            endpoint_name=str(event.get("endpoint_name") or ""),
            region=str(event.get("region") or default_region),
            speak_url=str(event.get("speak_url") or ""),
            text=str(event.get("text") or paragraph()),
            prompt=str(event.get("prompt") or ""),
            silence_timeout_s=float(event.get("silence_timeout_s", 60.0)),
            speech_model=model,
        )


class Benchmarker:
    """Runs the experiments. `http_client_factory` makes each SageMaker HTTP/2 session's HTTP
    client (default: awscrt); `credentials` signs the speak requests (default: the Lambda's)."""

    def __init__(self, *, http_client_factory: Callable[[], Any] | None = None, credentials: Any = None) -> None:
        self.http_client_factory = http_client_factory
        self.credentials = credentials

    # -- isolated: whole paragraph vs sentence by sentence ----------------------------------------

    def isolated_trial(self, settings: BenchmarkSettings, trial: int) -> dict[str, Any]:
        if not settings.endpoint_name:
            raise BenchmarkError("the isolated experiment needs 'endpoint_name'")
        sentences = split_sentences(settings.text)
        if len(sentences) < 2:
            raise BenchmarkError(f"the text must hold at least two sentences to compare, got {sentences!r}")
        return asyncio.run(self._isolated(settings, sentences, trial))

    async def _isolated(self, settings: BenchmarkSettings, sentences: list[str], trial: int) -> dict[str, Any]:
        runs = {"whole": [settings.text], "sentences": sentences}
        # Alternate the order between trials so neither variant always runs on a warmer server.
        order = ["whole", "sentences"] if trial % 2 else ["sentences", "whole"]
        result: dict[str, Any] = {"trial": trial, "order": order}
        for name in order:
            result[name] = await self._speak_on_session(settings, runs[name])
        return result

    def _session(self, settings: BenchmarkSettings) -> SpeechSession:
        """A session in the endpoint's protocol: Kokoro's bidi route or vLLM-Omni's speech stream."""
        return open_session(
            UpstreamSettings(
                UPSTREAM_OF[settings.speech_model],
                endpoint=settings.endpoint_name,
                region=settings.region,
                silence_timeout=settings.silence_timeout_s,
                http_client_factory=self.http_client_factory,
            )
        )

    async def _speak_on_session(self, settings: BenchmarkSettings, pieces: Sequence[str]) -> dict[str, Any]:
        session = self._session(settings)
        try:
            async with session:
                ids = [await session.send(piece) for piece in pieces]
                done = 0
                async for event in session.events():
                    if isinstance(event, ErrorMessage):
                        raise BenchmarkError(f"the endpoint refused a request: {event.code}: {event.message}")
                    if isinstance(event, RequestCompleted):
                        done += 1
                        if done == len(ids):
                            break
        except SessionError as exc:
            raise BenchmarkError(f"isolated experiment on {session.description}: {exc}") from exc
        timings = [session.timings[rid] for rid in ids]
        first, last = timings[0], timings[-1]
        if first.first_audio_at is None or last.completed_at is None:
            raise BenchmarkError("a request completed without audio")
        return {
            "pieces": len(pieces),
            "connect_s": session.connect_s,
            "first_audio_s": first.first_audio_at - first.sent_at,
            "total_s": last.completed_at - first.sent_at,
            "audio_ms": sum(t.server_audio_ms or 0.0 for t in timings),
        }

    # -- agent: the speak function in bidi vs batch mode ------------------------------------------

    def agent_trial(self, settings: BenchmarkSettings, trial: int) -> dict[str, Any]:
        if not settings.speak_url:
            raise BenchmarkError("the agent experiment needs 'speak_url'")
        order: list[Mode] = ["bidi", "batch"] if trial % 2 else ["batch", "bidi"]
        result: dict[str, Any] = {"trial": trial, "order": order}
        for mode in order:
            result[mode] = asyncio.run(self._speak_call(settings, mode))
        return result

    async def _speak_call(self, settings: BenchmarkSettings, mode: Mode) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": mode, "transport": "binary", "format": "pcm"}
        if settings.prompt:
            body["prompt"] = settings.prompt
        else:
            body["text"] = settings.text
        raw = json.dumps(body).encode()
        url = settings.speak_url.rstrip("/") + "/speak"
        headers = self._signed_headers(url, raw, settings.region)
        decoder = SpeakStreamDecoder("binary")
        first_audio_s: float | None = None
        done: Done | None = None
        started = time.perf_counter()
        try:
            async with (
                httpx.AsyncClient(timeout=httpx.Timeout(settings.silence_timeout_s)) as client,
                client.stream("POST", url, content=raw, headers=headers) as response,
            ):
                if response.status_code != 200:
                    text = (await response.aread())[:300].decode("utf-8", "replace")
                    raise BenchmarkError(f"speak function ({mode}) answered HTTP {response.status_code}: {text}")
                async for chunk in response.aiter_raw():
                    for event in decoder.feed(chunk):
                        if isinstance(event, SentenceAudio) and first_audio_s is None:
                            first_audio_s = time.perf_counter() - started
                        elif isinstance(event, ReplyError):
                            raise BenchmarkError(f"speak function ({mode}) failed: {event.code}: {event.message}")
                        elif isinstance(event, Done):
                            done = event
            decoder.close()
        except (httpx.HTTPError, FrameError) as exc:
            raise BenchmarkError(f"speak function ({mode}) at {url}: {exc}") from exc
        total_s = time.perf_counter() - started
        if done is None or done.status != "complete" or first_audio_s is None:
            raise BenchmarkError(f"speak function ({mode}) ended without a complete reply: {done}")
        return {
            "first_audio_s": first_audio_s,
            "total_s": total_s,
            "server_first_audio_ms": done.timings.first_audio_ms,
            "server_first_text_ms": done.timings.first_text_ms,
            "sentences": done.sentences,
            "audio_ms": done.audio_ms,
        }

    def _signed_headers(self, url: str, body: bytes, region: str) -> dict[str, str]:
        """SigV4 for a Lambda function URL with AuthType AWS_IAM (service name "lambda")."""
        try:
            credentials = self.credentials or caller_credentials()
        except SigningError as exc:
            raise BenchmarkError(f"cannot sign the speak request: {exc}") from exc
        content_type = {"content-type": "application/json"}
        return signed_headers("POST", url, body, region=region, credentials=credentials, headers=content_type)


# -- the report ------------------------------------------------------------------------------------

MEASURES = {
    "isolated": {"whole": ("first_audio_s", "total_s"), "sentences": ("first_audio_s", "total_s")},
    "agent": {"bidi": ("first_audio_s", "total_s"), "batch": ("first_audio_s", "total_s")},
}


def _column(trials: Sequence[Mapping[str, Any]], experiment: str, variant: str, measure: str) -> list[float]:
    try:
        return [float(t[experiment][variant][measure]) for t in trials]
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchmarkError(f"trial results lack {experiment}.{variant}.{measure}: {exc!r}") from exc


def aggregate(trials: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The report: per-measure statistics, ratios (how many times sooner/faster), raw trials."""
    if not trials:
        raise BenchmarkError("no trials to aggregate")
    stats: dict[str, dict[str, dict[str, Summary]]] = {}
    for experiment, variants in MEASURES.items():
        stats[experiment] = {
            variant: {m: summarize(_column(trials, experiment, variant, m)) for m in measures}
            for variant, measures in variants.items()
        }
    iso, agent = stats["isolated"], stats["agent"]
    ratios = {
        "isolated_first_audio_whole_over_sentences": _ratios(
            iso["whole"]["first_audio_s"], iso["sentences"]["first_audio_s"]
        ),
        "isolated_total_whole_over_sentences": _ratios(iso["whole"]["total_s"], iso["sentences"]["total_s"]),
        "agent_first_audio_batch_over_bidi": _ratios(agent["batch"]["first_audio_s"], agent["bidi"]["first_audio_s"]),
        "agent_total_batch_over_bidi": _ratios(agent["batch"]["total_s"], agent["bidi"]["total_s"]),
    }
    return {
        "generated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "settings": {k: settings.get(k) for k in ("endpoint_name", "speak_url", "trials", "text", "prompt")},
        "trials": len(trials),
        "statistics": stats,
        "ratios": ratios,
        "raw": list(trials),
    }


def _ratios(numerator: Summary, denominator: Summary) -> dict[str, float | None]:
    return {"mean": ratio(numerator["mean"], denominator["mean"]), "p50": ratio(numerator["p50"], denominator["p50"])}


# -- the Lambda task's entry -----------------------------------------------------------------------


def run_step(event: Mapping[str, Any], benchmarker: Benchmarker, default_region: str) -> dict[str, Any]:
    """One benchmark step, chosen by `event["experiment"]`: isolated | agent | aggregate."""
    experiment = event.get("experiment")
    if experiment == "aggregate":
        return aggregate(event.get("trials") or [], event.get("settings") or {})
    settings = BenchmarkSettings.from_event(event, default_region)
    trial = int(event.get("trial", 1))
    if experiment == "isolated":
        return benchmarker.isolated_trial(settings, trial)
    if experiment == "agent":
        return benchmarker.agent_trial(settings, trial)
    raise BenchmarkError(f"unknown experiment {experiment!r}; expected isolated, agent or aggregate")
