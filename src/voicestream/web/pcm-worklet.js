// The audio thread's half of the PCM player (player.js): a queue of float32 blocks played back
// to back, sample after sample, so chunk seams are inaudible by construction (no scheduling of
// separate buffers, no rounding of start times).
//
// Messages in:  {type: 'push', samples: Float32Array}  more audio (the buffer is transferred)
//               {type: 'end'}                          no more audio will come for this reply
//               {type: 'clear'}                        stop now: a short fade-out, then drop the queue
// Messages out: {type: 'progress', played, underruns}  about every 50 ms while playing
//               {type: 'started', played: 0}           the first sample is about to sound
//               {type: 'drained', played, underruns}   'end' was received and everything was played
//               {type: 'cleared', played, dropped}     after 'clear'

const FADE_SAMPLES = 240; // 10 ms at 24 kHz: long enough to avoid a click, short enough to feel instant

class PcmQueueProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { prebufferSamples = 2400 } = options.processorOptions || {};
    this.prebufferSamples = prebufferSamples;
    this.blocks = [];
    this.offset = 0; // read position inside blocks[0]
    this.buffered = 0;
    this.played = 0;
    this.underruns = 0;
    this.playing = false; // past the prebuffer, emitting queued audio
    this.ended = false;
    this.fading = 0; // samples left in a fade-out after 'clear'
    this.lastReport = 0;
    this.reported = 0;
    this.last = 0; // the last sample emitted, for a click-free fade into silence on underrun
    this.port.onmessage = (message) => this.onMessage(message.data);
  }

  onMessage(data) {
    if (data.type === 'push') {
      this.blocks.push(data.samples);
      this.buffered += data.samples.length;
    } else if (data.type === 'end') {
      this.ended = true;
      if (this.buffered === 0 && !this.playing) {
        this.ended = false;
        this.port.postMessage({ type: 'drained', played: this.played, underruns: this.underruns });
      }
    } else if (data.type === 'clear') {
      this.fading = this.playing ? FADE_SAMPLES : 0;
      if (!this.fading) this.drop();
    }
  }

  drop() {
    const dropped = this.buffered;
    this.blocks = [];
    this.offset = 0;
    this.buffered = 0;
    this.playing = false;
    this.ended = false;
    this.port.postMessage({ type: 'cleared', played: this.played, dropped });
  }

  next() {
    const block = this.blocks[0];
    const sample = block[this.offset++];
    this.buffered--;
    if (this.offset >= block.length) {
      this.blocks.shift();
      this.offset = 0;
    }
    return sample;
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (!this.playing && this.buffered > 0 && (this.buffered >= this.prebufferSamples || this.ended)) {
      this.playing = true;
      if (this.played === 0) this.port.postMessage({ type: 'started', played: 0 });
    }
    for (let i = 0; i < out.length; i++) {
      if (this.fading > 0) {
        out[i] = this.buffered > 0 ? (this.next() * this.fading) / FADE_SAMPLES : 0;
        this.played++;
        if (--this.fading === 0) {
          this.drop();
          out.fill(0, i + 1);
          break;
        }
      } else if (this.playing && this.buffered > 0) {
        out[i] = this.last = this.next();
        this.played++;
      } else {
        // Nothing to play: glide from the last sample to zero instead of jumping (a click).
        this.last *= 0.95;
        out[i] = Math.abs(this.last) < 1e-4 ? (this.last = 0) : this.last;
        if (this.playing && !this.ended) {
          this.underruns++;
          this.playing = false; // wait for a new prebuffer rather than stutter sample by sample
        }
      }
    }
    // Mono source: copy to every other output channel.
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    if (this.playing && this.buffered === 0 && this.ended) {
      this.playing = false;
      this.ended = false;
      this.port.postMessage({ type: 'drained', played: this.played, underruns: this.underruns });
    } else if (this.played !== this.reported && currentTime - this.lastReport > 0.05) {
      this.lastReport = currentTime;
      this.reported = this.played;
      this.port.postMessage({ type: 'progress', played: this.played, underruns: this.underruns });
    }
    return true;
  }
}

registerProcessor('voicestream-pcm-queue', PcmQueueProcessor);
