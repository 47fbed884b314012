// Session frames as src/agent/PROTOCOL.md "Session frames" defines them (the same
// bytes src/cli/session.cc encodes: see session_test.cc).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { decodeFrame, encodeData, encodeEof, encodeResize, sessionProtocols, streamUrl }
  from '../src/lib/frames.js';

test('encodes data, resize and eof frames', () => {
  assert.deepEqual([...encodeData('hé')], [0, 0x68, 0xc3, 0xa9]);
  assert.deepEqual([...encodeData(Uint8Array.of(1, 2))], [0, 1, 2]);
  assert.deepEqual([...encodeResize(40, 120)], [1, 0, 40, 0, 120]);
  assert.deepEqual([...encodeResize(300, 1000)], [1, 1, 44, 3, 232]);
  assert.deepEqual([...encodeEof()], [4]);
});

test('decodes what the node sends', () => {
  const data = decodeFrame(Uint8Array.of(0, 0x6f, 0x6b).buffer);
  assert.equal(data.kind, 'data');
  assert.equal(new TextDecoder().decode(data.bytes), 'ok');
  assert.deepEqual(decodeFrame(Uint8Array.of(2, 0, 0, 0, 5)), { kind: 'exit', status: 5 });
  assert.deepEqual(decodeFrame(Uint8Array.of(2, 0xff, 0xff, 0xff, 0xff)), { kind: 'exit', status: -1 });
  assert.deepEqual(decodeFrame(new Uint8Array([3, ...new TextEncoder().encode('no such node')])),
    { kind: 'error', text: 'no such node' });
  assert.equal(decodeFrame(Uint8Array.of(4)).kind, 'eof');
  assert.equal(decodeFrame(Uint8Array.of(2, 1)).kind, 'invalid');
  assert.equal(decodeFrame(Uint8Array.of(9)).kind, 'invalid');
  assert.equal(decodeFrame(new Uint8Array(0)).kind, 'invalid');
  // A data frame that is a view into a larger buffer decodes only its own bytes.
  const big = Uint8Array.of(7, 7, 2, 0, 0, 1, 0, 7);
  assert.deepEqual(decodeFrame(big.subarray(2, 7)), { kind: 'exit', status: 256 });
});

test('stream URLs and subprotocols', () => {
  const page = new URL('http://127.0.0.1:8450/#/clusters/c');
  assert.equal(streamUrl('ws://127.0.0.1:8450/v1/sessions/s-1', page), 'ws://127.0.0.1:8450/v1/sessions/s-1');
  assert.equal(streamUrl('/v1/sessions/s-1', page), 'ws://127.0.0.1:8450/v1/sessions/s-1');
  assert.equal(streamUrl('https://h/v1/sessions/s-1', page), 'wss://h/v1/sessions/s-1');
  const tls = new URL('https://hpod.example/');
  assert.equal(streamUrl('ws://hpod.example/v1/sessions/s-2', tls), 'wss://hpod.example/v1/sessions/s-2');
  assert.deepEqual(sessionProtocols('tok'), ['hpod-session', 'hpod-token.tok']);
});
