"""A faithful fake of vLLM-Omni's streaming speech route, `WS /v1/audio/speech/stream`.

Written from the documented protocol (docs/vllm-omni.md: upstream main, i.e. input.done is a
flush and split_granularity is none | sentence | clause), not from voicestream's client code,
so client and fake cannot share a misreading. It is a real Starlette app, served by uvicorn on
127.0.0.1 (`serve_fake`), and behaves as upstream does:

- text frames only: a binary frame is answered `Internal error: 'text'` and ends the session;
- `session.config` first (else `Expected session.config, got: …` and the end), within
  `config_timeout_s` (10 s upstream); then `idle_timeout_s` (30 s) between messages;
- messages are handled one at a time, synthesis included (the idle clock stops meanwhile);
- a message other than `session.config` over 131,072 characters is reported and dropped;
- per request: `audio.start`, binary frames, `audio.done`; per flush: `session.done`; a failure
  mid-request sends `error` with `partial_audio`/`action` and `audio.done {"error": true}`;
- no cancel: closing the socket aborts the request in progress (recorded as `aborted`).

Audio comes from a `Synthesizer`: `tone_synthesizer()` (default; deterministic, a tone burst
per word, duration proportional to the text) or `kokoro_synthesizer(engine)` (real speech, so a
test can run ASR on what comes back). `close_after_done=True` imitates servers before upstream
PR #5517, which end the connection after `session.done`.

Deliberate gaps: non-streamed audio is encoded only as wav or pcm (flac/mp3/opus fail the
request with a clear error); word timestamps are never aligned (the server behaves as one
launched without `--forced-aligner`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import struct
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.support.server import LiveServer, start_server
from voicestream.engine.base import SpeechEngine

ROUTE = "/v1/audio/speech/stream"
SERVED_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
SAMPLE_RATE = 24_000
MAX_TEXT_MESSAGE_CHARS = 128 * 1024
MAX_CONFIG_MESSAGE_CHARS = 4 * 1024 * 1024
FORMATS = ("wav", "pcm", "flac", "mp3", "opus")
GRANULARITIES = ("none", "sentence", "clause")
TASK_TYPES = ("CustomVoice", "VoiceDesign", "Base")
FAIL_TRIGGER = "FAIL_MIDWAY"  # a request whose text contains it fails after its first chunk


# --- synthesis -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeechSettings:
    """What a synthesizer gets besides the text: the session's (validated) config."""

    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    task_type: str | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    speed: float = 1.0


Synthesizer = Callable[[str, SpeechSettings], Iterable[bytes]]
"""Yields mono s16le PCM at SAMPLE_RATE, chunk by chunk (each chunk is one binary frame when
streaming). Called in a worker thread, so it may block."""


def float_to_pcm16(samples: np.ndarray) -> bytes:
    clipped = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


def tone_synthesizer(ms_per_char: float = 55.0, chunk_ms: int = 240) -> Synthesizer:
    """Deterministic speech-shaped audio: each word a harmonic tone burst (pitch from the word,
    length from its characters) with a short gap, so the duration is proportional to the text."""
    if ms_per_char <= 0 or chunk_ms <= 0:
        raise ValueError("ms_per_char and chunk_ms must be positive")

    def synthesize(text: str, settings: SpeechSettings) -> Iterator[bytes]:
        pieces: list[np.ndarray] = []
        gap = np.zeros(int(SAMPLE_RATE * 0.06), dtype=np.float32)
        for word in text.split():
            seconds = len(word) * ms_per_char / 1000.0 / settings.speed
            t = np.arange(int(SAMPLE_RATE * seconds), dtype=np.float32) / SAMPLE_RATE
            pitch = 110.0 + zlib.crc32(word.encode("utf-8")) % 120
            wave = sum(np.sin(2 * math.pi * pitch * harmonic * t) / harmonic for harmonic in (1, 2, 3))
            envelope = np.sin(math.pi * np.linspace(0.0, 1.0, len(t), dtype=np.float32))
            pieces.extend([(0.3 * wave * envelope).astype(np.float32), gap])
        pcm = float_to_pcm16(np.concatenate(pieces)) if pieces else b""
        step = SAMPLE_RATE * 2 * chunk_ms // 1000
        for start in range(0, len(pcm), step):
            yield pcm[start : start + step]

    return synthesize


def kokoro_synthesizer(
    engine: SpeechEngine, default_voice: str = "af_heart", voice_map: dict[str, str] | None = None
) -> Synthesizer:
    """Real speech from a loaded Kokoro engine. Qwen3-TTS voice names (`vivian`, …) are mapped
    through `voice_map`; a Kokoro voice id passes through; anything else speaks `default_voice`."""
    mapping = voice_map or {}

    def synthesize(text: str, settings: SpeechSettings) -> Iterator[bytes]:
        voice = settings.voice or default_voice
        voice = mapping.get(voice, voice if voice in engine.voices() else default_voice)
        for chunk in engine.synthesize(text, voice=voice, speed=settings.speed):
            yield float_to_pcm16(chunk.samples)

    return synthesize


# --- text splitting (upstream's split_granularity rules) ---------------------------------------

_LATIN_ENDS = ".!?"  # complete only when followed by whitespace, or at the flush
_SENTENCE_ENDS = "。！？…।॥؟"  # complete at once
_CLAUSE_ENDS = _SENTENCE_ENDS + ",;，；،"


def split_units(buffer: str, granularity: str, *, flush: bool) -> tuple[list[str], str]:
    """Complete units of `buffer` and the rest still buffered ("none": nothing until the flush)."""
    if granularity == "none":
        whole = buffer.strip()
        return ([whole] if whole else []) if flush else [], "" if flush else buffer
    immediate = _CLAUSE_ENDS if granularity == "clause" else _SENTENCE_ENDS
    units: list[str] = []
    start = index = 0
    while index < len(buffer):
        char = buffer[index]
        decimal = (
            char == "." and 0 < index < len(buffer) - 1 and buffer[index - 1].isdigit() and buffer[index + 1].isdigit()
        )
        if decimal or (char not in _LATIN_ENDS and char not in immediate):
            index += 1
            continue
        end = index + 1
        while end < len(buffer) and buffer[end].isspace():
            end += 1
        if char in _LATIN_ENDS and end == index + 1 and not flush:
            index += 1  # maybe an abbreviation: wait for whitespace or the flush
            continue
        unit = buffer[start:end].strip()
        if unit:
            units.append(unit)
        start = index = end
    rest = buffer[start:]
    if flush:
        if rest.strip():
            units.append(rest.strip())
        rest = ""
    return units, rest


# --- session config ------------------------------------------------------------------------------


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class FakeConfig:
    model: str | None
    settings: SpeechSettings
    response_format: str
    stream_audio: bool
    split_granularity: str
    word_timestamps: bool


def parse_config(body: dict[str, Any]) -> FakeConfig:
    """Upstream's StreamingSpeechSessionConfig rules; unknown fields are ignored."""
    voice = body.get("voice", body.get("speaker"))
    if voice is not None and not isinstance(voice, str):
        raise ConfigError(f"voice: expected str, got {voice!r}")
    for name in ("model", "language", "instructions", "ref_audio", "ref_text"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise ConfigError(f"{name}: input should be a valid string; got {body[name]!r}")
    response_format = body.get("response_format", "wav")
    if response_format not in FORMATS:
        raise ConfigError(f"response_format: input should be {', '.join(FORMATS)}; got {response_format!r}")
    granularity = body.get("split_granularity", "none")
    if granularity not in GRANULARITIES:
        raise ConfigError(f"split_granularity: input should be {', '.join(GRANULARITIES)}; got {granularity!r}")
    task_type = body.get("task_type")
    if task_type is not None and task_type not in TASK_TYPES:
        raise ConfigError(f"task_type: input should be {', '.join(TASK_TYPES)}; got {task_type!r}")
    speed = body.get("speed", 1.0)
    if speed is None:
        speed = 1.0
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.25 <= speed <= 4.0:
        raise ConfigError(f"speed: input should be a number in [0.25, 4.0]; got {speed!r}")
    stream_audio = body.get("stream_audio", False)
    word_timestamps = body.get("word_timestamps", False)
    for name, flag in (("stream_audio", stream_audio), ("word_timestamps", word_timestamps)):
        if not isinstance(flag, bool):
            raise ConfigError(f"{name}: input should be a valid boolean; got {flag!r}")
    if stream_audio and response_format != "pcm":
        raise ConfigError(
            "WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
            f"Got response_format='{response_format}'."
        )
    if stream_audio and speed != 1.0:
        raise ConfigError("WebSocket stream_audio=true currently requires speed=1.0")
    settings = SpeechSettings(
        voice=voice,
        language=body.get("language"),
        instructions=body.get("instructions"),
        task_type=task_type,
        ref_audio=body.get("ref_audio"),
        ref_text=body.get("ref_text"),
        speed=float(speed),
    )
    return FakeConfig(body.get("model"), settings, response_format, stream_audio, granularity, word_timestamps)


# --- the app ---------------------------------------------------------------------------------


@dataclass
class Generation:
    """One TTS request the fake ran."""

    utterance_index: int
    sentence_index: int
    text: str
    voice: str | None
    started_at: float
    finished_at: float | None = None
    audio_bytes: int = 0
    outcome: str = "running"  # complete | failed | aborted


@dataclass
class SessionRecord:
    """What the fake saw of one connection, for tests to inspect."""

    received: list[tuple[float, str]] = field(default_factory=list)  # (time, message type or "binary")
    errors: list[str] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    ended: str | None = None  # why the server side ended


class FakeVllmOmni:
    """The app (`.app`) and what it saw (`.sessions`)."""

    def __init__(
        self,
        synthesizer: Synthesizer | None = None,
        *,
        served_model: str = SERVED_MODEL,
        voices: tuple[str, ...] | None = None,
        config_timeout_s: float = 10.0,
        idle_timeout_s: float = 30.0,
        close_after_done: bool = False,
        realtime_factor: float = 0.0,
        fail_trigger: str = FAIL_TRIGGER,
    ) -> None:
        """`voices`: names the server knows (None: any); `realtime_factor`: seconds of
        generation time per second of audio, spent per chunk (0: as fast as possible)."""
        self.synthesizer = synthesizer or tone_synthesizer()
        self.served_model = served_model
        self.voices = voices
        self.config_timeout_s = config_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.close_after_done = close_after_done
        self.realtime_factor = realtime_factor
        self.fail_trigger = fail_trigger
        self.sessions: list[SessionRecord] = []
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                WebSocketRoute(ROUTE, self._session),
                Route("/health", self._health),
                Route("/ping", self._health, methods=["GET", "POST"]),
            ]
        )

    async def _health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ready"})

    async def _session(self, websocket: WebSocket) -> None:
        record = SessionRecord()
        with self._lock:
            self.sessions.append(record)
        await websocket.accept()
        try:
            record.ended = await _Session(self, websocket, record).run()
        except WebSocketDisconnect:
            record.ended = "client disconnected"

    # Generation runs the (blocking) synthesizer in a worker thread, one chunk at a time.
    async def chunks(self, text: str, settings: SpeechSettings) -> AsyncIterator[bytes]:
        iterator = iter(self.synthesizer(text, settings))
        sent = 0
        while True:
            chunk = await asyncio.to_thread(next, iterator, None)
            if chunk is None:
                return
            if self.fail_trigger and self.fail_trigger in text and sent > 0:
                raise RuntimeError("injected failure")
            if self.realtime_factor > 0:
                await asyncio.sleep(len(chunk) / (2 * SAMPLE_RATE) * self.realtime_factor)
            sent += 1
            yield chunk


class _Session:
    """One connection, handled as upstream's handle_session does."""

    def __init__(self, server: FakeVllmOmni, websocket: WebSocket, record: SessionRecord) -> None:
        self.server = server
        self.ws = websocket
        self.record = record
        self.config: FakeConfig | None = None
        self.buffer = ""
        self.utterance_index = 0
        self.sentence_index = 0
        self.utterance_open = False

    async def error(self, message: str, *, partial_audio: bool = False) -> None:
        self.record.errors.append(message)
        body: dict[str, Any] = {"type": "error", "message": message}
        if partial_audio:
            body.update(partial_audio=True, action="discard")
        with contextlib.suppress(Exception):
            await self.ws.send_json(body)

    async def run(self) -> str:
        """Serve until the session ends; returns why (the handler then returns and the server
        closes the socket, as upstream's does)."""
        while True:
            configured = self.config is not None
            timeout = self.server.idle_timeout_s if configured else self.server.config_timeout_s
            try:
                message = await asyncio.wait_for(self.ws.receive(), timeout)
            except TimeoutError:
                if configured:
                    await self.error("Idle timeout: no message received")
                    return "idle timeout"
                await self.error("Timeout waiting for session.config")
                return "config timeout"
            if message["type"] == "websocket.disconnect":
                self.record.received.append((time.monotonic(), "disconnect"))
                return "client disconnected"
            raw = message.get("text")
            if raw is None:
                # Upstream reads with receive_text(), which looks up message["text"]: a binary
                # frame raises KeyError('text'), reported as an internal error, session over.
                self.record.received.append((time.monotonic(), "binary"))
                await self.error("Internal error: 'text'")
                return "binary frame"
            body = await self.parse(raw)
            if body is None:
                if self.config is None:
                    return "malformed handshake"
                continue
            kind = body.get("type")
            self.record.received.append((time.monotonic(), str(kind)))
            if kind == "session.config":
                if self.utterance_open:
                    await self.error(
                        "session.config cannot be applied while an utterance is in progress; send input.done first"
                    )
                    continue
                try:
                    config = parse_config({k: v for k, v in body.items() if k != "type"})
                except ConfigError as exc:
                    await self.error(f"Invalid session config: {exc}")
                    if self.config is None:
                        return "invalid config"
                    continue
                if config.model and config.model != self.server.served_model:
                    await self.error(f"The model `{config.model}` does not exist.")
                    if self.config is None:
                        return "unknown model"
                    continue
                self.config = config
                self.buffer = ""
            elif self.config is None:
                await self.error(f"Expected session.config, got: {kind}")
                return "no config first"
            elif kind == "input.text":
                text = body.get("text", "")
                if not isinstance(text, str):
                    await self.error("input.text requires a string value")
                    continue
                if text:
                    self.utterance_open = True
                self.buffer += text
                units, self.buffer = split_units(self.buffer, self.config.split_granularity, flush=False)
                for unit in units:
                    await self.generate(unit)
            elif kind == "input.done":
                units, self.buffer = split_units(self.buffer, self.config.split_granularity, flush=True)
                for unit in units:
                    await self.generate(unit)
                await self.ws.send_json(
                    {
                        "type": "session.done",
                        "utterance_index": self.utterance_index,
                        "total_sentences": self.sentence_index,
                    }
                )
                self.utterance_index += 1
                self.sentence_index = 0
                self.utterance_open = False
                if self.server.close_after_done:
                    return "input.done (closing server)"
            elif kind == "session.close":
                await self.ws.close()
                return "session.close"
            else:
                await self.error(f"Unknown message type: {kind}")

    async def parse(self, raw: str) -> dict[str, Any] | None:
        if len(raw) > max(MAX_CONFIG_MESSAGE_CHARS, MAX_TEXT_MESSAGE_CHARS):
            await self.error("WebSocket message too large")
            return None
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            await self.error("Invalid JSON message")
            return None
        if not isinstance(body, dict):
            await self.error("WebSocket messages must be JSON objects")
            return None
        if body.get("type") == "session.config":
            if len(raw) > MAX_CONFIG_MESSAGE_CHARS:
                await self.error("session.config message too large")
                return None
        elif len(raw) > MAX_TEXT_MESSAGE_CHARS:
            await self.error("input.text message too large")
            return None
        return body

    async def generate(self, text: str) -> None:
        """One TTS request: audio.start, audio frames, audio.done (always paired)."""
        config = self.config
        assert config is not None
        utterance, sentence = self.utterance_index, self.sentence_index
        self.sentence_index += 1
        if config.word_timestamps:
            await self.error(
                "word_timestamps=true but the server was launched without --forced-aligner; either restart "
                "the server with that flag or set word_timestamps=false in session.config."
            )
            return
        generation = Generation(utterance, sentence, text, config.settings.voice, time.monotonic())
        self.record.generations.append(generation)
        start: dict[str, Any] = {
            "type": "audio.start",
            "utterance_index": utterance,
            "sentence_index": sentence,
            "sentence_text": text,
            "format": config.response_format,
        }
        # Streamed PCM: audio.start waits for the first chunk and states its rate and channels.
        deferred = config.stream_audio and config.response_format == "pcm"
        started = False

        async def send_start(with_format: bool) -> None:
            nonlocal started
            if not started:
                started = True
                if with_format:
                    start.update(sample_rate=SAMPLE_RATE, channels=1)
                await self.ws.send_json(start)

        if not deferred:
            await send_start(False)
        failed = False
        try:
            voices = self.server.voices
            if voices is not None and config.settings.voice is not None and config.settings.voice not in voices:
                raise ValueError(f"Invalid speaker {config.settings.voice!r}; supported: {', '.join(voices)}")
            if config.stream_audio:
                async for chunk in self.server.chunks(text, config.settings):
                    await send_start(True)
                    generation.audio_bytes += len(chunk)
                    await self.ws.send_bytes(chunk)
            else:
                pcm = b"".join([chunk async for chunk in self.server.chunks(text, config.settings)])
                audio = encode_clip(pcm, config.response_format)
                generation.audio_bytes = len(audio)
                await self.ws.send_bytes(audio)
        except WebSocketDisconnect:
            generation.outcome = "aborted"  # upstream aborts the engine request here
            raise
        except Exception as exc:
            failed = True
            with contextlib.suppress(Exception):
                await send_start(False)
            await self.error(
                f"Generation failed for utterance {utterance}, sentence {sentence}: {exc}",
                partial_audio=generation.audio_bytes > 0,
            )
        finally:
            generation.finished_at = time.monotonic()
            if generation.outcome == "running":
                generation.outcome = "failed" if failed else "complete"
            with contextlib.suppress(Exception):
                await send_start(False)
                await self.ws.send_json(
                    {
                        "type": "audio.done",
                        "utterance_index": utterance,
                        "sentence_index": sentence,
                        "total_bytes": generation.audio_bytes,
                        "error": failed,
                    }
                )


def encode_clip(pcm: bytes, response_format: str) -> bytes:
    """A whole clip (stream_audio=false): wav with exact sizes, or raw pcm."""
    if response_format == "pcm":
        return pcm
    if response_format == "wav":
        header = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt "
        header += struct.pack("<IHHIIHH", 16, 1, 1, SAMPLE_RATE, SAMPLE_RATE * 2, 2, 16)
        return header + b"data" + struct.pack("<I", len(pcm)) + pcm
    raise NotImplementedError(f"the fake encodes only wav and pcm, not {response_format}")


@contextlib.contextmanager
def serve_fake(fake: FakeVllmOmni) -> Iterator[tuple[LiveServer, str]]:
    """Run `fake` on 127.0.0.1:<free port>; yields the live server and the route's ws:// URL."""
    # vLLM-Omni's server runs uvicorn's default WebSocket limit (16 MiB), not ours.
    with start_server(fake.app, ws_max_size=16 * 1024 * 1024) as live:
        yield live, f"ws://127.0.0.1:{live.port}{ROUTE}"
