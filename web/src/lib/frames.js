// Session frames (src/agent/PROTOCOL.md, "Session frames"; src/cli/session.h):
// binary WebSocket messages whose first byte is the kind.
//   0 data   the rest is bytes (keystrokes to the node, terminal output back)
//   1 resize rows then cols, big-endian uint16 each (to the node)
//   2 exit   big-endian int32 exit status (from the node; it closes after)
//   3 error  UTF-8 text (either way; then close)
//   4 eof    the client's input ended

export const FrameKind = Object.freeze({ DATA: 0, RESIZE: 1, EXIT: 2, ERROR: 3, EOF: 4 });

/** @param {string|Uint8Array} data  a string is sent as UTF-8 */
export function encodeData(data) {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  const out = new Uint8Array(bytes.length + 1);
  out[0] = FrameKind.DATA;
  out.set(bytes, 1);
  return out;
}

export function encodeResize(rows, cols) {
  const out = new Uint8Array(5);
  const view = new DataView(out.buffer);
  out[0] = FrameKind.RESIZE;
  view.setUint16(1, rows);
  view.setUint16(3, cols);
  return out;
}

export function encodeEof() {
  return Uint8Array.of(FrameKind.EOF);
}

/**
 * @param {ArrayBuffer|Uint8Array} message
 * @returns {{kind: 'data', bytes: Uint8Array} | {kind: 'exit', status: number} |
 *     {kind: 'error', text: string} | {kind: 'eof'} | {kind: 'invalid', text: string}}
 */
export function decodeFrame(message) {
  const bytes = message instanceof Uint8Array ? message : new Uint8Array(message);
  if (bytes.length === 0) return { kind: 'invalid', text: 'empty frame' };
  const rest = bytes.subarray(1);
  switch (bytes[0]) {
    case FrameKind.DATA:
      return { kind: 'data', bytes: rest };
    case FrameKind.EXIT:
      if (rest.length !== 4) return { kind: 'invalid', text: 'exit frame of ' + rest.length + ' bytes' };
      return { kind: 'exit', status: new DataView(rest.buffer, rest.byteOffset, 4).getInt32(0) };
    case FrameKind.ERROR:
      return { kind: 'error', text: new TextDecoder().decode(rest) };
    case FrameKind.EOF:
      return { kind: 'eof' };
    default:
      return { kind: 'invalid', text: 'unknown frame kind ' + bytes[0] };
  }
}

/**
 * The WebSocket URL for a StreamUrl from HpodStartSession: a path is relative to
 * the page; an http(s) URL becomes ws(s).
 */
export function streamUrl(url, pageLocation) {
  const u = new URL(url, pageLocation.href);
  if (u.protocol === 'http:') u.protocol = 'ws:';
  if (u.protocol === 'https:') u.protocol = 'wss:';
  // hpodd answers with ws:// (it does not know about a TLS proxy in front); a
  // page served over https must then not downgrade.
  if (pageLocation.protocol === 'https:' && u.protocol === 'ws:' && u.host === pageLocation.host) {
    u.protocol = 'wss:';
  }
  return u.toString();
}

/** The subprotocols that carry the session token (hpodd selects hpod-session). */
export function sessionProtocols(token) {
  return ['hpod-session', 'hpod-token.' + token];
}
