// The pieces behind the console's live pages: one chain of polls (Poller), the
// tail of a followed log (LogTail), and rows kept across refreshes (keyedRows).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { keyedRows } from '../src/lib/dom.js';
import { LogTail } from '../src/lib/logtail.js';
import { Poller } from '../src/lib/poller.js';

/** Timers that run only when the test advances the clock. */
function fakeTimers() {
  let now = 0;
  let nextId = 1;
  const pending = new Map();  // id -> {at, fn}
  return {
    setTimeout(fn, ms) {
      const id = nextId++;
      pending.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout(id) {
      pending.delete(id);
    },
    /** The delays of the timers now pending, from now. */
    delays: () => [...pending.values()].map((t) => t.at - now),
    async advance(ms) {
      const until = now + ms;
      for (;;) {
        const due = [...pending.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at);
        if (!due.length) break;
        const [id, t] = due[0];
        pending.delete(id);
        now = t.at;
        t.fn();
        await settle();
      }
      now = until;
    },
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function fakeDocument(state = 'visible') {
  const doc = new EventTarget();
  doc.visibilityState = state;
  doc.show = (s) => {
    doc.visibilityState = s;
    doc.dispatchEvent(new Event('visibilitychange'));
  };
  return doc;
}

test('a poll chain never has two ticks in flight', async () => {
  const timers = fakeTimers();
  const calls = [];
  let inFlight = 0;
  let most = 0;
  const tick = async () => {
    inFlight += 1;
    most = Math.max(most, inFlight);
    const d = deferred();
    calls.push(d);
    await d.promise;
    inFlight -= 1;
  };
  const p = new Poller(tick, { intervalMs: 5000, timers, visibility: fakeDocument() });
  p.start();
  await settle();
  assert.equal(calls.length, 1);
  // A user's choice while the first tick is out: no second request beside it...
  p.wake();
  p.wake();
  const side = p.run(async () => 'goodput');
  await settle();
  assert.equal(calls.length, 1);
  // ...but one right after it (and the one-off request between the two).
  calls[0].resolve();
  assert.equal(await side, 'goodput');
  await settle();
  assert.deepEqual(timers.delays(), [0]);
  await timers.advance(0);
  assert.equal(calls.length, 2);
  calls[1].resolve();
  await settle();
  assert.deepEqual(timers.delays(), [5000], 'back to the interval');
  await timers.advance(5000);
  assert.equal(calls.length, 3);
  calls[2].resolve();
  await settle();
  assert.equal(most, 1);
  p.stop();
  assert.deepEqual(timers.delays(), []);
});

test('failures double the wait up to the maximum; a success resets it', async () => {
  const timers = fakeTimers();
  let fail = true;
  const errors = [];
  const p = new Poller(async () => {
    if (fail) throw new Error('ThrottlingException');
  }, { intervalMs: 5000, maxDelayMs: 60000, timers, visibility: fakeDocument(),
    onError: (err, ms) => errors.push([err.message, ms]) });
  p.start();
  await settle();
  const seen = [];
  for (let i = 0; i < 5; i += 1) {
    const [d] = timers.delays();
    seen.push(d);
    await timers.advance(d);
  }
  assert.deepEqual(seen, [10000, 20000, 40000, 60000, 60000]);
  assert.deepEqual(errors.map((e) => e[1]), [10000, 20000, 40000, 60000, 60000, 60000]);
  fail = false;
  await timers.advance(60000);
  assert.deepEqual(timers.delays(), [5000]);
  p.stop();
});

test('a hidden tab polls nothing and resumes when shown', async () => {
  const timers = fakeTimers();
  const doc = fakeDocument('hidden');
  let ticks = 0;
  const p = new Poller(async () => { ticks += 1; }, { intervalMs: 5000, timers, visibility: doc });
  p.start();
  await timers.advance(60000);
  assert.equal(ticks, 0);
  doc.show('visible');
  await settle();
  assert.equal(ticks, 1);
  await timers.advance(5000);
  assert.equal(ticks, 2);
  doc.show('hidden');
  assert.deepEqual(timers.delays(), [], 'the pending poll is cancelled');
  await timers.advance(60000);
  assert.equal(ticks, 2);
  doc.show('visible');
  await settle();
  assert.equal(ticks, 3);
  // Left page: nothing more, even when the tab is shown again.
  p.stop();
  doc.show('hidden');
  doc.show('visible');
  await timers.advance(60000);
  assert.equal(ticks, 3);
});

test('a tick in flight when the page is left schedules nothing', async () => {
  const timers = fakeTimers();
  const d = deferred();
  const errors = [];
  const p = new Poller(() => d.promise, { intervalMs: 1000, timers, visibility: fakeDocument(),
    onError: (e) => errors.push(e) });
  p.start();
  p.stop();
  d.reject(new Error('late'));
  await settle();
  assert.deepEqual(timers.delays(), []);
  assert.deepEqual(errors, [], 'a left page shows no error');
});

function chunk(data, removed) {
  return { data, remove() { removed.push(this.data); } };
}

test('a followed log keeps its last lines within the limits', () => {
  const removed = [];
  const tail = new LogTail(100, 1000);
  const a = chunk('a'.repeat(39) + '\n' + 'b'.repeat(39) + '\n', removed);
  tail.push(a);
  assert.equal(tail.dropped, false);
  const b = chunk('c'.repeat(39) + '\n', removed);
  tail.push(b);  // 120 chars: the first line of `a` goes, on a line boundary
  assert.equal(a.data, 'b'.repeat(39) + '\n');
  assert.equal(tail.chars, 80);
  assert.equal(tail.dropped, true);
  tail.push(chunk('d'.repeat(99) + '\n', removed));  // 180: a and b go whole
  assert.deepEqual(removed, ['b'.repeat(39) + '\n', 'c'.repeat(39) + '\n']);
  assert.equal(tail.chars, 100);
  assert.equal(tail.chunks.length, 1);

  // A line limit as well: 5 lines at most.
  const lines = new LogTail(1 << 20, 5);
  const big = chunk('1\n2\n3\n4\n', []);
  lines.push(big);
  lines.push(chunk('5\n6\n7', []));
  assert.equal(big.data, '2\n3\n4\n');
  assert.equal(lines.lines, 5);
  lines.clear();
  assert.equal(lines.chars, 0);
  assert.equal(lines.dropped, false);

  // One chunk larger than the limit alone: its end is kept, from a line start.
  const huge = new LogTail(10, 100);
  const one = chunk('xxxxxxxxxxxxxxxx\nyy\nzz\n', []);
  huge.push(one);
  assert.equal(one.data, 'yy\nzz\n');
});

/** A tbody stand-in that records what is moved: moving a focused row blurs it
 * in a browser (the e2e test checks the real thing). */
function fakeTbody() {
  const tbody = { children: [], moves: 0 };
  const index = (row) => tbody.children.indexOf(row);
  Object.defineProperty(tbody, 'firstChild', { get: () => tbody.children[0] ?? null });
  tbody.insertBefore = (row, ref) => {
    if (index(row) >= 0) {
      tbody.moves += 1;
      tbody.children.splice(index(row), 1);
    }
    const at = ref ? index(ref) : tbody.children.length;
    tbody.children.splice(at, 0, row);
    row.parent = tbody;
  };
  const makeRow = (key) => {
    const row = { key, remove: () => tbody.children.splice(index(row), 1) };
    Object.defineProperty(row, 'nextSibling', { get: () => tbody.children[index(row) + 1] ?? null });
    return row;
  };
  return { tbody, makeRow };
}

test('rows are kept across refreshes and only moved when out of order', () => {
  const { tbody, makeRow } = fakeTbody();
  const cache = new Map();
  let created = 0;
  const updates = [];
  const create = (item) => {
    created += 1;
    return { row: makeRow(item.k), update: (x) => updates.push(x.v) };
  };
  const keys = () => tbody.children.map((r) => r.key);
  keyedRows(tbody, [{ k: 'a', v: 1 }, { k: 'b', v: 1 }, { k: 'c', v: 1 }], (x) => x.k, create, cache);
  assert.deepEqual(keys(), ['a', 'b', 'c']);
  const rowB = tbody.children[1];
  // The same rows again: nothing created, nothing moved, every row updated.
  keyedRows(tbody, [{ k: 'a', v: 2 }, { k: 'b', v: 2 }, { k: 'c', v: 2 }], (x) => x.k, create, cache);
  assert.equal(created, 3);
  assert.equal(tbody.moves, 0);
  assert.deepEqual(updates, [1, 1, 1, 2, 2, 2]);
  // One gone, one new at the top: b stays the same row, not moved.
  keyedRows(tbody, [{ k: 'd', v: 3 }, { k: 'b', v: 3 }, { k: 'c', v: 3 }], (x) => x.k, create, cache);
  assert.deepEqual(keys(), ['d', 'b', 'c']);
  assert.equal(tbody.children[1], rowB);
  assert.equal(tbody.moves, 0);
  assert.deepEqual([...cache.keys()].sort(), ['b', 'c', 'd']);
  // A reorder moves what it must.
  keyedRows(tbody, [{ k: 'c', v: 4 }, { k: 'b', v: 4 }, { k: 'd', v: 4 }], (x) => x.k, create, cache);
  assert.deepEqual(keys(), ['c', 'b', 'd']);
  keyedRows(tbody, [], (x) => x.k, create, cache);
  assert.deepEqual(keys(), []);
  assert.equal(cache.size, 0);
});
