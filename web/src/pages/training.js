// Training: the runs under the cluster's /fsx (TensorBoard directories and
// metrics JSONL files, HpodListTrainingRuns), a run's curves (HpodGetTrainingMetrics,
// polled while the page is open), and a job's goodput ledger (HpodDescribeJobGoodput).

import { badge, errorBox, field, h, replace, table } from '../lib/dom.js';
import { formatBytes, formatSeconds, formatTime } from '../lib/format.js';
import { href } from '../lib/router.js';
import { ChartSet } from './charts.js';

const MAX_POINTS = 1000;

function goodputSection(page, clusterName) {
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
      show(await page.api.call('HpodDescribeJobGoodput', { ClusterName: clusterName,
        JobId: jobId.value.trim() }));
    } catch (err) {
      replace(out, errorBox(err, 'goodput-error'));
    }
  } },
  h('h2', {}, 'Goodput of a job'),
  h('div', { class: 'grid' }, field('Slurm job id', jobId)),
  h('div', { class: 'actions' }, h('button', { type: 'submit', testid: 'goodput-submit' }, 'Show goodput')),
  out);
}

export function renderTraining(page, clusterName) {
  const runs = h('div', { testid: 'training-runs' }, 'Loading…');
  const plotTitle = h('h2', {}, 'Curves');
  const warnings = h('div');
  const chartsEl = h('div', { class: 'charts', testid: 'charts' });
  const charts = new ChartSet(chartsEl);
  page.onDispose(() => charts.destroy());
  let selected = null;
  let generation = 0;

  const plot = async () => {
    if (!selected) return;
    const mine = generation;
    try {
      const out = await page.api.call('HpodGetTrainingMetrics', { ClusterName: clusterName,
        Path: selected, MaxPoints: MAX_POINTS });
      if (page.disposed || mine !== generation) return;
      charts.update(out.Series || []);
      chartsEl.dataset.path = selected;
      replace(warnings, (out.Warnings || []).length ? h('ul', { class: 'warning', testid: 'metrics-warnings' },
        out.Warnings.map((w) => h('li', {}, w))) : null,
      (out.Series || []).length ? null : h('p', {}, 'No points in this run yet.'));
    } catch (err) {
      if (!page.disposed && mine === generation) replace(warnings, errorBox(err, 'metrics-error'));
    }
  };
  const choose = (path) => {
    selected = path;
    generation += 1;
    charts.update([]);
    replace(plotTitle, `Curves of ${path}`);
    plot();
  };

  page.poll(async () => {
    try {
      const out = await page.api.call('HpodListTrainingRuns', { ClusterName: clusterName });
      if (page.disposed) return;
      const list = out.TrainingRuns || [];
      const warned = (out.Warnings || []).length ? h('ul', { class: 'warning', testid: 'runs-warnings' },
        out.Warnings.map((w) => h('li', {}, w))) : null;
      replace(runs, warned, list.length ? table(['Path', 'Kind', 'Modified', 'Size', ''], list.map((r) => [
        r.Path, r.Kind || '', formatTime(r.LastModifiedTime), formatBytes(r.SizeBytes),
        h('button', { type: 'button', class: 'small', testid: 'plot-run', 'data-path': r.Path,
          'aria-pressed': String(selected === r.Path), onclick: () => choose(r.Path) }, 'Plot')]),
      { testid: 'training-runs-table' }) : h('p', {}, 'No training runs under /fsx yet (hpod-train ' +
        '--tensorboard-dir or --metrics-jsonl on /fsx).'));
    } catch (err) {
      if (!page.disposed) replace(runs, errorBox(err, 'runs-error'));
    }
  }, 10000);
  page.poll(plot, 5000);

  return h('section', { testid: 'page-training' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: href('clusters') }, 'Clusters'),
      ' / ', h('a', { href: href('cluster', clusterName) }, clusterName), ' / training'),
    h('h1', {}, `Training on ${clusterName}`),
    h('section', {}, h('h2', {}, 'Runs'), runs),
    h('section', {}, plotTitle, warnings, chartsEl),
    goodputSection(page, clusterName));
}
