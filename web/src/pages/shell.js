// A shell on a node in the browser: HpodStartSession, then the session relay's
// WebSocket (the token rides in a subprotocol, since a browser cannot set an
// Authorization header on a WebSocket), frames as in src/agent/PROTOCOL.md.
// The node's output goes to xterm.js only — it is never put in the DOM as markup.

import '@xterm/xterm/css/xterm.css';

import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';

import { h, replace } from '../lib/dom.js';
import { decodeFrame, encodeData, encodeResize, sessionProtocols, streamUrl } from '../lib/frames.js';

/**
 * Opens a shell on `target` in a new terminal inside `container`.
 *
 * @param {import('../lib/page.js').PageContext} page
 * @param {HTMLElement} container
 * @param {HTMLElement} status  receives one line: connecting, connected, exit, errors
 * @param {string} target       sagemaker-cluster:<id>_<group>-<instance>
 * @returns {{close: () => void}}
 */
export function openShell(page, container, status, target) {
  const term = new Terminal({ cursorBlink: true, scrollback: 5000, fontSize: 14,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace' });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(container);
  fit.fit();
  const say = (text, kind = '') => replace(status, h('span', { class: kind }, text));
  let ws = null;
  let ended = false;

  const end = (text, kind) => {
    if (ended) return;
    ended = true;
    say(text, kind);
    status.dataset.state = 'closed';
  };
  const send = (frame) => {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(frame);
  };

  say('Starting session…');
  page.api.call('HpodStartSession', { Target: target, Rows: term.rows, Cols: term.cols })
    .then((out) => {
      if (page.disposed || ended) return;
      ws = new WebSocket(streamUrl(out.StreamUrl, window.location), sessionProtocols(out.TokenValue));
      ws.binaryType = 'arraybuffer';
      ws.onopen = () => {
        say(`Connected: session ${out.SessionId}`, 'ok');
        status.dataset.state = 'open';
        send(encodeResize(term.rows, term.cols));
        term.focus();
      };
      ws.onmessage = (ev) => {
        if (typeof ev.data === 'string') return;  // not part of the protocol
        const f = decodeFrame(ev.data);
        if (f.kind === 'data') term.write(f.bytes);
        else if (f.kind === 'exit') end(`The shell exited with status ${f.status}.`);
        else if (f.kind === 'error') end(`Session error: ${f.text}`, 'error-text');
        else if (f.kind === 'invalid') end(`Session stream broken: ${f.text}`, 'error-text');
      };
      ws.onerror = () => end('The session stream failed (see hpodd’s log).', 'error-text');
      ws.onclose = (ev) => end(`Session closed${ev.reason ? ': ' + ev.reason : ''}.`);
    })
    .catch((err) => end(String(err), 'error-text'));

  term.onData((d) => send(encodeData(d)));
  term.onBinary((d) => send(encodeData(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff))));
  term.onResize(({ rows, cols }) => send(encodeResize(rows, cols)));
  const observer = new ResizeObserver(() => {
    try {
      fit.fit();
    } catch {
      // Not laid out (hidden): the next resize fits.
    }
  });
  observer.observe(container);

  const close = () => {
    observer.disconnect();
    if (ws) ws.close();
    ended = true;
    term.dispose();
  };
  page.onDispose(close);
  return { close };
}
