// The page: POST /speak, read the streamed events, play the audio, show what happened when.
//
// window.voicestream exposes the page's state for people in DevTools and for the browser test:
//   stats    counters of the current reply (samples scheduled/played, first audio, …)
//   timeline the entries shown in the timeline, as data
//   captions() the live captions as data: the words on the reply's timeline, the one highlighted
//   speak(), stop()

import { Captions } from './captions.js';
import { FrameError, readSpeakResponse, transportOf } from './frames.js';
import { Mp3StreamPlayer, PcmStreamPlayer, audioContextFor } from './player.js';

const DEFAULT_SAMPLE_RATE = 24000;
const LANGUAGES = {
  a: 'American English',
  b: 'British English',
  e: 'Spanish',
  f: 'French',
  h: 'Hindi',
  i: 'Italian',
  j: 'Japanese',
  p: 'Brazilian Portuguese',
  z: 'Mandarin Chinese',
};

const $ = (id) => document.getElementById(id);
const ui = {
  form: $('speak-form'),
  text: $('text'),
  prompt: $('prompt'),
  voice: $('voice'),
  voiceNote: $('voice-note'),
  transport: $('transport'),
  format: $('format'),
  endpoint: $('endpoint'),
  speak: $('speak'),
  stop: $('stop'),
  status: $('status'),
  error: $('error'),
  reply: $('reply'),
  captions: $('captions'),
  timeline: $('timeline'),
  summary: $('summary'),
  mp3Audio: $('mp3-audio'),
};

function freshStats() {
  return {
    state: 'idle', // idle | requesting | streaming | playing | complete | cancelled | error
    transport: null,
    events: 0,
    audioChunks: 0,
    bytesReceived: 0,
    samplesScheduled: 0,
    samplesPlayed: 0,
    underruns: 0,
    sentences: 0,
    firstTextMs: null,
    firstAudioMs: null,
    firstSoundMs: null,
    doneStatus: null,
    doneAudioBytes: null,
    serverTimings: null,
    samplesScheduledAtStop: null,
    samplesPlayedAtStop: null,
    wordsHeardAtStop: null, // at a Stop: the words whose start had been played (barge-in)
    error: null,
  };
}

const captions = new Captions(ui.captions);

const page = {
  requests: 0,
  stats: freshStats(),
  timeline: [],
  captions: () => captions.snapshot(),
  speak: () => ui.form.requestSubmit(),
  stop: () => current?.cancel('stopped'),
};
window.voicestream = page;

let current = null; // the Reply in progress

// --- small view helpers -----------------------------------------------------------------------

function setState(state, message) {
  page.stats.state = state;
  document.body.dataset.state = state;
  ui.status.textContent = message;
  const busy = state === 'requesting' || state === 'streaming' || state === 'playing';
  ui.stop.disabled = !busy;
}

function showError(message) {
  page.stats.error = message;
  ui.error.textContent = message;
  ui.error.hidden = false;
}

function clearError() {
  ui.error.textContent = '';
  ui.error.hidden = true;
}

function ms(value) {
  return value === null || value === undefined ? '–' : `${Math.round(value)} ms`;
}

function setTiming(name, text) {
  ui.summary.querySelector(`[data-timing="${name}"]`).textContent = text;
}

// --- one reply ---------------------------------------------------------------------------------

class Reply {
  constructor(endpoint, body) {
    this.endpoint = endpoint;
    this.body = body;
    this.controller = new AbortController();
    this.t0 = performance.now();
    this.player = null;
    this.finished = false; // a terminal state was reached (complete, cancelled or error)
    this.sawDone = false;
    this.seenAudio = new Set();
    this.lastError = null;
  }

  now() {
    return performance.now() - this.t0;
  }

  log(kind, label, detail = '', serverMs = null) {
    const entry = { kind, label, detail, t_ms: Math.round(this.now()), server_t_ms: null };
    // The DOM node stays off the data (window.voicestream.timeline must serialize).
    Object.defineProperty(entry, 'item', { writable: true, enumerable: false });
    page.timeline.push(entry);
    const item = document.createElement('li');
    item.dataset.kind = kind;
    const time = document.createElement('time');
    time.dateTime = `PT${(entry.t_ms / 1000).toFixed(3)}S`;
    time.textContent = `${entry.t_ms} ms`;
    const what = document.createElement('span');
    what.className = 'what';
    what.textContent = label;
    item.append(time, ' ', what);
    if (detail) {
      const more = document.createElement('span');
      more.className = 'detail';
      more.textContent = detail;
      item.append(' ', more);
    }
    entry.item = item;
    this.setServerTime(entry, serverMs);
    ui.timeline.append(item);
    return entry;
  }

  setServerTime(entry, serverMs) {
    if (serverMs === null || serverMs === undefined) return;
    entry.server_t_ms = serverMs;
    const server = document.createElement('small');
    server.textContent = `server ${Math.round(serverMs)} ms`;
    entry.item.append(' ', server);
  }

  async run() {
    setState('requesting', 'Sending the request…');
    this.log('request', 'request sent', `${this.body.mode}, ${this.body.transport}, ${this.body.format}`);
    try {
      let response = await this.post(this.body);
      if (response.status === 400 && this.body.transport === 'binary' && this.autoTransport) {
        const refusal = await errorOf(response);
        if (refusal.code !== 'invalid_transport') throw refusal;
        this.log('fallback', 'binary transport refused: falling back to SSE');
        response = await this.post({ ...this.body, transport: 'sse' });
      }
      if (!response.ok) throw await errorOf(response);
      setState('streaming', 'Speaking…');
      page.stats.transport = transportOf(response.headers.get('content-type'));
      await readSpeakResponse(response, (event) => this.onEvent(event), {
        signal: this.controller.signal,
      });
      if (this.finished) return;
      if (!this.sawDone) throw new Error('the stream ended without a done event');
    } catch (error) {
      if (this.finished) return; // Stop aborted the fetch: that is not an error
      this.fail(describe(error));
    }
  }

  post(body) {
    return fetch(this.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: this.controller.signal,
      cache: 'no-store',
    });
  }

  onEvent(event) {
    if (this.finished) return;
    page.stats.events++;
    const handler = this[`on_${event.event}`];
    if (handler) handler.call(this, event);
    else this.log('unknown', `event ${event.event}`);
  }

  on_agent_start(event) {
    this.log('agent-start', 'agent started', `${event.mode} · ${event.source} · ${event.format}`, event.t_ms);
    const format = event.format || this.body.format;
    if (format === 'mp3') {
      this.player = new Mp3StreamPlayer(ui.mp3Audio);
    } else {
      this.player = new PcmStreamPlayer({ sampleRate: event.sample_rate || DEFAULT_SAMPLE_RATE, format });
    }
    this.player.onStarted = () => {
      page.stats.firstSoundMs = this.log('first-sound', 'playback started').t_ms;
      setTiming('first_sound', ms(page.stats.firstSoundMs));
    };
    this.player.onProgress = (stats) => {
      page.stats.samplesPlayed = stats.samplesPlayed;
      page.stats.underruns = stats.underruns;
      captions.update(this.position());
    };
    this.player.onDrained = () => this.onDrained();
  }

  on_text_delta(event) {
    if (page.stats.firstTextMs === null) {
      page.stats.firstTextMs = this.log('first-text', 'first text', '', event.t_ms).t_ms;
      setTiming('first_text', ms(page.stats.firstTextMs));
    }
    ui.reply.textContent += event.text;
  }

  on_sentence(event) {
    page.stats.sentences++;
    const entry = this.log('sentence', `sentence ${event.index + 1} cut`, event.text, event.t_ms);
    if (event.index === 0) setTiming('first_sentence', ms(entry.t_ms));
  }

  on_audio_chunk(event) {
    if (!this.player) throw new FrameError('audio arrived before agent_start');
    page.stats.audioChunks++;
    page.stats.bytesReceived += event.audio.length;
    if (page.stats.firstAudioMs === null) {
      page.stats.firstAudioMs = this.log('first-audio', 'first audio', '', event.t_ms).t_ms;
      setTiming('first_audio', ms(page.stats.firstAudioMs));
    }
    if (!this.seenAudio.has(event.index)) {
      this.seenAudio.add(event.index);
      this.log('sentence-audio', `sentence ${event.index + 1}: audio starts`, '', event.t_ms);
    }
    page.stats.samplesScheduled += this.player.push(event.audio);
  }

  // Word timings of a sentence, sent before its audio: shown as captions, highlighted as heard.
  on_words(event) {
    captions.add(event);
  }

  // Seconds of the reply's audio played so far (what the listener has heard).
  position() {
    if (!this.player) return 0;
    if (this.player instanceof Mp3StreamPlayer) return ui.mp3Audio.currentTime;
    return this.player.stats.samplesPlayed / this.player.sampleRate;
  }

  on_synthesis_complete(event) {
    const detail = `${Math.round(event.audio_ms)} ms of audio, synthesized in ${Math.round(event.server_synth_ms)} ms`;
    this.log('sentence-complete', `sentence ${event.index + 1}: audio complete`, detail, event.t_ms);
  }

  on_error(event) {
    this.lastError = `[${event.code}] ${event.message}`;
    this.log('error', 'error', this.lastError, event.t_ms);
    showError(`The server reported an error: ${this.lastError}`);
  }

  on_done(event) {
    this.sawDone = true;
    page.stats.doneStatus = event.status;
    page.stats.serverTimings = event.timings;
    page.stats.doneAudioBytes = event.audio_bytes;
    // Binary AUDIO frames carry no server time: the done event's timings fill it in.
    const firstAudio = page.timeline.find((entry) => entry.kind === 'first-audio');
    if (firstAudio && firstAudio.server_t_ms === null) this.setServerTime(firstAudio, event.timings?.first_audio_ms);
    const audioS = (event.audio_ms / 1000).toFixed(1);
    const entry = this.log('done', `done: ${event.status}`, `${event.sentences} sentence(s), ${audioS} s of audio`, event.t_ms);
    setTiming('total', ms(entry.t_ms));
    setTiming('audio', `${audioS} s`);
    if (event.status !== 'complete') {
      this.fail(this.lastError ? `The server reported an error: ${this.lastError}` : `The reply ended: ${event.status}`);
      return;
    }
    setState('playing', 'All audio received; playing the rest…');
    this.player?.end()?.catch((error) => this.fail(describe(error)));
    if (!this.player) this.onDrained();
  }

  onDrained() {
    if (this.finished || !this.sawDone) return;
    this.finished = true;
    page.stats.samplesPlayed = this.player?.stats.samplesPlayed ?? 0;
    page.stats.underruns = this.player?.stats.underruns ?? 0;
    captions.update(this.position());
    this.player?.close();
    const s = page.stats;
    setState('complete', `Done: ${s.sentences} sentence(s); first audio after ${ms(s.firstAudioMs)}.`);
    this.log('drained', 'playback finished');
  }

  fail(message) {
    if (this.finished) return;
    this.finished = true;
    this.controller.abort();
    this.player?.stop();
    showError(message);
    if (!this.lastError) this.log('failed', 'failed', message); // an error event is already listed
    setState('error', 'Failed: see the error below.');
  }

  // Stop: abort the request (the server sees the disconnect and cancels the agent and the
  // speech session: barge-in) and silence what is queued.
  cancel(reason) {
    if (this.finished) return;
    this.finished = true;
    page.stats.samplesScheduledAtStop = page.stats.samplesScheduled;
    page.stats.samplesPlayedAtStop = this.player?.stats.samplesPlayed ?? 0;
    const position = this.position();
    captions.update(position);
    page.stats.wordsHeardAtStop = captions.heard(position);
    this.controller.abort();
    this.player?.stop();
    this.log('cancelled', 'cancelled', reason);
    setState('cancelled', 'Cancelled.');
  }
}

async function errorOf(response) {
  const text = await response.text().catch(() => '');
  let code = 'http_error';
  let message = text.slice(0, 300) || response.statusText;
  try {
    const body = JSON.parse(text);
    if (body && typeof body === 'object') {
      code = body.code ?? code;
      message = body.message ?? message;
    }
  } catch {
    // not JSON: keep the text
  }
  const error = new Error(`HTTP ${response.status} [${code}]: ${message}`);
  error.code = code;
  return error;
}

function describe(error) {
  if (error instanceof FrameError) return `The response stream is broken: ${error.message}`;
  if (error instanceof TypeError && /fetch/i.test(error.message)) {
    return `Could not reach ${ui.endpoint.value}: ${error.message} (is the server running? CORS allowed?)`;
  }
  return error?.message || String(error);
}

// --- the form ----------------------------------------------------------------------------------

function requestBody() {
  const input = ui.form.elements.input.value;
  const body = { [input]: (input === 'prompt' ? ui.prompt : ui.text).value };
  body.mode = ui.form.elements.mode.value;
  body.format = ui.format.value;
  body.transport = ui.transport.value === 'auto' ? 'binary' : ui.transport.value;
  if (ui.voice.value) body.voice = ui.voice.value;
  return body;
}

function resetView() {
  clearError();
  ui.reply.textContent = '';
  captions.reset();
  ui.timeline.replaceChildren();
  page.timeline = [];
  page.stats = freshStats();
  for (const dd of ui.summary.querySelectorAll('dd')) dd.textContent = '–';
}

async function onSubmit(event) {
  event.preventDefault();
  current?.cancel('barge-in: a new request'); // speaking again interrupts the reply in progress
  resetView();
  let endpoint;
  try {
    endpoint = new URL(ui.endpoint.value, location.href).href;
  } catch {
    showError(`The endpoint ${ui.endpoint.value} is not a URL.`);
    return;
  }
  const body = requestBody();
  // Created or resumed inside the click: browsers only let audio start from a user gesture.
  if (body.format !== 'mp3') {
    try {
      audioContextFor(DEFAULT_SAMPLE_RATE);
    } catch (error) {
      showError(`Web Audio is not available: ${error.message}`);
      return;
    }
  }
  page.requests++;
  const reply = new Reply(endpoint, body);
  reply.autoTransport = ui.transport.value === 'auto';
  current = reply;
  await reply.run();
}

async function loadVoices() {
  let url;
  try {
    url = new URL('voices', new URL(ui.endpoint.value, location.href));
  } catch {
    return;
  }
  const selected = ui.voice.value || 'af_heart';
  try {
    const response = await fetch(url, { cache: 'no-store' });
    if (!response.ok) throw await errorOf(response);
    const { voices, default: fallback } = await response.json();
    if (!Array.isArray(voices) || !voices.length) throw new Error('the voice list is empty');
    const groups = new Map();
    for (const voice of voices) {
      const language = LANGUAGES[voice[0]] || 'Other';
      if (!groups.has(language)) groups.set(language, []);
      groups.get(language).push(voice);
    }
    ui.voice.replaceChildren(
      ...[...groups].map(([language, names]) => {
        const group = document.createElement('optgroup');
        group.label = language;
        group.append(...names.map((name) => new Option(name, name)));
        return group;
      }),
    );
    ui.voice.value = voices.includes(selected) ? selected : fallback || voices[0];
    ui.voiceNote.textContent = `${voices.length} voices`;
    document.body.dataset.voices = 'loaded';
  } catch (error) {
    ui.voice.replaceChildren(new Option(selected, selected));
    ui.voiceNote.textContent = `Voice list unavailable (${error.message}); using ${selected}.`;
    document.body.dataset.voices = 'unavailable';
  }
}

const params = new URLSearchParams(location.search);

function init() {
  ui.endpoint.value = params.get('endpoint') || new URL('speak', location.href).href.split('?')[0];
  if (params.has('voice')) ui.voice.replaceChildren(new Option(params.get('voice'), params.get('voice')));
  if (params.has('text')) ui.text.value = params.get('text');
  if (params.has('prompt')) {
    ui.prompt.value = params.get('prompt');
    ui.form.elements.input.value = 'prompt';
  }
  for (const name of ['mode', 'transport', 'format']) {
    if (params.has(name)) ui.form.elements[name].value = params.get(name);
  }
  if (!Mp3StreamPlayer.supported()) {
    const mp3 = ui.format.querySelector('option[value="mp3"]');
    mp3.disabled = true;
    mp3.textContent += ' (not supported by this browser)';
  }
  const syncInput = () => {
    const prompt = ui.form.elements.input.value === 'prompt';
    ui.prompt.disabled = !prompt;
    ui.text.disabled = prompt;
  };
  for (const radio of ui.form.elements.input) radio.addEventListener('change', syncInput);
  syncInput();

  ui.form.addEventListener('submit', onSubmit);
  ui.stop.addEventListener('click', () => page.stop());
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !ui.stop.disabled) page.stop();
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey) && event.target instanceof HTMLTextAreaElement) {
      event.preventDefault();
      ui.form.requestSubmit();
    }
  });
  ui.endpoint.addEventListener('change', loadVoices);
  setState('idle', 'Idle.');
  loadVoices();
}

init();
