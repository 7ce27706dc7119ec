// Streaming playback: audio bytes in as they arrive, sound out with no gaps or clicks at seams.
//
// PcmStreamPlayer: 16-bit little-endian mono PCM (and WAV, after its streaming header) into an
// AudioWorklet (pcm-worklet.js) that plays a queue of samples back to back. The AudioContext
// runs at the stream's own sample rate (24 kHz), so no chunk is ever resampled on its own;
// the browser converts the one continuous output stream to the device rate.
// Mp3StreamPlayer: MP3 frames into a MediaSource SourceBuffer behind an <audio> element.
//
// Both expose the same small surface: push(bytes), end(), stop(), `stats`, and callbacks
// onStarted (first sound) and onDrained (everything played).

const WORKLET_URL = new URL('./pcm-worklet.js', import.meta.url);
const contexts = new Map(); // sample rate -> {context, ready: Promise}

// The page's AudioContext for a sample rate, created (or resumed) during a user gesture so that
// autoplay policies let it sound. The worklet module is loaded once per context.
export function audioContextFor(sampleRate) {
  let entry = contexts.get(sampleRate);
  if (!entry) {
    const context = new AudioContext({ sampleRate, latencyHint: 'interactive' });
    entry = { context, ready: context.audioWorklet.addModule(WORKLET_URL) };
    contexts.set(sampleRate, entry);
  }
  if (entry.context.state === 'suspended') entry.context.resume().catch(() => {});
  return entry;
}

// Int16 little-endian bytes to float samples; an odd trailing byte waits for the next chunk.
export class Pcm16Decoder {
  constructor() {
    this.carry = null;
  }

  decode(bytes) {
    if (this.carry !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.carry;
      joined.set(bytes, 1);
      bytes = joined;
      this.carry = null;
    }
    const whole = bytes.length & ~1;
    if (whole !== bytes.length) this.carry = bytes[bytes.length - 1];
    const view = new DataView(bytes.buffer, bytes.byteOffset, whole);
    const samples = new Float32Array(whole / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
    return samples;
  }

  get pending() {
    return this.carry !== null;
  }
}

// Strips a (streaming) WAV header: RIFF/WAVE, chunks up to `data`, then passes PCM through.
// Checks that the audio is what the PCM path plays: 16-bit integer PCM, mono.
export class WavHeaderStripper {
  constructor() {
    this.head = new Uint8Array(0);
    this.done = false;
    this.format = null;
  }

  push(bytes) {
    if (this.done) return bytes;
    const joined = new Uint8Array(this.head.length + bytes.length);
    joined.set(this.head);
    joined.set(bytes, this.head.length);
    this.head = joined;
    const view = new DataView(joined.buffer);
    const tag = (at) => String.fromCharCode(...joined.subarray(at, at + 4));
    if (joined.length < 12) return new Uint8Array(0);
    if (tag(0) !== 'RIFF' || tag(8) !== 'WAVE') throw new Error('the WAV stream does not start with a RIFF/WAVE header');
    let at = 12;
    while (at + 8 <= joined.length) {
      const id = tag(at);
      const size = view.getUint32(at + 4, true);
      if (id === 'data') {
        this.done = true;
        this.head = null;
        if (!this.format) throw new Error('the WAV stream has no fmt chunk before its data');
        return joined.subarray(at + 8);
      }
      if (at + 8 + size > joined.length) break;
      if (id === 'fmt ') {
        this.format = {
          encoding: view.getUint16(at + 8, true),
          channels: view.getUint16(at + 10, true),
          sampleRate: view.getUint32(at + 12, true),
          bits: view.getUint16(at + 22, true),
        };
        const { encoding, channels, bits } = this.format;
        if (encoding !== 1 || channels !== 1 || bits !== 16) {
          throw new Error(`unsupported WAV audio: encoding ${encoding}, ${channels} channels, ${bits} bits`);
        }
      }
      at += 8 + size + (size & 1);
    }
    return new Uint8Array(0);
  }
}

function newStats() {
  return { bytesReceived: 0, samplesScheduled: 0, samplesPlayed: 0, underruns: 0, started: false, drained: false };
}

export class PcmStreamPlayer {
  // `format`: 'pcm' or 'wav'. Call from a user gesture (it creates/resumes the AudioContext).
  constructor({ sampleRate = 24000, format = 'pcm', prebufferMs = 100 } = {}) {
    this.format = format;
    this.sampleRate = sampleRate;
    this.prebufferMs = prebufferMs;
    this.stats = newStats();
    this.decoder = new Pcm16Decoder();
    this.wav = format === 'wav' ? new WavHeaderStripper() : null;
    this.stopped = false;
    this.onStarted = () => {};
    this.onDrained = () => {};
    this.onProgress = () => {};
    this.entry = audioContextFor(sampleRate);
    this.node = this.entry.ready.then(() => this.connect());
    this.node.catch(() => {}); // reported by push()/end() callers awaiting it
  }

  connect() {
    const { context } = this.entry;
    const node = new AudioWorkletNode(context, 'voicestream-pcm-queue', {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { prebufferSamples: Math.round((this.prebufferMs / 1000) * this.sampleRate) },
    });
    node.port.onmessage = ({ data }) => this.onWorklet(data);
    node.connect(context.destination);
    return node;
  }

  onWorklet(data) {
    if (typeof data.played === 'number') this.stats.samplesPlayed = data.played;
    if (typeof data.underruns === 'number') this.stats.underruns = data.underruns;
    if (data.type === 'started' && !this.stats.started) {
      this.stats.started = true;
      this.onStarted();
    } else if (data.type === 'drained') {
      this.stats.drained = true;
      this.onDrained();
    } else if (data.type === 'progress') {
      this.onProgress(this.stats);
    }
  }

  // Queue audio bytes for playback. Returns the number of samples scheduled.
  push(bytes) {
    if (this.stopped) return 0;
    this.stats.bytesReceived += bytes.length;
    const pcm = this.wav ? this.wav.push(bytes) : bytes;
    const wavRate = this.wav?.format?.sampleRate;
    if (wavRate && wavRate !== this.sampleRate) {
      throw new Error(`the WAV stream is ${wavRate} Hz; the player was opened for ${this.sampleRate} Hz`);
    }
    const samples = this.decoder.decode(pcm);
    if (!samples.length) return 0;
    this.stats.samplesScheduled += samples.length;
    this.node.then((node) => {
      if (!this.stopped) node.port.postMessage({ type: 'push', samples }, [samples.buffer]);
    });
    return samples.length;
  }

  // No more audio: play what is queued (even if shorter than the prebuffer), then onDrained.
  end() {
    if (this.decoder.pending) throw new Error('the PCM stream ended in the middle of a sample');
    return this.node.then((node) => {
      if (!this.stopped) node.port.postMessage({ type: 'end' });
    });
  }

  // Stop at once (with a 10 ms fade so it does not click) and drop everything queued.
  async stop() {
    if (this.stopped) return;
    this.stopped = true;
    let node;
    try {
      node = await this.node;
    } catch {
      return;
    }
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 500);
      node.port.onmessage = ({ data }) => {
        if (data.type === 'cleared') {
          clearTimeout(timer);
          resolve();
        }
      };
      node.port.postMessage({ type: 'clear' });
    });
    node.disconnect();
  }

  // Release the node after a reply has drained.
  close() {
    this.stopped = true;
    this.node.then((node) => node.disconnect()).catch(() => {});
  }

  get audioContext() {
    return this.entry.context;
  }
}

export class Mp3StreamPlayer {
  static supported() {
    return typeof MediaSource !== 'undefined' && MediaSource.isTypeSupported('audio/mpeg');
  }

  // `audio`: an <audio> element the page owns.
  constructor(audio) {
    this.audio = audio;
    this.stats = newStats();
    this.queue = [];
    this.ending = false;
    this.stopped = false;
    this.onStarted = () => {};
    this.onDrained = () => {};
    this.onProgress = () => {};
    this.source = new MediaSource();
    this.url = URL.createObjectURL(this.source);
    audio.src = this.url;
    this.opened = new Promise((resolve, reject) => {
      this.source.addEventListener(
        'sourceopen',
        () => {
          try {
            this.buffer = this.source.addSourceBuffer('audio/mpeg');
            this.buffer.mode = 'sequence';
            this.buffer.addEventListener('updateend', () => this.flush());
            resolve();
          } catch (error) {
            reject(error);
          }
        },
        { once: true },
      );
    });
    this.opened.catch(() => {});
    audio.addEventListener('playing', () => {
      if (!this.stats.started) {
        this.stats.started = true;
        this.onStarted();
      }
    });
    audio.addEventListener('ended', () => {
      this.stats.drained = true;
      this.onDrained();
    });
    audio.addEventListener('timeupdate', () => this.onProgress(this.stats));
  }

  push(bytes) {
    if (this.stopped) return 0;
    this.stats.bytesReceived += bytes.length;
    this.queue.push(bytes);
    this.opened.then(() => this.flush());
    return 0;
  }

  flush() {
    if (this.stopped || !this.buffer || this.buffer.updating) return;
    if (this.queue.length) {
      const next = this.queue.shift();
      this.buffer.appendBuffer(next);
      if (this.audio.paused) this.audio.play().catch(() => {});
    } else if (this.ending && this.source.readyState === 'open') {
      this.source.endOfStream();
    }
  }

  end() {
    this.ending = true;
    return this.opened.then(() => this.flush());
  }

  async stop() {
    this.stopped = true;
    this.audio.pause();
    this.audio.removeAttribute('src');
    this.audio.load();
    URL.revokeObjectURL(this.url);
  }

  close() {
    URL.revokeObjectURL(this.url);
  }
}
