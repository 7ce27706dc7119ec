"""Experiment 5: bytes on the wire per second of audio, by format and by framing.

The first two sentences of the benchmark paragraph (about 8 s of audio: bytes per second of
audio do not depend on the length, and 13 cells of the whole paragraph would cost a minute of
the bench's budget) are spoken once per cell through a counting TCP proxy on 127.0.0.1,
so the count is what really crosses the socket towards the client: HTTP headers, chunked
encoding, WebSocket framing, SSE text and base64 included. Cells:

- POST /invocations (the server): binary body vs SSE (base64 in JSON), for PCM, WAV, MP3;
- the bidi session (WebSocket binary frames, with its control frames), for PCM, WAV, MP3;
- POST /speak (the speak function, replay source at 1000 tokens/s): binary frames vs SSE,
  for PCM and MP3 (the anchor's SSE path carried base64: it measured +33%, MP3 at 49.5 kbps).
- rates: every format (pcm, wav, mp3, mulaw, alaw) at every output rate (8 to 48 kHz): the
  bytes per second of audio that POST /invocations (binary) really sends, and the CPU the
  server spends turning Kokoro's 24 kHz into it (the stateful resampler and the encoder, timed
  on this thread's CPU clock over the same audio cut in 40 ms chunks; median of --repeats).

The model is deterministic, so the bytes do not vary between repeats: one run per cell.

    .venv/bin/python benchmarks/payload.py [--url http://host:port] [--rates-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from common import (
    PCM_BYTES_PER_S,
    LocalServer,
    base_parser,
    header,
    kokoro_server,
    run_session,
    serve_url,
    write_json,
)
from voicestream import env
from voicestream.chunker import split_sentences
from voicestream.kokoro_server.encoders import create_encoder
from voicestream.kokoro_server.resample import StreamResampler
from voicestream.speak.app import create_app
from voicestream.speak.config import SpeakConfig
from voicestream.speech import bidi_url
from voicestream.speech.invocations import invoke
from voicestream.texts import paragraph
from voicestream.wire.bidi import FORMATS, SAMPLE_RATE, SAMPLE_RATES, AudioFormat
from voicestream.wire.speak import Done, SentenceAudio, SpeakStreamDecoder


@dataclass
class Counts:
    down: int = 0  # server -> client
    up: int = 0  # client -> server


class CountingProxy:
    """A TCP relay that counts the bytes of every connection through it."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.counts = Counts()
        self._server: asyncio.Server | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            self._server.close()
            await self._server.wait_closed()

    async def _connection(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(self.host, self.port)
        await asyncio.gather(
            self._pump(client_reader, upstream_writer, "up"),
            self._pump(upstream_reader, client_writer, "down"),
            return_exceptions=True,
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
        try:
            while data := await reader.read(65536):
                if direction == "down":
                    self.counts.down += len(data)
                else:
                    self.counts.up += len(data)
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(OSError):
                writer.close()


def sample_text() -> str:
    return " ".join(split_sentences(paragraph())[:2])


Cell = tuple[Counts, int, dict[str, Any]]  # wire bytes, audio bytes, the session's own metrics


async def invocation_cell(server: LocalServer, fmt: AudioFormat, transport: str) -> Cell:
    proxy = CountingProxy(server.http_url)
    async with proxy.running() as url:
        result = await invoke(url, sample_text(), format=fmt, transport="sse" if transport == "sse" else "binary")
    first = result.first_audio_s
    session = {"first_audio_ms": None if first is None else round(first * 1000, 1)}
    session["completion_ms"] = round(result.total_s * 1000, 1)
    return proxy.counts, len(result.audio), session


async def bidi_cell(server: LocalServer, fmt: AudioFormat) -> Cell:
    proxy = CountingProxy(server.http_url)

    def piece_format(index: int) -> AudioFormat:
        # WAV: the first sentence carries the streaming header, the rest is raw PCM (as the
        # speak function sends it), so the whole reply is one WAV stream.
        return "pcm" if fmt == "wav" and index else fmt

    async with proxy.running() as url:
        record = await run_session(bidi_url(url), split_sentences(sample_text()), format=piece_format, keep_audio=True)
    session = {key: value for key, value in record.metrics().items() if key != "requests"}
    return proxy.counts, len(record.audio), session


async def speak_cell(speak_url: str, fmt: AudioFormat, transport: str) -> tuple[Counts, int, float, dict[str, Any]]:
    proxy = CountingProxy(speak_url)
    body = {
        "text": sample_text(),
        "mode": "bidi",
        "transport": transport,
        "format": fmt,
        "pace": {"first_token_ms": 0, "tokens_per_s": 1000},
    }
    decoder = SpeakStreamDecoder("sse" if transport == "sse" else "binary")
    audio = 0
    audio_ms = 0.0
    first_audio_s: float | None = None
    started = time.perf_counter()
    async with (
        proxy.running() as url,
        httpx.AsyncClient(timeout=120) as client,
        client.stream("POST", f"{url}/speak", json=body) as response,
    ):
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            for event in decoder.feed(chunk):
                if isinstance(event, SentenceAudio):
                    audio += len(event.data)
                    first_audio_s = first_audio_s or time.perf_counter() - started
                elif isinstance(event, Done):
                    audio_ms = event.audio_ms
    decoder.close()
    session = {
        "first_audio_ms": None if first_audio_s is None else round(first_audio_s * 1000, 1),
        "completion_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    return proxy.counts, audio, audio_ms / 1000, session


def row(path: str, fmt: str, framing: str, cell: Cell, audio_s: float) -> dict[str, Any]:
    counts, audio_bytes, session = cell
    return {
        "path": path,
        "format": fmt,
        "framing": framing,
        "audio_s": round(audio_s, 3),
        "audio_bytes": audio_bytes,
        "wire_bytes_down": counts.down,
        "wire_bytes_up": counts.up,
        "wire_kbps": round(counts.down * 8 / audio_s / 1000, 1),
        "audio_kbps": round(audio_bytes * 8 / audio_s / 1000, 1),
        "wire_bytes_per_audio_s": round(counts.down / audio_s),
        "overhead_vs_audio": round((counts.down - audio_bytes) / audio_bytes, 4),
        "session": session,
    }


async def measure(server: LocalServer, speak_url: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    # The audio's length comes from the PCM body: every path speaks the same sentences.
    cell = await invocation_cell(server, "pcm", "binary")
    audio_s = cell[1] / PCM_BYTES_PER_S
    rows.append(row("invocations", "pcm", "binary", cell, audio_s))
    formats: tuple[AudioFormat, ...] = ("pcm", "wav", "mp3")
    for fmt in formats:
        for transport in ("binary", "sse"):
            if (fmt, transport) != ("pcm", "binary"):
                rows.append(row("invocations", fmt, transport, await invocation_cell(server, fmt, transport), audio_s))
        rows.append(row("bidi", fmt, "websocket", await bidi_cell(server, fmt), audio_s))
        print(f"  {fmt}: done")
    speak_formats: tuple[AudioFormat, ...] = ("pcm", "mp3")
    for speak_fmt in speak_formats:
        for transport in ("binary", "sse"):
            counts, size, speak_audio_s, session = await speak_cell(speak_url, speak_fmt, transport)
            rows.append(row("speak", speak_fmt, transport, (counts, size, session), speak_audio_s or audio_s))
    return rows


CPU_CHUNK_S = 0.04  # the chunks the CPU cells feed the resampler and encoder


def delivery_cpu_s(audio: np.ndarray, fmt: str, rate: int, mp3_bitrate_kbps: int) -> float:
    """CPU seconds (this thread's clock) to resample `audio` (24 kHz float) to `rate` and encode
    it as `fmt`, as the server does for one request: one resampler and one encoder, chunk by chunk."""
    step = int(CPU_CHUNK_S * SAMPLE_RATE)
    started = time.thread_time()
    resampler = StreamResampler(SAMPLE_RATE, rate)
    encoder = create_encoder(fmt, rate, mp3_bitrate_kbps=mp3_bitrate_kbps)
    for start in range(0, len(audio), step):
        encoder.encode(resampler.push(audio[start : start + step]))
    encoder.encode(resampler.finish())
    encoder.finish()
    return time.thread_time() - started


async def rate_rows(server: LocalServer, repeats: int) -> list[dict[str, Any]]:
    """Per format and rate: wire bytes per audio second (POST /invocations, binary) and CPU ms
    per audio second of delivering it."""
    reference = await invoke(server.http_url, sample_text(), format="pcm")
    audio = np.frombuffer(reference.audio, dtype="<i2").astype(np.float32) / 32768.0
    audio_s = len(audio) / SAMPLE_RATE
    bitrate = env.limits().mp3_bitrate_kbps
    rows: list[dict[str, Any]] = []
    for fmt in FORMATS:
        for rate in SAMPLE_RATES:
            proxy = CountingProxy(server.http_url)
            async with proxy.running() as url:
                result = await invoke(url, sample_text(), format=fmt, sample_rate=rate)  # type: ignore[arg-type]
            assert (result.format, result.sample_rate) == (fmt, rate), (result.format, result.sample_rate)
            cpu = [delivery_cpu_s(audio, fmt, rate, bitrate) for _ in range(max(1, repeats))]
            rows.append(
                {
                    "format": fmt,
                    "sample_rate": rate,
                    "audio_bytes_per_s": round(len(result.audio) / audio_s),
                    "wire_bytes_per_s": round(proxy.counts.down / audio_s),
                    "wire_kbps": round(proxy.counts.down * 8 / audio_s / 1000, 1),
                    "cpu_ms_per_audio_s": round(statistics.median(cpu) / audio_s * 1000, 3),
                }
            )
        print(f"  rates, {fmt}: done")
    return rows


def analyse(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def wire(path: str, fmt: str, framing: str) -> int:
        cell = (path, fmt, framing)
        return int(next(r["wire_bytes_down"] for r in rows if (r["path"], r["format"], r["framing"]) == cell))

    sse_vs_binary = [
        {
            "path": path,
            "format": fmt,
            "sse_over_binary": round(wire(path, fmt, "sse") / wire(path, fmt, "binary") - 1, 3),
        }
        for path, fmt in dict.fromkeys((r["path"], r["format"]) for r in rows if r["framing"] == "sse")
    ]
    return {"sse_vs_binary": sse_vs_binary}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], "payload.json", repeats=1)
    parser.add_argument(
        "--rates-only", action="store_true", help="only the format x rate cells (into payload_rates.json)"
    )
    args: argparse.Namespace = parser.parse_args()
    if args.rates_only:
        rates_only(args)
        return
    with kokoro_server(args.url, args.threads) as server:
        config = SpeakConfig(kokoro_ws_url=server.ws_url, silence_timeout_s=300)
        with (
            open(os.devnull, "w") as quiet,
            serve_url(create_app(config, log_stream=quiet, metrics=False), "speak") as speak,
        ):
            rows = asyncio.run(measure(server, speak))
        rates = asyncio.run(rate_rows(server, max(args.repeats, 5)))
        report = header(
            "payload",
            args,
            server,
            text=sample_text(),
            mp3_bitrate_kbps=env.limits().mp3_bitrate_kbps,
            rows=rows,
            rates=rates,
            **analyse(rows),
        )
    write_json(args.out, report)
    print(f"{'path':<12} {'format':<6} {'framing':<10} {'wire kbps':>9} {'audio kbps':>10} {'overhead':>9}")
    for r in rows:
        print(
            f"{r['path']:<12} {r['format']:<6} {r['framing']:<10} {r['wire_kbps']:>9} {r['audio_kbps']:>10}"
            f" {r['overhead_vs_audio']:>9}"
        )
    for item in report["sse_vs_binary"]:
        print(item)
    print_rates(rates)


def rates_only(args: argparse.Namespace) -> None:
    out = args.out if args.out.name != "payload.json" else args.out.with_name("payload_rates.json")
    with kokoro_server(args.url, args.threads) as server:
        rates = asyncio.run(rate_rows(server, max(args.repeats, 5)))
        report = header("payload_rates", args, server, text=sample_text(), cpu_chunk_s=CPU_CHUNK_S, rates=rates)
    write_json(out, report)
    print_rates(rates)


def print_rates(rates: list[dict[str, Any]]) -> None:
    print(f"{'format':<6} {'rate':>6} {'audio B/s':>10} {'wire B/s':>9} {'CPU ms/s':>9}")
    for r in rates:
        print(
            f"{r['format']:<6} {r['sample_rate']:>6} {r['audio_bytes_per_s']:>10} {r['wire_bytes_per_s']:>9}"
            f" {r['cpu_ms_per_audio_s']:>9}"
        )


if __name__ == "__main__":
    main()
