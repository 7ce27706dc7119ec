"""Text sources: where a reply's text comes from, delta by delta, as an LLM writes it.

Every source is an async iterator of text deltas behind one small interface, so `run_bidi`
and `run_batch` cannot tell a replayed reply from a live model:

- `ReplaySource` streams a given reply with LLM-like timing (a first-token delay, then a
  steady number of word-ish tokens per second). Offline, deterministic in content, and what
  the demo and the benchmarks measure with.
- `StrandsSource` asks a Strands agent on Amazon Bedrock (ConverseStream) and yields its text
  deltas as they arrive.

A source fails with `TextSourceError` (a stable code plus a message for the caller), never
with a library's own exception type. Closing the iterator early (the caller went away)
stops the source: the replay stops sleeping, the Strands agent is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from voicestream.env import BEDROCK_MAX_TOKENS
from voicestream.wire.errors import CodedError, ErrorCode

if TYPE_CHECKING:
    from strands.models.bedrock import BedrockModel

logger = logging.getLogger(__name__)

# A word with the whitespace before it, or a run of punctuation, or trailing whitespace: close
# enough to how BPE tokenizers cut English (about 1.3 tokens per word once punctuation counts).
_TOKEN: Final = re.compile(r"\s*[\w'’-]+|\s*[^\w\s]+|\s+$")

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are a friendly voice assistant. Your reply is spoken aloud: answer in a few short, "
    "complete sentences of plain prose, with no lists, markdown, emoji or code."
)


class TextSourceError(CodedError):
    """The source could not produce its text; `code` is stable, `message` is for people."""

    code = ErrorCode.MODEL_ERROR
    status = 502

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


class TextSource(Protocol):
    """A reply, streamed as text deltas."""

    @property
    def name(self) -> str:
        """What produces the text ("replay", "bedrock:<model id>"), for events and logs."""
        ...

    def stream(self) -> AsyncIterator[str]:
        """The reply's text deltas in order; joined they are the whole reply."""
        ...


def word_tokens(text: str) -> list[str]:
    """Word-ish tokens whose concatenation is exactly `text`."""
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != text:  # pragma: no cover - the pattern covers every character
        raise AssertionError("tokenizer lost characters")
    return tokens


@dataclass(frozen=True, slots=True)
class ReplayPace:
    """LLM-like timing: the first token after `first_token_s`, then `tokens_per_s` steadily."""

    first_token_s: float = 0.3
    tokens_per_s: float = 50.0

    def __post_init__(self) -> None:
        if not 0 <= self.first_token_s <= 60:
            raise ValueError(f"first_token_s must be between 0 and 60, got {self.first_token_s}")
        if not 0 < self.tokens_per_s <= 10_000:
            raise ValueError(f"tokens_per_s must be in (0, 10000], got {self.tokens_per_s}")

    def due(self, index: int) -> float:
        """Seconds after the start at which token `index` is emitted."""
        return self.first_token_s + index / self.tokens_per_s


class ReplaySource:
    """Streams a fixed reply at a given pace, as if a model were writing it now."""

    def __init__(self, text: str, pace: ReplayPace | None = None) -> None:
        if not text.strip():
            raise ValueError("a replayed reply must contain text")
        self.text = text
        self.pace = pace or ReplayPace()
        self.tokens = word_tokens(text)

    @property
    def name(self) -> str:
        return "replay"

    async def stream(self) -> AsyncGenerator[str]:
        # Deadlines are measured from one start time, so sleeps do not accumulate drift and a
        # slow consumer does not slow the "model" down (an LLM does not wait for us either).
        start = time.perf_counter()
        for index, token in enumerate(self.tokens):
            delay = start + self.pace.due(index) - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            yield token


@dataclass(frozen=True, slots=True)
class BedrockSettings:
    """How to reach the model. `endpoint_url` is for VPC endpoints (and the tests' fake)."""

    model_id: str
    region: str
    endpoint_url: str | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_tokens: int = BEDROCK_MAX_TOKENS.default
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0


class BedrockModelFactory:
    """Builds the Strands BedrockModel once per process: its boto3 client is costly to create
    (tens of ms) and safe to share; agents, which hold a conversation, are built per request."""

    def __init__(self, settings: BedrockSettings, boto_session: Any = None) -> None:
        self.settings = settings
        self._boto_session = boto_session
        self._model: BedrockModel | None = None
        self._lock = threading.Lock()

    def model(self) -> BedrockModel:
        with self._lock:
            if self._model is None:
                self._model = self._build()
            return self._model

    def _build(self) -> BedrockModel:
        from botocore.config import Config
        from strands.models.bedrock import BedrockModel

        settings = self.settings
        # Bounded timeouts and one retry: a voice reply that waits minutes for backoff is
        # worse than a clear error the caller can act on.
        client_config = Config(
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            retries={"total_max_attempts": 2, "mode": "standard"},
        )
        options: dict[str, Any] = {"boto_client_config": client_config, "endpoint_url": settings.endpoint_url}
        if self._boto_session is not None:
            options["boto_session"] = self._boto_session
        else:
            options["region_name"] = settings.region
        model = BedrockModel(model_id=settings.model_id, max_tokens=settings.max_tokens, streaming=True, **options)
        model.client.meta.events.register("after-call.bedrock-runtime.ConverseStream", _close_stream_on_error)
        return model


class _ClosingEventStream:
    """Bedrock's event stream that releases its HTTP connection when the stream raises.

    botocore leaves the connection open when an in-stream exception (modelStreamErrorException,
    throttling mid-reply) ends the iteration; the socket then lingers until garbage collection.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._stream
        except BaseException:
            self._stream.close()
            raise

    def close(self) -> None:
        self._stream.close()


def _close_stream_on_error(parsed: dict[str, Any], **_: Any) -> None:
    if "stream" in parsed:
        parsed["stream"] = _ClosingEventStream(parsed["stream"])


class StrandsSource:
    """A Strands agent on Bedrock answering `prompt`; yields its text deltas as they stream."""

    def __init__(self, prompt: str, factory: BedrockModelFactory) -> None:
        if not prompt.strip():
            raise ValueError("a prompt must contain text")
        self.prompt = prompt
        self.factory = factory

    @property
    def name(self) -> str:
        return f"bedrock:{self.factory.settings.model_id}"

    async def stream(self) -> AsyncGenerator[str]:
        from strands import Agent
        from strands.event_loop._retry import ModelRetryStrategy

        stop = threading.Event()
        agent = Agent(
            model=_request_model(self.factory.model(), stop),
            system_prompt=self.factory.settings.system_prompt,
            tools=[],
            callback_handler=None,
            # Strands' default backs off 4 s, 8 s, ... on throttling; one quick retry at most.
            retry_strategy=ModelRetryStrategy(max_attempts=2, initial_delay=1, max_delay=1),
        )
        # Typed as an AsyncIterator but is an async generator: we need its aclose().
        events = cast(AsyncGenerator[Any, None], agent.stream_async(self.prompt))
        try:
            async for event in events:
                data = event.get("data") if isinstance(event, dict) else None
                if isinstance(data, str) and data:
                    yield data
        except Exception as exc:
            raise TextSourceError("model_error", _describe_model_error(exc)) from exc
        finally:
            # On an early exit (the caller went away) the thread reading Bedrock's stream
            # must see the stop BEFORE the agent's generator is closed; closing it here, in
            # this task, also keeps OpenTelemetry's context handling in the right context.
            stop.set()
            await events.aclose()


def _request_model(shared: BedrockModel, stop: threading.Event) -> Any:
    """A per-request view of the shared model whose Bedrock stream obeys `stop`.

    Strands hands the model its agent's internal cancel event, which it clears the moment the
    invocation's generator is closed; the worker thread that reads Bedrock's HTTP stream would
    then never see the cancellation and read the whole reply. `stop` is ours and stays set.
    """
    from strands.models.model import Model

    class RequestModel(Model):
        config = shared.config

        def update_config(self, **model_config: Any) -> None:
            shared.update_config(**model_config)

        def get_config(self) -> Any:
            return shared.get_config()

        def structured_output(
            self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any
        ) -> Any:
            return shared.structured_output(output_model, prompt, system_prompt=system_prompt, **kwargs)

        def stream(self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any) -> Any:
            kwargs["cancel_signal"] = stop
            return shared.stream(messages, tool_specs, system_prompt, **kwargs)

    return RequestModel()


def _describe_model_error(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code, message = error.get("Code"), error.get("Message")
        if code or message:
            return f"Bedrock: {code or 'error'}: {message or 'no message'}"
    cause = exc.__cause__
    if cause is not None and cause is not exc and getattr(cause, "response", None) is not None:
        return _describe_model_error(cause)
    return f"Bedrock: {type(exc).__name__}: {exc}"
