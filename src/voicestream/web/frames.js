// Decoders for the speak function's two transports (docs/frames.md, docs/speak.md).
//
// Both are incremental: feed them the chunks fetch() delivers, in any sizes, and they return
// the whole messages each chunk completes. A chunk may end mid-frame, mid-line or in the middle
// of a UTF-8 sequence. Nothing is dropped silently: garbage throws FrameError, and close()
// throws TruncatedStreamError when the stream ended inside a message.
//
// - BinaryFrameDecoder: kind (1 byte: 0x01 EVENT, 0x02 AUDIO) | length (4 bytes, big-endian) | payload
// - SSEDecoder: server-sent events, WHATWG parsing rules
// - SpeakStreamDecoder: either of them, turned into speak events ({event: name, ...fields});
//   audio_chunk events carry their audio as a Uint8Array in `audio` (never base64 past here).

export const FRAME_EVENT = 0x01;
export const FRAME_AUDIO = 0x02;
export const BINARY_FRAMES_CONTENT_TYPE = 'application/vnd.voicestream.wire.framing';
export const SSE_CONTENT_TYPE = 'text/event-stream';
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;
export const DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024;

export class FrameError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FrameError';
  }
}

export class TruncatedStreamError extends FrameError {
  constructor(message) {
    super(message);
    this.name = 'TruncatedStreamError';
  }
}

function parseJsonObject(text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new FrameError(`${what} is not JSON: ${error.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new FrameError(`${what} is not a JSON object`);
  }
  return value;
}

// A byte buffer that grows by doubling, so a frame split over many chunks costs O(n), not O(n²).
class ByteQueue {
  constructor() {
    this.bytes = new Uint8Array(4096);
    this.start = 0;
    this.end = 0;
  }

  get length() {
    return this.end - this.start;
  }

  push(chunk) {
    if (this.end + chunk.length > this.bytes.length) {
      const live = this.length;
      if (live + chunk.length > this.bytes.length) {
        let size = this.bytes.length;
        while (size < live + chunk.length) size *= 2;
        const grown = new Uint8Array(size);
        grown.set(this.bytes.subarray(this.start, this.end));
        this.bytes = grown;
      } else {
        this.bytes.copyWithin(0, this.start, this.end);
      }
      this.start = 0;
      this.end = live;
    }
    this.bytes.set(chunk, this.end);
    this.end += chunk.length;
  }

  byteAt(offset) {
    return this.bytes[this.start + offset];
  }

  // A copy of the next `count` bytes, removed from the queue.
  take(count) {
    const out = this.bytes.slice(this.start, this.start + count);
    this.start += count;
    if (this.start === this.end) this.start = this.end = 0;
    return out;
  }
}

export class BinaryFrameDecoder {
  constructor({ maxFrameBytes = DEFAULT_MAX_FRAME_BYTES } = {}) {
    this.maxFrameBytes = maxFrameBytes;
    this.queue = new ByteQueue();
    this.utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  }

  // Returns [{kind: 'event', value: {...}} | {kind: 'audio', bytes: Uint8Array}], in order.
  feed(chunk) {
    this.queue.push(chunk);
    const frames = [];
    const q = this.queue;
    while (q.length >= 5) {
      const kind = q.byteAt(0);
      if (kind !== FRAME_EVENT && kind !== FRAME_AUDIO) {
        throw new FrameError(`unknown binary frame kind 0x${kind.toString(16).padStart(2, '0')}`);
      }
      // >>> 0 keeps the length unsigned when its top bit is set.
      const length = ((q.byteAt(1) << 24) | (q.byteAt(2) << 16) | (q.byteAt(3) << 8) | q.byteAt(4)) >>> 0;
      if (length > this.maxFrameBytes) {
        throw new FrameError(`binary frame of ${length} bytes exceeds the limit of ${this.maxFrameBytes}`);
      }
      if (q.length < 5 + length) break;
      q.take(5);
      const payload = q.take(length);
      if (kind === FRAME_AUDIO) {
        frames.push({ kind: 'audio', bytes: payload });
        continue;
      }
      let text;
      try {
        text = this.utf8.decode(payload);
      } catch {
        throw new FrameError('EVENT frame payload is not UTF-8');
      }
      frames.push({ kind: 'event', value: parseJsonObject(text, 'EVENT frame payload') });
    }
    return frames;
  }

  close() {
    if (this.queue.length) {
      throw new TruncatedStreamError(
        `binary frame stream ended with ${this.queue.length} bytes of an incomplete frame`,
      );
    }
  }
}

export class SSEDecoder {
  constructor({ maxEventChars = DEFAULT_MAX_EVENT_CHARS } = {}) {
    this.maxEventChars = maxEventChars;
    // fatal: invalid UTF-8 is an error, not U+FFFD; the default ignoreBOM=false drops a leading BOM.
    this.utf8 = new TextDecoder('utf-8', { fatal: true });
    this.line = '';
    this.afterCR = false;
    this.resetEvent();
    this.lastId = null;
  }

  resetEvent() {
    this.eventName = '';
    this.data = [];
    this.dataChars = 0;
    this.pendingFields = false;
  }

  // Returns [{event, data, id}] for each event this chunk completes.
  feed(chunk) {
    let text;
    try {
      text = this.utf8.decode(chunk, { stream: true });
    } catch (error) {
      throw new FrameError(`SSE stream is not valid UTF-8: ${error.message}`);
    }
    return this.feedText(text);
  }

  feedText(text) {
    const events = [];
    let pos = 0;
    if (this.afterCR && text.length) {
      this.afterCR = false;
      if (text[0] === '\n') pos = 1;
    }
    const lineEnd = /\r\n|\r|\n/g;
    lineEnd.lastIndex = pos;
    let match;
    while ((match = lineEnd.exec(text)) !== null) {
      this.append(text.slice(pos, match.index));
      // A \r at the very end of a chunk may be the first half of \r\n.
      this.afterCR = match[0] === '\r' && lineEnd.lastIndex === text.length;
      const event = this.processLine(this.line);
      this.line = '';
      if (event) events.push(event);
      pos = lineEnd.lastIndex;
    }
    this.append(text.slice(pos));
    return events;
  }

  append(piece) {
    if (!piece) return;
    this.line += piece;
    if (this.line.length + this.dataChars > this.maxEventChars) {
      throw new FrameError(`SSE event exceeds the limit of ${this.maxEventChars} characters`);
    }
  }

  processLine(line) {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    this.pendingFields = true;
    if (field === 'data') {
      this.data.push(value);
      this.dataChars += value.length + 1;
    } else if (field === 'event') {
      this.eventName = value;
    } else if (field === 'id' && !value.includes('\0')) {
      this.lastId = value;
    }
    return null;
  }

  dispatch() {
    const event = this.data.length
      ? { event: this.eventName || 'message', data: this.data.join('\n'), id: this.lastId }
      : null;
    this.resetEvent();
    return event;
  }

  close() {
    let rest;
    try {
      rest = this.utf8.decode();
    } catch {
      throw new TruncatedStreamError('SSE stream ended inside a UTF-8 sequence');
    }
    if (rest) this.feedText(rest);
    if (this.line) throw new TruncatedStreamError(`SSE stream ended inside a line: ${this.line.slice(0, 80)}`);
    if (this.pendingFields) throw new TruncatedStreamError('SSE stream ended before the blank line that ends an event');
  }
}

export function base64ToBytes(text) {
  if (typeof text !== 'string') throw new FrameError('audio_chunk audio is not a base64 string');
  if (typeof Uint8Array.fromBase64 === 'function') {
    try {
      return Uint8Array.fromBase64(text);
    } catch (error) {
      throw new FrameError(`audio_chunk audio is not base64: ${error.message}`);
    }
  }
  let binary;
  try {
    binary = atob(text);
  } catch (error) {
    throw new FrameError(`audio_chunk audio is not base64: ${error.message}`);
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// 'binary' or 'sse' for a response's Content-Type; null for anything else.
export function transportOf(contentType) {
  const type = (contentType || '').split(';')[0].trim().toLowerCase();
  if (type === BINARY_FRAMES_CONTENT_TYPE) return 'binary';
  if (type === SSE_CONTENT_TYPE) return 'sse';
  return null;
}

// Speak events from either transport, the same shape for both:
// {event: 'audio_chunk', index, audio: Uint8Array, bytes} or {event: name, ...fields}.
export class SpeakStreamDecoder {
  constructor(transport) {
    if (transport !== 'binary' && transport !== 'sse') {
      throw new Error(`transport must be 'binary' or 'sse', not ${transport}`);
    }
    this.transport = transport;
    this.decoder = transport === 'binary' ? new BinaryFrameDecoder() : new SSEDecoder();
    // Binary AUDIO frames carry no index: they belong to the sentence after the last completed one.
    this.nextIndex = 0;
  }

  feed(chunk) {
    return this.transport === 'binary' ? this.fromFrames(chunk) : this.fromSSE(chunk);
  }

  fromFrames(chunk) {
    const events = [];
    for (const frame of this.decoder.feed(chunk)) {
      if (frame.kind === 'audio') {
        events.push({ event: 'audio_chunk', index: this.nextIndex, audio: frame.bytes, bytes: frame.bytes.length });
        continue;
      }
      const { event: name, ...fields } = frame.value;
      if (typeof name !== 'string') throw new FrameError('EVENT frame has no "event" name');
      if (name === 'synthesis_complete' && Number.isInteger(fields.index)) this.nextIndex = fields.index + 1;
      events.push({ event: name, ...fields });
    }
    return events;
  }

  fromSSE(chunk) {
    return this.decoder.feed(chunk).map(({ event: name, data }) => {
      const fields = parseJsonObject(data, `SSE event ${name} data`);
      if (name === 'audio_chunk') {
        const audio = base64ToBytes(fields.audio ?? '');
        delete fields.audio;
        return { event: name, ...fields, audio, bytes: audio.length };
      }
      return { event: name, ...fields };
    });
  }

  close() {
    this.decoder.close();
  }
}

// Reads a fetch() Response body to the end, calling onEvent(event) for each speak event.
// `signal` (an AbortSignal) stops reading; the reader is cancelled so the connection closes.
export async function readSpeakResponse(response, onEvent, { signal } = {}) {
  const transport = transportOf(response.headers.get('content-type'));
  if (!transport) {
    throw new FrameError(`unexpected response type ${response.headers.get('content-type') || '(none)'}`);
  }
  const decoder = new SpeakStreamDecoder(transport);
  const reader = response.body.getReader();
  const onAbort = () => reader.cancel().catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const event of decoder.feed(value)) onEvent(event);
    }
    finished = true;
    if (!signal?.aborted) decoder.close();
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A decoding error or a throwing handler: stop the download too, the server then stops working.
    if (!finished) await reader.cancel().catch(() => {});
  }
  return transport;
}
