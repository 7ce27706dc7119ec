// Checks the page's decoders (src/voicestream/web/frames.js) against streams that the Python
// encoders wrote (tests/browser/test_browser_frames.py writes the fixture):
//   node frames_check.mjs fixture.json
// For each transport the stream is decoded whole, split at every byte offset, byte by byte and
// in random chunks; every decoding must give exactly the expected events. Then malformed and
// truncated streams must throw. Exit status 0 only when every check passed.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import {
  BinaryFrameDecoder,
  FrameError,
  SpeakStreamDecoder,
  SSEDecoder,
  TruncatedStreamError,
} from '../../src/voicestream/web/frames.js';

const fixture = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const bytesOf = (b64) => Uint8Array.from(Buffer.from(b64, 'base64'));
const b64 = (bytes) => Buffer.from(bytes).toString('base64');

function decodeAll(transport, chunks) {
  const decoder = new SpeakStreamDecoder(transport);
  const events = [];
  for (const chunk of chunks) events.push(...decoder.feed(chunk));
  decoder.close();
  return events.map((event) => (event.audio ? { ...event, audio: b64(event.audio) } : event));
}

function splits(stream) {
  const ways = [['whole', [stream]], ['bytewise', [...stream].map((b) => Uint8Array.of(b))]];
  for (let at = 0; at <= stream.length; at++) ways.push([`split@${at}`, [stream.subarray(0, at), stream.subarray(at)]]);
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let round = 0; round < 50; round++) {
    const chunks = [];
    for (let at = 0; at < stream.length; ) {
      const size = 1 + Math.floor(random() * 9);
      chunks.push(stream.subarray(at, at + size));
      at += size;
    }
    ways.push([`random#${round}`, chunks]);
  }
  return ways;
}

let checks = 0;
for (const transport of ['binary', 'sse']) {
  const stream = bytesOf(fixture[transport].stream);
  const expected = fixture[transport].events;
  for (const [name, chunks] of splits(stream)) {
    assert.deepStrictEqual(decodeAll(transport, chunks), expected, `${transport} ${name}`);
    checks++;
  }
  // Cut short anywhere inside the last message: close() must say so, not drop it.
  const cut = stream.subarray(0, stream.length - 1);
  assert.throws(() => decodeAll(transport, [cut]), TruncatedStreamError, `${transport} truncated`);
  checks++;
}

// Malformed binary streams.
const frame = (kind, payload) => {
  const out = new Uint8Array(5 + payload.length);
  new DataView(out.buffer).setUint32(1, payload.length);
  out[0] = kind;
  out.set(payload, 5);
  return out;
};
const utf8 = (text) => new TextEncoder().encode(text);
assert.throws(() => new BinaryFrameDecoder().feed(frame(0x03, utf8('x'))), FrameError, 'unknown kind');
assert.throws(() => new BinaryFrameDecoder().feed(frame(0x01, utf8('[1,2]'))), FrameError, 'EVENT not an object');
assert.throws(() => new BinaryFrameDecoder().feed(frame(0x01, Uint8Array.of(0x7b, 0xff, 0x7d))), FrameError, 'EVENT not UTF-8');
assert.throws(
  () => new BinaryFrameDecoder({ maxFrameBytes: 10 }).feed(Uint8Array.of(0x02, 0, 0, 0, 11)),
  FrameError,
  'oversized frame rejected at its header',
);
// A length with the top bit set is a (huge) unsigned length, not a negative one.
assert.throws(() => new BinaryFrameDecoder().feed(Uint8Array.of(0x02, 0xff, 0xff, 0xff, 0xff)), FrameError);
// Audio that looks like JSON is still audio: the kind byte decides.
assert.deepStrictEqual(new BinaryFrameDecoder().feed(frame(0x02, utf8('{"event":"done"}')))[0].kind, 'audio');
checks += 6;

// SSE details of the WHATWG rules, beyond what the Python encoder writes.
const sse = (text, chunks = 1) => {
  const decoder = new SSEDecoder();
  const bytes = utf8(text);
  const size = Math.ceil(bytes.length / chunks);
  const events = [];
  for (let at = 0; at < bytes.length; at += size) events.push(...decoder.feed(bytes.subarray(at, at + size)));
  decoder.close();
  return events.map(({ event, data }) => [event, data]);
};
for (const chunks of [1, 2, 3, 7]) {
  assert.deepStrictEqual(sse('event: a\r\ndata: 1\r\n\r\n', chunks), [['a', '1']], 'CRLF');
  assert.deepStrictEqual(sse('event: a\rdata: 1\r\r', chunks), [['a', '1']], 'CR');
  assert.deepStrictEqual(sse('\ufeff: comment\ndata: x\ndata: y\n\n', chunks), [['message', 'x\ny']], 'BOM, comment, multi-line data');
  assert.deepStrictEqual(sse('event: only-name\n\ndata:z\n\n', chunks), [['message', 'z']], 'no data: not dispatched');
  checks += 4;
}
assert.throws(() => new SSEDecoder().feed(Uint8Array.of(0x64, 0x61, 0xff)), FrameError, 'invalid UTF-8');
assert.throws(() => sse('data: 1\n'), TruncatedStreamError, 'no blank line at the end');
const partialUtf8 = new SSEDecoder();
partialUtf8.feed(utf8('data: é').subarray(0, 7));
assert.throws(() => partialUtf8.close(), TruncatedStreamError, 'ended inside a UTF-8 sequence');
checks += 3;

console.log(`frames.js: ${checks} checks passed`);
