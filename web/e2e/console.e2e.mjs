// The console in a real browser: Debian's chromium, headless, driven by
// playwright-core (no browser download), against a real hpodd.
//
// tests/e2e/test_console.py starts hpodd with real nodes and runs this script as a
// child; it sends one JSON line per step on stdin ({"step": NAME, ...args}) and
// reads one JSON line per step on stdout ({"step", "ok", "result"} or {"step",
// "ok": false, "error"}), so that between steps it can look at the cluster itself
// (start a training run, check metrics). Progress goes to stderr. Every step saves
// a screenshot NN-NAME.png in $HPOD_TEST_ARTIFACTS (or build/test-artifacts/console).
//
//   HPOD_CONSOLE_URL   the console (hpodd's endpoint)
//   CHROMIUM           the browser (default /usr/bin/chromium)
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.HPOD_CONSOLE_URL;
if (!base) throw new Error('HPOD_CONSOLE_URL is not set');
const artifacts = process.env.HPOD_TEST_ARTIFACTS ||
  path.join(here, '..', '..', 'build', 'test-artifacts', 'console');
mkdirSync(artifacts, { recursive: true });

const log = (...a) => console.error('[console.e2e]', ...a);
const sel = (id) => `[data-testid="${id}"]`;

const profile = mkdtempSync(path.join(os.tmpdir(), 'hpod-console-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 800 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);

// What the page said: CSP violations (recorded in the page, before any of its own
// scripts run, with where the blocked element sits: "xterm" inside the terminal
// widget), uncaught errors and console errors.
const problems = { csp: new Map(), errors: [] };
await page.exposeBinding('__hpodE2eCsp', (_src, v) => problems.csp.set(JSON.stringify(v), v));
await page.addInitScript(() => {
  document.addEventListener('securitypolicyviolation', (e) => {
    const t = e.target;
    const where = t instanceof Element ? (t.closest('.xterm') ? 'xterm' : t.tagName.toLowerCase())
      : 'document';
    window.__hpodE2eCsp({ directive: e.violatedDirective, blocked: e.blockedURI || 'inline', where,
      source: e.sourceFile ? `${e.sourceFile.split('/').pop()}:${e.lineNumber}` : '' });
  });
});
page.on('pageerror', (e) => problems.errors.push(`pageerror: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error') log('browser console:', m.text());
});

let shotCount = 0;
async function screenshot(name, opts = {}) {
  shotCount += 1;
  const file = path.join(artifacts, `${String(shotCount).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true, ...opts });
  return file;
}

async function waitFor(what, fn, timeoutMs, intervalMs = 500) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await page.waitForTimeout(intervalMs);
  }
}

/** A full-page screenshot at a narrow window (400 px), then back to 1280×800. */
async function narrowScreenshot(name) {
  await page.setViewportSize({ width: 400, height: 800 });
  await page.waitForTimeout(300);  // charts and the terminal refit on resize
  const file = await screenshot(name);
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.waitForTimeout(100);
  return file;
}

/**
 * Focuses `selector`, waits until the page's next poll has rewritten something
 * inside `region` (a MutationObserver), and says what has the focus then: the
 * focused element's data-testid, or its tag when it lost the focus ("BODY").
 */
async function focusAfterRefresh(selector, region, timeoutMs = 15000) {
  await page.focus(selector);
  const before = await page.evaluate(() => document.activeElement?.dataset?.testid || '');
  await page.evaluate(([r, ms]) => new Promise((resolve, reject) => {
    const target = document.querySelector(r);
    if (!target) reject(new Error(`no ${r} on the page`));
    const timer = setTimeout(() => reject(new Error(`${r} was not refreshed in ${ms} ms`)), ms);
    const mo = new MutationObserver(() => {
      mo.disconnect();
      clearTimeout(timer);
      resolve();
    });
    mo.observe(target, { childList: true, subtree: true, characterData: true });
  }), [region, timeoutMs]);
  const after = await page.evaluate(() => document.activeElement?.dataset?.testid ||
    document.activeElement?.tagName || '');
  return { before, after };
}

async function go(hash, testid) {
  await page.evaluate((h) => { window.location.hash = h; }, hash);
  await page.waitForSelector(sel(testid));
}

/** The terminal's screen and scrollback as lines of text (xterm's rows). */
async function terminalLines() {
  return page.evaluate(() => [...document.querySelectorAll('.xterm-rows > div')]
    .map((d) => d.textContent.replace(/\u00a0/g, ' ').trimEnd()));
}

const steps = {
  async open() {
    await page.goto(base + '/');
    await page.waitForSelector(sel('signin-form'));
    return { title: await page.title() };
  },

  // Signs out when signed in, then in with the key; `refused` expects the API's
  // error on the sign-in form.
  async signin({ keyId, secret, region = 'us-west-2', refused = false, shot = 'signin' }) {
    if (await page.$(sel('signout'))) await page.click(sel('signout'));
    await page.waitForSelector(sel('signin-form'));
    await page.fill(sel('signin-key-id'), keyId);
    await page.fill(sel('signin-secret'), secret);
    await page.fill(sel('signin-region'), region);
    await page.click(sel('signin-submit'));
    if (refused) {
      const text = await (await page.waitForSelector(sel('signin-error'))).textContent();
      await screenshot(shot);
      const stored = await page.evaluate(() => sessionStorage.length);
      return { error: text, stored };
    }
    await page.waitForSelector(sel('page-clusters'));
    const identity = await page.textContent(sel('identity'));
    const storage = await page.evaluate(() => ({ session: Object.keys(sessionStorage),
      local: localStorage.length, cookies: document.cookie }));
    await page.waitForTimeout(300);
    await screenshot(shot);
    return { identity, storage };
  },

  async create_cluster({ name, groups, nodeRecovery = 'Automatic' }) {
    await page.click(sel('nav-create'));
    await page.waitForSelector(sel('create-form'));
    await page.fill(sel('create-name'), name);
    await page.selectOption(sel('create-node-recovery'), nodeRecovery);
    for (let i = 0; i < groups.length; i += 1) {
      if (i > 0) await page.click(sel('add-group'));
      const g = groups[i];
      await page.fill(sel(`group-${i}-name`), g.name);
      await page.fill(sel(`group-${i}-type`), g.instanceType);
      await page.fill(sel(`group-${i}-count`), String(g.count));
      await page.fill(sel(`group-${i}-source`), g.source);
      await page.fill(sel(`group-${i}-oncreate`), g.onCreate);
      if (g.slurm) await page.selectOption(sel(`group-${i}-slurm`), g.slurm);
      if (g.partition) await page.fill(sel(`group-${i}-partition`), g.partition);
    }
    await screenshot('create-form');
    await page.click(sel('create-submit'));
    await page.waitForSelector(sel('page-cluster'));
    return { url: page.url() };
  },

  // On the cluster page: until the cluster has `status` and `nodes` Running nodes.
  async wait_cluster({ name, status = 'InService', nodes, timeoutS = 240, shot = 'cluster' }) {
    if (!page.url().endsWith(`#/clusters/${name}`)) await go(`#/clusters/${name}`, 'page-cluster');
    const rows = await waitFor(`${name} ${status} with ${nodes} running nodes`, async () => {
      const s = await page.getAttribute(sel('cluster-status'), 'data-status');
      if (s === 'Failed') throw new Error(`cluster ${name} Failed: ${await page.textContent('main')}`);
      const r = await page.$$eval(`${sel('nodes-table')} tbody tr`, (trs) => trs.map((tr) =>
        [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      const running = r.filter((cells) => cells.some((c) => c.startsWith('Running')));
      return s === status && running.length === nodes && r.length === nodes ? r : null;
    }, timeoutS * 1000, 1000);
    await screenshot(shot);
    return { rows };
  },

  // A shell on the node; types `command` and waits for a line that is exactly `expect`.
  async shell({ cluster, nodeId, command, expect, timeoutS = 60 }) {
    await go(`#/clusters/${cluster}/nodes/${nodeId}`, 'page-node');
    await page.waitForSelector(`${sel('open-shell')}:not([disabled])`);
    await page.click(sel('open-shell'));
    await page.waitForSelector(`${sel('shell-status')}[data-state="open"]`, { timeout: timeoutS * 1000 });
    // The shell's prompt first, so that the typed line is read by the shell.
    await waitFor('a prompt', async () => (await terminalLines()).some((l) => /[#$] ?$/.test(l)),
      timeoutS * 1000, 200);
    await page.click(sel('terminal'));
    await page.keyboard.type(command);
    await page.keyboard.press('Enter');
    const lines = await waitFor(`a line "${expect}" in the terminal`, async () => {
      const l = await terminalLines();
      return l.includes(expect) ? l : null;
    }, timeoutS * 1000, 200);
    await screenshot('node-shell');
    await page.setViewportSize({ width: 400, height: 800 });
    await screenshot('node-shell-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
    return { lines: lines.filter(Boolean) };
  },

  async scale({ cluster, group, count, nodes, timeoutS = 240 }) {
    await go(`#/clusters/${cluster}`, 'page-cluster');
    await page.waitForSelector(sel(`scale-input-${group}`));
    await page.fill(sel(`scale-input-${group}`), String(count));
    await page.click(sel(`scale-button-${group}`));
    const started = await Promise.race([
      page.waitForSelector(sel('scale-started')).then((e) => e.textContent()),
      page.waitForSelector(sel('scale-error')).then(async (e) => {
        throw new Error(`UpdateCluster refused: ${await e.textContent()}`);
      }),
    ]);
    await waitFor(`${group} at ${count} / ${count}`, async () =>
      (await page.textContent(sel(`group-count-${group}`))) === `${count} / ${count}`, timeoutS * 1000, 1000);
    const after = await steps.wait_cluster({ name: cluster, nodes, timeoutS, shot: 'cluster-scaled' });
    return { started, rows: after.rows };
  },

  // Injects a fault from the node page, then follows its recovery on the cluster
  // page until the timeline shows it finished.
  async inject_fault({ cluster, nodeId, kind = 'kill-node', timeoutS = 240 }) {
    await go(`#/clusters/${cluster}/nodes/${nodeId}`, 'page-node');
    await page.selectOption(sel('fault-kind'), kind);
    await page.click(sel('fault-submit'));
    const result = await Promise.race([
      page.waitForSelector(sel('fault-result')).then((e) => e.textContent()),
      page.waitForSelector(sel('fault-error')).then(async (e) => {
        throw new Error(`HpodInjectFault refused: ${await e.textContent()}`);
      }),
    ]);
    await screenshot('fault-injected');
    await page.click(sel('fault-cluster-link'));
    await page.waitForSelector(sel('page-cluster'));
    const button = await waitFor(`a recovery of ${nodeId}`, async () => {
      const rows = await page.$$(`${sel('recoveries-table')} tbody tr`);
      for (const row of rows) {
        if ((await row.textContent()).includes(nodeId)) return row.$('button');
      }
      return null;
    }, timeoutS * 1000, 1000);
    await button.click();
    await page.waitForSelector(sel('recovery-timeline'));
    await page.locator(sel('recovery-timeline')).scrollIntoViewIfNeeded();
    await screenshot('recovery-timeline-started', { fullPage: false });
    const status = await waitFor('the recovery to finish', async () => {
      const s = await page.getAttribute(sel('recovery-timeline'), 'data-status');
      return s && s !== 'InProgress' ? s : null;
    }, timeoutS * 1000, 1000);
    const timeline = await page.$$eval(sel('timeline-step'), (li) => li.map((x) => x.textContent));
    await page.locator(sel('recovery-timeline')).scrollIntoViewIfNeeded();
    await screenshot('recovery-timeline', { fullPage: false });
    return { injected: result, status, timeline };
  },

  // The training page: the run whose path contains `path`, plotted.
  async training({ cluster, path: want, minPoints = 2, timeoutS = 60 }) {
    await go(`#/clusters/${cluster}`, 'page-cluster');
    await page.click(sel('training-link'));
    await page.waitForSelector(sel('page-training'));
    const button = await waitFor(`a run ${want}`, async () => {
      for (const b of await page.$$(sel('plot-run'))) {
        if ((await b.getAttribute('data-path')).includes(want)) return b;
      }
      const err = await page.$(sel('runs-error'));
      if (err) throw new Error(`HpodListTrainingRuns failed: ${await err.textContent()}`);
      return null;
    }, timeoutS * 1000, 1000);
    const runPath = await button.getAttribute('data-path');
    await button.click();
    const points = await waitFor(`the loss curve with ${minPoints}+ points`, async () => {
      const err = await page.$(sel('metrics-error'));
      if (err) throw new Error(`HpodGetTrainingMetrics failed: ${await err.textContent()}`);
      const n = Number(await page.getAttribute(sel('chart-train-loss'), 'data-points').catch(() => 0));
      return n >= minPoints ? n : null;
    }, timeoutS * 1000, 500);
    const charts = await page.$$eval('figure.chart', (f) => f.map((x) => [x.dataset.tag, Number(x.dataset.points)]));
    const canvas = await page.$eval(`${sel('chart-train-loss')} canvas`, (c) => [c.width, c.height]);
    await page.waitForTimeout(300);
    await screenshot('training');
    await narrowScreenshot('training-narrow');
    return { path: runPath, points, charts, canvas };
  },

  // As a user key: no delete (nor create, scale, fault) anywhere it would be.
  async user_view({ cluster, nodeId }) {
    await go('#/clusters', 'page-clusters');
    await page.waitForSelector(sel(`cluster-row-${cluster}`));
    const found = [];
    const absent = async (id) => {
      if (await page.$(sel(id))) found.push(id);
    };
    await absent(`delete-cluster-${cluster}`);
    await absent('nav-create');
    await absent('create-cluster-link');
    await screenshot('user-clusters');
    await go(`#/clusters/${cluster}`, 'page-cluster');
    await page.waitForSelector(`${sel('nodes-table')} tbody tr`);
    for (const id of ['delete-cluster', 'delete-nodes']) await absent(id);
    for (const e of await page.$$('[data-testid^="scale-button-"]')) found.push(await e.getAttribute('data-testid'));
    await screenshot('user-cluster');
    await go(`#/clusters/${cluster}/nodes/${nodeId}`, 'page-node');
    await absent('fault-form');
    // Reaching the create page by its address shows no form either.
    await go('#/create', 'create-forbidden');
    await absent('create-form');
    // And the API itself refuses: a DeleteCluster signed with this key by the
    // console's own client (the bundle's exports, imported again: the same module).
    const deleteCall = await page.evaluate(async (name) => {
      const bundle = await import(document.querySelector('script[type="module"]').src);
      const client = new bundle.ApiClient(bundle.loadCredentials(), window.location);
      try {
        return { ok: true, result: await client.call('DeleteCluster', { ClusterName: name }) };
      } catch (e) {
        return { ok: false, type: e.type, status: e.status, message: e.message };
      }
    }, cluster);
    return { shown: found, deleteCall };
  },

  async delete_cluster({ name, timeoutS = 180 }) {
    await go('#/clusters', 'page-clusters');
    await page.click(sel(`delete-cluster-${name}`));
    await page.waitForSelector(sel('delete-panel'));
    await page.fill(sel('delete-confirm-input'), name.slice(0, -1));
    const disabledWhenWrong = await page.isDisabled(sel('delete-confirm-button'));
    await page.fill(sel('delete-confirm-input'), name);
    const enabledWhenRight = await page.isEnabled(sel('delete-confirm-button'));
    await screenshot('delete-confirm');
    await page.click(sel('delete-confirm-button'));
    await page.waitForSelector(sel('delete-started'));
    await waitFor(`${name} gone from the list`, async () => !(await page.$(sel(`cluster-row-${name}`))),
      timeoutS * 1000, 1000);
    await screenshot('deleted');
    return { disabledWhenWrong, enabledWhenRight };
  },

  // The hosts list (issue 26), reached from the nav: its heading, then either the
  // table or, with no host joined (the e2e cluster's nodes are local, not joined
  // machines), the one-line hint on how to join one. An API error fails the step.
  async hosts({ shot = 'hosts' } = {}) {
    await page.click(sel('nav-hosts'));
    await page.waitForSelector(sel('page-hosts'));
    const heading = await page.textContent(`${sel('page-hosts')} h1`);
    const shown = await page.waitForSelector(
      [sel('hosts-table'), sel('no-hosts'), sel('hosts-error')].join(', '));
    const testid = await shown.getAttribute('data-testid');
    if (testid === 'hosts-error') throw new Error(`HpodListHosts failed: ${await shown.textContent()}`);
    const result = { heading, url: page.url(), empty: testid === 'no-hosts', hint: null, rows: [] };
    if (result.empty) {
      result.hint = await shown.textContent();
      if (!result.hint.startsWith('No hosts yet.') || !result.hint.includes('hpod create-join-token')) {
        throw new Error(`unexpected empty-list hint: ${result.hint}`);
      }
    } else {
      result.rows = await page.$$eval(`${sel('hosts-table')} tbody tr`, (trs) => trs.map((tr) =>
        [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      if (!result.rows.length) throw new Error('the hosts table has no rows');
    }
    await screenshot(shot);
    return result;
  },

  async screenshot({ name }) {
    return { file: await screenshot(name) };
  },

  // Tables with buttons keep their rows across polls: what has the focus before
  // a refresh has it after. Also: a malformed address falls back to the list.
  async focus_kept({ cluster }) {
    await go('#/clusters/%E0', 'page-clusters');
    const kept = {};
    await page.waitForSelector(sel(`delete-cluster-${cluster}`));
    kept.clusters = await focusAfterRefresh(sel(`delete-cluster-${cluster}`), sel('clusters-table'));
    await narrowScreenshot('clusters-narrow');
    await go(`#/clusters/${cluster}`, 'page-cluster');
    const recovery = await page.waitForSelector(`${sel('recoveries-table')} tbody button`);
    const recoveryId = await recovery.getAttribute('data-testid');
    // The nodes table is refreshed by the same poll, just before the recoveries:
    // its rows must be the same elements afterwards (a focused checkbox stays).
    const rows = `${sel('nodes-table')} tbody tr`;
    await page.$$eval(rows, (trs) => trs.forEach((tr) => { tr.hpodE2eKept = true; }));
    kept.recovery = await focusAfterRefresh(sel(recoveryId), sel('recoveries'));
    const nodeRows = await page.$$eval(rows, (trs) => trs.map((tr) => tr.hpodE2eKept === true));
    kept.nodes = { before: 'all rows', after: nodeRows.every(Boolean) && nodeRows.length ? 'all rows'
      : `rows rebuilt: ${JSON.stringify(nodeRows)}` };
    await narrowScreenshot('cluster-narrow');
    return kept;
  },

  async problems() {
    return { csp: [...problems.csp.values()], errors: problems.errors };
  },
};

async function close() {
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}

const input = readline.createInterface({ input: process.stdin });
for await (const line of input) {
  if (!line.trim()) continue;
  const { step, ...args } = JSON.parse(line);
  if (step === 'quit') break;
  const started = Date.now();
  let reply;
  try {
    if (!steps[step]) throw new Error(`unknown step ${step}`);
    log(`step ${step}`);
    reply = { step, ok: true, result: await steps[step](args) };
  } catch (err) {
    let shot = null;
    try {
      shot = await screenshot(`FAILED-${step}`);
    } catch {
      // The page itself may be gone.
    }
    reply = { step, ok: false, error: String(err && err.stack || err), screenshot: shot,
      page: await page.textContent('main').catch(() => '') };
  }
  reply.seconds = (Date.now() - started) / 1000;
  process.stdout.write(JSON.stringify(reply) + '\n');
}
await close();
