// Training: the runs under the cluster's /fsx (TensorBoard directories and
// metrics JSONL files, HpodListTrainingRuns), a run's curves (HpodGetTrainingMetrics,
// polled while the page is open), and a job's goodput ledger (HpodDescribeJobGoodput).
//
// Every request of this page goes through one Poller chain: reading event files
// is the costliest thing hpodd does for the console, and it refuses a second
// training query at once (ThrottlingException), so the page never has two in
// flight, waits longer after each failure, and stops while the tab is hidden.

import { ApiError } from '../lib/api.js';
import { badge, errorBox, field, h, keyedRows, replace, table } from '../lib/dom.js';
import { formatBytes, formatSeconds, formatTime } from '../lib/format.js';
import { href } from '../lib/router.js';
import { ChartSet } from './charts.js';

const MAX_POINTS = 1000;
const PLOT_MS = 5000;  // the chain's interval: the selected run's curves
const LIST_MS = 10000;  // the runs list, every other tick

function throttled(err) {
  return err instanceof ApiError && err.type === 'ThrottlingException';
}

/** A failed request of the chain: hpodd being busy is said calmly (it is
 * retried), anything else as the API gave it. */
function problem(err, testid, retryInMs) {
  const retry = `retrying in ${Math.round(retryInMs / 1000)} s`;
  if (throttled(err)) {
    return h('p', { class: 'notice', role: 'status', testid: 'training-busy' },
      `hpodd is busy with another training query; ${retry}.`);
  }
  return [errorBox(err, testid), h('p', { class: 'hint' }, `Failed; ${retry}.`)];
}
function goodputSection(page, clusterName, chain) {
  const jobId = h('input', { type: 'text', inputmode: 'numeric', autocomplete: 'off',
    testid: 'goodput-job-id' });
  const out = h('div', { 'aria-live': 'polite' });
  const pct = (x) => (typeof x === 'number' ? `${(x * 100).toFixed(1)} %` : '—');
  const show = (r) => {
    const g = r.Goodput || {};
    const term = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
    replace(out, h('div', { testid: 'goodput-result' },
      h('dl', { class: 'summary' }, term('Job', r.JobId), term('Finished', r.Finished ? 'yes' : 'no'),
        term('Attempts', String(r.Attempts ?? '—')), term('Goodput', pct(g.goodput)),
        term('Wall time', formatSeconds(g.wall_s)), term('Useful step time', formatSeconds(g.useful_step_s)),
        term('Useful steps', String(g.useful_steps ?? '—')), term('Steps re-run', String(g.steps_rerun ?? '—')),
        term('Final step', String(g.final_step ?? '—'))),
      (r.Failures || []).length ? table(['Host', 'Action', 'Check / reason', 'Detection', 'Replacement',
        'Fault → first step', 'Steps re-run', 'Status'], r.Failures.map((f) => [f.Hostname || '',
        f.Action || '', [f.Check, f.Reason].filter(Boolean).join(': '), formatSeconds(f.DetectionSeconds),
        formatSeconds(f.ReplacementSeconds), formatSeconds(f.FaultToFirstStepSeconds),
        String(f.StepsRerun ?? '—'), badge(f.Status)])) : h('p', {}, 'No failures.'),
      (r.Events || []).length ? h('details', {}, h('summary', {}, `${r.Events.length} job events`),
        table(['Time', 'Event', 'Step', 'Attempt', 'Message'], r.Events.map((e) => [formatTime(e.Time),
          e.Event || '', e.StepId || '', String(e.Attempt ?? ''), e.Message || '']))) : null));
  };
  return h('form', { class: 'panel', testid: 'goodput-form', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    replace(out, 'Loading…');
    try {
      const r = await chain.run(() => page.api.call('HpodDescribeJobGoodput', {
        ClusterName: clusterName, JobId: jobId.value.trim() }));
      if (!page.disposed) show(r);
    } catch (err) {
      if (page.disposed) return;
      replace(out, throttled(err) ? h('p', { class: 'notice', role: 'status', testid: 'goodput-busy' },
        'hpodd is busy with another training query; try again in a moment.')
        : errorBox(err, 'goodput-error'));
    }
  } },
  h('h2', {}, 'Goodput of a job'),
  h('div', { class: 'grid' }, field('Slurm job id', jobId)),
  h('div', { class: 'actions' }, h('button', { type: 'submit', testid: 'goodput-submit' }, 'Show goodput')),
  out);
}

function runsSection(choose) {
  const tableEl = table(['Path', 'Kind', 'Modified', 'Size', ''], [], { testid: 'training-runs-table' });
  const tbody = tableEl.querySelector('tbody');
  const rows = new Map();
  const status = h('div', { 'aria-live': 'polite' });
  const list = h('div', { testid: 'training-runs' }, 'Loading…');
  const warnings = h('div');
  // Rows kept across polls (keyedRows): a focused Plot button keeps the focus.
  const create = (r) => {
    const button = h('button', { type: 'button', class: 'small', testid: 'plot-run', 'data-path': r.Path,
      'aria-pressed': 'false', 'aria-label': `Plot ${r.Path}`, onclick: () => choose(r.Path) }, 'Plot');
    const cells = Array.from({ length: 3 }, () => h('td'));
    const row = h('tr', {}, h('td', { class: 'path' }, r.Path), ...cells, h('td', {}, button));
    return { row, button, update(x) {
      replace(cells[0], x.Kind || '');
      replace(cells[1], formatTime(x.LastModifiedTime));
      replace(cells[2], formatBytes(x.SizeBytes));
    } };
  };
  return {
    el: h('section', {}, h('h2', {}, 'Runs'), status, warnings, list),
    status,
    update(out) {
      const runs = out.TrainingRuns || [];
      replace(status);
      replace(warnings, (out.Warnings || []).length ? h('ul', { class: 'warning', testid: 'runs-warnings' },
        out.Warnings.map((w) => h('li', {}, w))) : null);
      keyedRows(tbody, runs, (r) => r.Path, create, rows);
      if (!runs.length) {
        replace(list, h('p', {}, 'No training runs under /fsx yet (hpod-train --tensorboard-dir or ' +
          '--metrics-jsonl on /fsx).'));
      } else if (list.firstChild !== tableEl) {
        replace(list, tableEl);
      }
    },
    select(path) {
      for (const [key, entry] of rows) entry.button.setAttribute('aria-pressed', String(key === path));
    },
  };
}

export function renderTraining(page, clusterName) {
  const plotTitle = h('h2', {}, 'Curves');
  const warnings = h('div', { 'aria-live': 'polite' });
  const chartsEl = h('div', { class: 'charts', testid: 'charts' });
  const charts = new ChartSet(chartsEl);
  page.onDispose(() => charts.destroy());
  let selected = null;
  let generation = 0;
  let listedAt = -Infinity;
  let stage = 'runs';

  const listRuns = async () => {
    const out = await page.api.call('HpodListTrainingRuns', { ClusterName: clusterName });
    if (page.disposed) return;
    runs.update(out);
    runs.select(selected);
  };
  const plot = async () => {
    const mine = generation;
    const path = selected;
    const out = await page.api.call('HpodGetTrainingMetrics', { ClusterName: clusterName,
      Path: path, MaxPoints: MAX_POINTS });
    if (page.disposed || mine !== generation) return;
    charts.update(out.Series || []);
    chartsEl.dataset.path = path;
    replace(warnings, (out.Warnings || []).length ? h('ul', { class: 'warning', testid: 'metrics-warnings' },
      out.Warnings.map((w) => h('li', {}, w))) : null,
    (out.Series || []).length ? null : h('p', {}, 'No points in this run yet.'));
  };
  // One tick: the runs list when it is due, then the selected run's curves, one
  // request after the other.
  const tick = async () => {
    if (Date.now() - listedAt >= LIST_MS) {
      stage = 'runs';
      await listRuns();
      listedAt = Date.now();
    }
    if (selected) {
      stage = 'metrics';
      await plot();
    }
  };
  const choose = (path) => {
    selected = path;
    generation += 1;
    charts.update([]);
    replace(warnings);
    replace(plotTitle, `Curves of ${path}`);
    runs.select(path);
    chain.wake();
  };
  const runs = runsSection(choose);
  const chain = page.poller(tick, { intervalMs: PLOT_MS, maxDelayMs: 60000, onError: (err, retryInMs) => {
    if (page.disposed) return;
    if (stage === 'runs') replace(runs.status, problem(err, 'runs-error', retryInMs));
    else replace(warnings, problem(err, 'metrics-error', retryInMs));
  } });

  return h('section', { testid: 'page-training' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: href('clusters') }, 'Clusters'),
      ' / ', h('a', { href: href('cluster', clusterName) }, clusterName), ' / training'),
    h('h1', {}, `Training on ${clusterName}`),
    runs.el,
    h('section', {}, plotTitle, warnings, chartsEl),
    goodputSection(page, clusterName, chain));
}
