// One node: details (DescribeClusterNode), its lifecycle or agent log
// (HpodGetNodeLogs, followed), a shell in the browser, and — for admins — a
// fault to inject (HpodInjectFault) to see hpod's recovery.

import { badge, errorBox, field, h, replace } from '../lib/dom.js';
import { formatTime } from '../lib/format.js';
import { LOG_MAX_CHARS, LOG_MAX_LINES, LogTail } from '../lib/logtail.js';
import { href } from '../lib/router.js';
import { sessionTarget } from '../lib/target.js';
import { openShell } from './shell.js';

// HpodFaultKind (src/api/hpod_extensions_model.json).
const FAULT_KINDS = ['kill-node', 'kill-agent', 'kill-slurmd', 'partition', 'hang', 'disk-full',
  'gpu-xid', 'flag-file'];
const LOG_LIMIT = 65536;

function logSection(page, clusterName, nodeId) {
  const pre = h('pre', { class: 'log', testid: 'node-log', tabindex: '0' });
  const note = h('div');
  const trimmed = h('p', { class: 'hint', testid: 'log-trimmed', hidden: true },
    `Showing the end of the log only (the last ${LOG_MAX_CHARS >> 20} MiB or ` +
    `${LOG_MAX_LINES.toLocaleString('en')} lines); earlier lines were dropped.`);
  const tail = new LogTail();
  const stream = h('select', { testid: 'log-stream' },
    h('option', { value: 'LifecycleConfig' }, 'Lifecycle scripts'), h('option', { value: 'Agent' }, 'Agent'));
  let token = '';
  let generation = 0;
  stream.addEventListener('change', () => {
    generation += 1;
    token = '';
    tail.clear();
    trimmed.hidden = true;
  });
  const refresh = async () => {
    const mine = generation;
    try {
      const req = { ClusterName: clusterName, NodeId: nodeId, Stream: stream.value, Limit: LOG_LIMIT };
      if (token) req.NextToken = token;
      const out = await page.api.call('HpodGetNodeLogs', req);
      if (page.disposed || mine !== generation) return;
      if (out.Data) {
        const chunk = document.createTextNode(out.Data);
        pre.append(chunk);
        tail.push(chunk);
        trimmed.hidden = !tail.dropped;
      }
      if (out.NextToken) token = out.NextToken;
      replace(note);
    } catch (err) {
      if (!page.disposed && mine === generation) replace(note, errorBox(err, 'log-error'));
    }
  };
  page.poll(refresh, 3000);
  return h('section', {}, h('h2', {}, 'Log'), field('Stream', stream), note, trimmed, pre);
}

function faultSection(page, clusterName, nodeId) {
  const kind = h('select', { testid: 'fault-kind' }, FAULT_KINDS.map((k) => h('option', { value: k }, k)));
  const seconds = h('input', { type: 'number', min: '1', testid: 'fault-seconds',
    placeholder: 'default' });
  const status = h('div', { 'aria-live': 'polite' });
  const button = h('button', { type: 'submit', class: 'danger', testid: 'fault-submit' }, 'Inject fault');
  return h('form', { class: 'panel', testid: 'fault-form', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    button.disabled = true;
    const req = { ClusterName: clusterName, NodeId: nodeId, Kind: kind.value };
    if (seconds.value) req.Seconds = Number(seconds.value);
    try {
      const out = await page.api.call('HpodInjectFault', req);
      replace(status, h('p', { role: 'status', testid: 'fault-result' },
        `Injected ${out.Kind} on ${out.NodeId} at ${formatTime(out.InjectedTime)}. `,
        h('a', { href: href('cluster', clusterName), testid: 'fault-cluster-link' },
          'Watch the recovery on the cluster page')));
    } catch (err) {
      replace(status, errorBox(err, 'fault-error'));
    } finally {
      button.disabled = false;
    }
  } },
  h('h2', {}, 'Inject a fault'),
  h('p', {}, 'For testing recovery: hpod detects the fault and replaces or reboots the node.'),
  h('div', { class: 'grid' }, field('Kind', kind), field('Seconds (partition, hang)', seconds)),
  h('div', { class: 'actions' }, button), status);
}

export function renderNode(page, clusterName, nodeId) {
  const details = h('dl', { class: 'summary', testid: 'node-details' }, 'Loading…');
  const statusBadge = h('span', { testid: 'node-status' });
  const error = h('div');
  const shellStatus = h('div', { class: 'status-line', testid: 'shell-status', 'aria-live': 'polite' });
  const terminal = h('div', { class: 'terminal', testid: 'terminal' });
  let shell = null;
  let target = null;
  const openButton = h('button', { type: 'button', testid: 'open-shell', disabled: true, onclick: () => {
    if (shell) shell.close();
    replace(terminal);
    shell = openShell(page, terminal, shellStatus, target);
    closeButton.disabled = false;
  } }, 'Open shell');
  const closeButton = h('button', { type: 'button', class: 'secondary', testid: 'close-shell',
    disabled: true, onclick: () => {
      if (shell) shell.close();
      shell = null;
      replace(terminal);
      replace(shellStatus, 'Closed.');
      closeButton.disabled = true;
    } }, 'Close shell');

  const refresh = async () => {
    try {
      const [cluster, out] = await Promise.all([
        page.api.call('DescribeCluster', { ClusterName: clusterName }),
        page.api.call('DescribeClusterNode', { ClusterName: clusterName, NodeId: nodeId }),
      ]);
      if (page.disposed) return;
      const n = out.NodeDetails || {};
      target = sessionTarget(cluster.ClusterArn, n.InstanceGroupName, n.InstanceId);
      openButton.disabled = false;
      replace(error);
      replace(statusBadge, badge(n.InstanceStatus?.Status));
      const term = (k, v) => [h('dt', {}, k), h('dd', {}, v ?? '—')];
      replace(details, term('Group', n.InstanceGroupName), term('Instance type', n.InstanceType),
        term('Status message', n.InstanceStatus?.Message || '—'),
        term('Hostname', n.PrivateDnsHostname), term('IP', n.PrivatePrimaryIp),
        term('Launched', formatTime(n.LaunchTime)),
        term('Lifecycle', n.LifeCycleConfig ? `${n.LifeCycleConfig.SourceS3Uri || ''} ${n.LifeCycleConfig.OnCreate || ''}` : '—'));
    } catch (err) {
      if (!page.disposed) replace(error, errorBox(err, 'node-error'));
    }
  };
  page.poll(refresh, 5000);

  return h('section', { testid: 'page-node' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: href('clusters') }, 'Clusters'),
      ' / ', h('a', { href: href('cluster', clusterName), testid: 'back-to-cluster' }, clusterName), ' / ', nodeId),
    h('div', { class: 'title-row' }, h('h1', {}, nodeId), statusBadge),
    error, details,
    h('section', {}, h('h2', {}, 'Shell'), h('div', { class: 'actions' }, openButton, closeButton),
      shellStatus, terminal),
    page.isAdmin ? faultSection(page, clusterName, nodeId) : null,
    logSection(page, clusterName, nodeId));
}
