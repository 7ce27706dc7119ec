"""The page in a real headless Chromium against the real local stack and the real model.

One short text is spoken to the end (binary transport, bidi, PCM through the AudioWorklet),
one sentence as MP3 through MediaSource (SSE, batch); one longer text is stopped at its first
audio (SSE); two failures must show in the page: a refused request (4xx) and an error event
in the middle of a stream. Waits are for states, never for durations.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlencode

from tests.browser.conftest import LocalStack
from tests.browser.driver import Browser

SPEAK_TEXT = "Hello from the browser. Streaming speech starts early."
STOP_TEXT = " ".join(
    [
        "This reply is going to be interrupted very soon.",
        "The second sentence should never be heard in full.",
        "A third sentence follows it.",
        "Then a fourth one.",
        "A fifth sentence is still queued.",
        "The sixth is waiting too.",
        "So is the seventh.",
        "And the eighth sentence ends it.",
    ]
)
STOP_SENTENCES = 8

STATS = "window.voicestream.stats"
FINISHED = f"['complete', 'error', 'cancelled'].includes({STATS}.state)"


def page_url(stack: LocalStack, **params: str) -> str:
    return f"{stack.url}/?{urlencode(params)}"


def open_page(browser: Browser, url: str) -> None:
    assert browser.goto(url) == 200
    browser.wait("document.body.dataset.voices !== undefined")


def timeline(browser: Browser) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = browser.eval("window.voicestream.timeline")
    return entries


def kinds(browser: Browser) -> list[str]:
    return [str(entry["kind"]) for entry in timeline(browser)]


def test_speak_schedules_audio_and_shows_first_audio(
    local_stack: LocalStack, browser: Browser, artifacts: Path
) -> None:
    open_page(browser, page_url(local_stack, text=SPEAK_TEXT))

    # The voice picker holds the server's voice list, not a list baked into the page.
    voices = browser.eval("[...document.querySelectorAll('#voice option')].map((o) => o.value)")
    assert voices == list(local_stack.runtime.engine.voices())
    assert browser.eval("document.getElementById('voice').value") == "af_heart"
    # Every control is labelled (screen readers name it; a click on the label focuses it).
    unlabelled = browser.eval(
        "[...document.querySelectorAll('input, select, textarea, button')]"
        ".filter((e) => e.tagName !== 'BUTTON' ? e.labels.length === 0 : !e.textContent.trim()).map((e) => e.id)"
    )
    assert unlabelled == []

    browser.click("#speak")
    browser.wait(FINISHED, timeout_s=240)
    stats = browser.eval(STATS)
    assert stats["state"] == "complete", stats
    assert stats["doneStatus"] == "complete"
    assert stats["transport"] == "binary"
    # Every byte the server sent was decoded and scheduled as 16-bit samples, and all of them
    # went through the AudioWorklet to the output (playback drained before "complete").
    assert stats["bytesReceived"] == stats["doneAudioBytes"] > 0
    assert stats["samplesScheduled"] == stats["bytesReceived"] // 2
    assert stats["samplesPlayed"] == stats["samplesScheduled"]
    assert stats["sentences"] == 2

    entries = timeline(browser)
    order = [entry["kind"] for entry in entries]
    for kind in ("request", "agent-start", "first-text", "sentence", "first-audio", "first-sound", "done", "drained"):
        assert kind in order, (kind, order)
    assert order.index("request") < order.index("first-text") < order.index("first-audio") < order.index("done")
    assert order.count("sentence-audio") == 2 and order.count("sentence-complete") == 2
    first_audio = next(entry for entry in entries if entry["kind"] == "first-audio")
    assert first_audio["t_ms"] == stats["firstAudioMs"]
    assert isinstance(first_audio["server_t_ms"], int | float)
    shown = browser.eval("document.querySelector('[data-timing=\"first_audio\"]').textContent")
    assert shown == f"{stats['firstAudioMs']} ms"
    assert browser.eval("document.getElementById('reply').textContent") == SPEAK_TEXT
    assert browser.eval("document.getElementById('status').textContent").startswith("Done")
    assert browser.eval("document.getElementById('error').hidden") is True

    browser.screenshot(artifacts / "speak.png")
    (artifacts / "speak-stats.json").write_text(json.dumps({"stats": stats, "timeline": entries}, indent=2))
    assert browser.problems() == []


def test_mp3_plays_through_media_source(local_stack: LocalStack, browser: Browser) -> None:
    open_page(browser, page_url(local_stack, text="Hi there.", format="mp3", mode="batch", transport="sse"))
    assert browser.eval("MediaSource.isTypeSupported('audio/mpeg')") is True
    browser.click("#speak")
    browser.wait(FINISHED, timeout_s=240)
    stats = browser.eval(STATS)
    assert stats["state"] == "complete", stats
    assert stats["transport"] == "sse"
    assert stats["bytesReceived"] == stats["doneAudioBytes"] > 0
    # The <audio> element played the MediaSource to its end: 'playing' then 'ended' fired.
    order = kinds(browser)
    assert order.index("first-audio") < order.index("first-sound") and order[-1] == "drained"
    assert browser.eval("document.getElementById('mp3-audio').ended") is True
    assert browser.problems() == []


def test_stop_cancels_playback_and_server_work(local_stack: LocalStack, browser: Browser, artifacts: Path) -> None:
    open_page(browser, page_url(local_stack, text=STOP_TEXT, transport="sse"))
    started_before = local_stack.runtime.stats.sentences_started

    # Speak from the keyboard (Ctrl+Enter in the text box), stop with the Stop button.
    browser.call("press", selector="#text", key="Control+Enter")
    browser.wait(f"{STATS}.samplesScheduled > 0", timeout_s=240)
    browser.click("#stop")

    stats = browser.eval(STATS)
    assert stats["state"] == "cancelled"
    assert stats["transport"] == "sse"
    assert browser.eval("document.getElementById('status').textContent") == "Cancelled."
    assert "cancelled" in kinds(browser)
    assert browser.eval("document.getElementById('stop').disabled") is True

    # Barge-in reaches the server: the speak app cancels its session and the Kokoro server
    # stops; only then is it certain that nothing more could have arrived.
    local_stack.until_idle()
    after = browser.eval(STATS)
    assert after["samplesScheduled"] == after["samplesScheduledAtStop"] == stats["samplesScheduledAtStop"]
    assert after["doneStatus"] is None  # the rest of the reply never came
    assert after["state"] == "cancelled"
    assert local_stack.runtime.stats.sentences_started - started_before < STOP_SENTENCES
    assert browser.eval("document.getElementById('error').hidden") is True
    browser.screenshot(artifacts / "stopped.png")
    assert browser.problems() == []


def test_refused_request_is_shown(local_stack: LocalStack, browser: Browser, artifacts: Path) -> None:
    open_page(browser, page_url(local_stack, text="  ...  "))
    browser.click("#speak")
    browser.wait(FINISHED)
    assert browser.eval(f"{STATS}.state") == "error"
    message = browser.eval("document.getElementById('error').textContent")
    assert browser.eval("document.getElementById('error').hidden") is False
    assert browser.eval("document.getElementById('error').getAttribute('role')") == "alert"
    assert "HTTP 400 [empty_text]" in message, message
    assert browser.eval("document.getElementById('status').textContent").startswith("Failed")
    # Chromium logs the 400 itself; nothing else may have gone wrong.
    assert [p for p in browser.problems() if "status of 400" not in p] == []


def test_error_event_mid_stream_is_shown(local_stack: LocalStack, browser: Browser, artifacts: Path) -> None:
    open_page(browser, page_url(local_stack, text=SPEAK_TEXT, mode="batch"))
    # A voice the server does not have: the request is accepted, the speech server refuses it.
    browser.eval(
        "(() => { const v = document.getElementById('voice');"
        " v.add(new Option('xx_nobody', 'xx_nobody')); v.value = 'xx_nobody'; })()"
    )
    browser.click("#speak")
    browser.wait(FINISHED, timeout_s=120)
    stats = browser.eval(STATS)
    assert stats["state"] == "error", stats
    assert stats["doneStatus"] == "error"
    assert stats["samplesScheduled"] == 0
    message = browser.eval("document.getElementById('error').textContent")
    assert browser.eval("document.getElementById('error').hidden") is False
    assert "unknown_voice" in message and "xx_nobody" in message, message
    error_entries = [entry for entry in timeline(browser) if entry["kind"] == "error"]
    assert len(error_entries) == 1 and "unknown_voice" in str(error_entries[0]["detail"])
    browser.screenshot(artifacts / "error.png")
    assert browser.problems() == []


def test_unreachable_endpoint_is_shown(local_stack: LocalStack, browser: Browser) -> None:
    # What a deployed function URL that is down (or refuses CORS) looks like: nothing answers.
    with socket.socket() as sock:  # a port nobody listens on once this block ends
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/speak"
    open_page(browser, page_url(local_stack, text=SPEAK_TEXT, endpoint=dead, voice="am_adam"))
    assert browser.eval("document.getElementById('endpoint').value") == dead
    assert browser.eval("document.body.dataset.voices") == "unavailable"
    assert browser.eval("document.getElementById('voice').value") == "am_adam"
    assert "Voice list unavailable" in browser.eval("document.getElementById('voice-note').textContent")
    browser.click("#speak")
    browser.wait(FINISHED)
    assert browser.eval(f"{STATS}.state") == "error"
    message = browser.eval("document.getElementById('error').textContent")
    assert message.startswith(f"Could not reach {dead}"), message
    assert [p for p in browser.problems() if "ERR_CONNECTION_REFUSED" not in p] == []


# Runs in the page: a sine wave as 16-bit PCM, cut into chunks of odd byte sizes (so samples are
# split across chunks), through the real player; a recorder worklet taps the player's output.
SEAMLESS_CHECK = """(async () => {
  const { PcmStreamPlayer } = await import('./player.js');
  const count = 12000;  // 0.5 s at 24 kHz
  const expected = new Float32Array(count);
  const bytes = new Uint8Array(count * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < count; i++) {
    const value = Math.round(16000 * Math.sin((2 * Math.PI * 440 * i) / 24000)) + (i === 0 ? 1 : 0);
    view.setInt16(2 * i, value, true);
    expected[i] = value / 32768;
  }
  const player = new PcmStreamPlayer({ sampleRate: 24000 });
  const node = await player.node;
  const context = player.audioContext;
  const source = `registerProcessor('recorder', class extends AudioWorkletProcessor {
    constructor() { super(); this.blocks = []; this.port.onmessage = () => this.port.postMessage(this.blocks); }
    process(inputs) { if (inputs[0][0]) this.blocks.push(inputs[0][0].slice()); return true; }
  });`;
  await context.audioWorklet.addModule(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
  const recorder = new AudioWorkletNode(context, 'recorder');
  node.connect(recorder);
  recorder.connect(context.destination);
  const drained = new Promise((resolve) => { player.onDrained = resolve; });
  const sizes = [1, 3, 7, 255, 1001, 2, 4097];
  for (let at = 0, k = 0; at < bytes.length; k++) {
    const size = sizes[k % sizes.length];
    player.push(bytes.subarray(at, at + size));
    at += size;
  }
  await player.end();
  await drained;
  const blocks = await new Promise((resolve) => {
    recorder.port.onmessage = ({ data }) => resolve(data);
    recorder.port.postMessage('dump');
  });
  player.close();
  recorder.disconnect();
  const out = new Float32Array(blocks.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const block of blocks) { out.set(block, at); at += block.length; }
  const start = out.findIndex((sample) => sample !== 0);
  let mismatches = 0;
  for (let i = 0; i < count; i++) if (out[start + i] !== expected[i]) mismatches++;
  return { start, recorded: out.length, mismatches, stats: player.stats };
})()"""


def test_player_output_is_the_input_sample_for_sample(local_stack: LocalStack, browser: Browser) -> None:
    open_page(browser, local_stack.url + "/")
    result = browser.eval(SEAMLESS_CHECK)
    # Every sample came out once, in order, unchanged: no gap, repeat or jump at any seam.
    assert result["start"] >= 0 and result["recorded"] >= result["start"] + 12000, result
    assert result["mismatches"] == 0, result
    stats = result["stats"]
    assert stats["samplesScheduled"] == stats["samplesPlayed"] == 12000
    assert stats["underruns"] == 0
    assert browser.problems() == []
