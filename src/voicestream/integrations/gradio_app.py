"""The Gradio streaming client (`voicestream gradio`): type a text, hear it as it is synthesized.

Text, voice, language and the upstream (a local Kokoro server, a vLLM-Omni server, or a
SageMaker endpoint signed here, server-side) go in; PCM streams into
`gr.Audio(streaming=True, autoplay=True)` and a metrics panel shows, per run, the connection
time, time to first audio, real-time factor, inter-chunk jitter (p50/p95 of arrival gaps) and
end-to-end time. Stop ends the run, which cancels the upstream work (`StopButtons`). The
behaviour lives in `speech_stream`; this module only lays out the page and translates.

Needs the `gradio` extra (gradio streams audio through ffmpeg, which must be on PATH).
"""

from __future__ import annotations

import asyncio
import io
import signal
import threading
import wave
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import gradio as gr

from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.errors import CodedError
from voicestream.wire.vllm_omni import QWEN3_TTS_LANGUAGES

from .speech_stream import StopButtons, UpstreamChoice, stream_speech, until_stopped, with_idle_ticks

TITLE = "voicestream: streaming speech"
# System fonts only: the page must not reach for web fonts (offline machines, privacy).
THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
METRIC_LABELS = {
    "connect_ms": "connection (ms)",
    "first_audio_ms": "time to first audio (ms)",
    "real_time_factor": "real-time factor",
    "jitter_p50_ms": "inter-chunk jitter p50 (ms)",
    "jitter_p95_ms": "inter-chunk jitter p95 (ms)",
    "end_to_end_ms": "end to end (ms)",
    "audio_ms": "audio (ms)",
    "chunks": "chunks received",
    "status": "status",
}


# Gradio's streamed output hands the player only the AAC frames its encoder (an ffmpeg process)
# has finished when a chunk is yielded: audio yielded in a burst, faster than ffmpeg encodes it,
# would wait in the encoder until the upstream's next audio, seconds later on a slow host. While
# the upstream is quiet after audio, a tick (one silent sample, 42 µs) collects those frames.
TICK_S = 0.1
TICKS_AFTER_AUDIO = 10
_TICK_PCM = b"\x00\x00"


def metrics_table(metrics: dict[str, Any]) -> list[list[Any]]:
    return [[label, metrics.get(key)] for key, label in METRIC_LABELS.items()]


def wav_bytes(pcm: bytes) -> bytes:
    """16-bit mono PCM as WAV: what Gradio's streamed audio reads without a decoder process."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm)
    return buffer.getvalue()


def create_blocks(choices: Sequence[UpstreamChoice], *, default_text: str = "Hello! This is voicestream.") -> gr.Blocks:
    """The page. `choices` are the upstreams offered (see `speech_stream.upstream_choices`)."""
    by_label = {choice.label: choice for choice in choices}
    stop_buttons = StopButtons()

    async def speak(
        text: str, voice: str, language: str, label: str, request: gr.Request
    ) -> AsyncGenerator[tuple[Any, dict[str, Any], list[list[Any]], str]]:
        choice = by_label.get(label)
        if choice is None:
            raise gr.Error(f"unknown upstream {label!r}")
        if not text or not text.strip():
            raise gr.Error("type something to say")
        with stop_buttons.run(request.session_hash or "") as stop:
            chunks = until_stopped(stream_speech(choice, text, voice=voice.strip() or None, language=language), stop)
            ticked = with_idle_ticks(chunks, lambda chunk: bool(chunk[0]), every_s=TICK_S, per_audio=TICKS_AFTER_AUDIO)
            numbers: dict[str, Any] = {"status": "running"}
            try:
                async for chunk in ticked:
                    if chunk is None:
                        yield wav_bytes(_TICK_PCM), gr.skip(), gr.skip(), gr.skip()
                        continue
                    pcm, metrics = chunk
                    numbers = metrics.as_dict()
                    yield (wav_bytes(pcm) if pcm else gr.skip()), numbers, metrics_table(numbers), numbers["status"]
            except CodedError as error:
                raise gr.Error(str(error)) from error
            if numbers["status"] == "running":  # cut short by Stop: the upstream's work is cancelled
                numbers = {**numbers, "status": "stopped"}
                yield gr.skip(), numbers, metrics_table(numbers), "stopped"

    async def press_stop(request: gr.Request) -> None:
        stop_buttons.press(request.session_hash or "")

    blocks = gr.Blocks(title=TITLE, analytics_enabled=False)
    with blocks:
        gr.Markdown(f"## {TITLE}")
        with gr.Row():
            with gr.Column(scale=3):
                text = gr.Textbox(label="Text", value=default_text, lines=4, elem_id="text")
                with gr.Row():
                    voice = gr.Textbox(label="Voice (empty: the upstream's default)", value="", elem_id="voice")
                    language = gr.Dropdown(
                        choices=list(QWEN3_TTS_LANGUAGES),
                        value="Auto",
                        label="Language (vLLM-Omni)",
                        elem_id="language",
                    )
                upstream = gr.Dropdown(
                    choices=list(by_label), value=choices[0].label, label="Upstream", elem_id="upstream"
                )
                with gr.Row():
                    start = gr.Button("Speak", variant="primary", elem_id="speak")
                    stop = gr.Button("Stop", variant="stop", elem_id="stop")
            with gr.Column(scale=2):
                audio = gr.Audio(label="Speech", streaming=True, autoplay=True, interactive=False, elem_id="audio")
                status = gr.Textbox(label="Status", interactive=False, elem_id="status")
                table = gr.Dataframe(
                    headers=["metric", "value"],
                    value=metrics_table({}),
                    label="Metrics (this run)",
                    interactive=False,
                    elem_id="metrics",
                )
                numbers = gr.JSON(label="Metrics (JSON)", visible=False)
        # Runs are not queued at the page: a queued run would not yet hear its Stop. The upstream
        # bounds its own sessions and refuses one more with a clear error.
        start.click(
            speak,
            inputs=[text, voice, language, upstream],
            outputs=[audio, numbers, table, status],
            api_name="speak",
            concurrency_limit=None,
        )
        # Not queued either: Stop reaches the run at once, however busy the queue.
        stop.click(press_stop, api_name="stop", queue=False)
    return blocks


def create_app(choices: Sequence[UpstreamChoice]) -> Any:
    """The page as an ASGI app (FastAPI, Gradio's own), for any ASGI server.

    Built inside a short-lived event loop: Gradio creates its locks and events in the running
    loop, or else makes a new loop for them that nobody closes (one per lock)."""
    from fastapi import FastAPI

    async def build() -> Any:
        blocks = create_blocks(choices).queue(default_concurrency_limit=4)
        return gr.mount_gradio_app(FastAPI(), blocks, path="/", theme=THEME, footer_links=["api"], ssr_mode=False)

    return asyncio.run(build())


def serve(choices: Sequence[UpstreamChoice], host: str = "127.0.0.1", port: int = 7860) -> None:
    """Run the page until Ctrl-C or SIGTERM (Gradio's own server and queue), then close it.

    The signals set an event instead of raising KeyboardInterrupt: an interrupt that arrived
    while Gradio's `launch()` was still starting (its server already answering) was swallowed
    there, and the process then waited forever in Gradio's own loop (seen once in CI, on a
    loaded machine; its stack showed the main thread sleeping in `block_thread`)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    blocks = create_blocks(choices).queue(default_concurrency_limit=4)
    try:
        blocks.launch(
            server_name=host,
            server_port=port,
            theme=THEME,
            footer_links=["api"],
            ssr_mode=False,
            share=False,
            prevent_thread_lock=True,
        )
        while not stop.wait(0.2):
            pass
    finally:
        blocks.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
