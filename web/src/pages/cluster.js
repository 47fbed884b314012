// A cluster's page: summary, instance groups (scale), nodes (status, hostname,
// IP, Slurm state, health; delete), recoveries with their timelines, and live
// events. Everything is polled while the page is open.

import { badge, errorBox, h, keyedRows, replace } from '../lib/dom.js';
import { formatTime } from '../lib/format.js';
import { scaleRequest } from '../lib/groups.js';
import { nodeRows } from '../lib/nodes.js';
import { href } from '../lib/router.js';
import { deleteClusterPanel } from './delete.js';
import { eventsSection } from './events.js';
import { recoveriesSection } from './recoveries.js';

const POLL_MS = 3000;

function thead(...names) {
  return h('thead', {}, h('tr', {}, names.filter(Boolean).map((n) => h('th', { scope: 'col' }, n))));
}

function groupsSection(page, state) {
  const tbody = h('tbody');
  const status = h('div', { 'aria-live': 'polite' });
  const cache = new Map();
  const create = (g) => {
    const name = g.InstanceGroupName;
    const cells = { type: h('td'), slurm: h('td'), count: h('td'), status: h('td') };
    const input = h('input', { type: 'number', min: '0', class: 'count', 'aria-label':
      `New instance count for ${name}`, testid: `scale-input-${name}` });
    const button = h('button', { type: 'button', class: 'small', testid: `scale-button-${name}`,
      onclick: async () => {
        button.disabled = true;
        replace(status, `Scaling ${name} to ${input.value}…`);
        try {
          await page.api.call('UpdateCluster', scaleRequest(state.cluster, name, input.value));
          replace(status, h('span', { role: 'status', testid: 'scale-started' },
            `Instance group ${name} is being scaled to ${input.value}.`));
          input.value = '';
        } catch (err) {
          replace(status, errorBox(err, 'scale-error'));
        } finally {
          button.disabled = false;
        }
      } }, 'Scale');
    const row = h('tr', { testid: `group-row-${name}` }, h('td', {}, name), cells.type,
      cells.slurm, cells.count, cells.status,
      page.isAdmin ? h('td', { class: 'nowrap' }, input, ' ', button) : null);
    return { row, update(x) {
      replace(cells.type, x.InstanceType || '—');
      const sc = x.SlurmConfig;
      replace(cells.slurm, sc ? sc.NodeType + (sc.PartitionNames?.length ? ` (${sc.PartitionNames.join(', ')})` : '') : '—');
      replace(cells.count, `${x.CurrentCount ?? 0} / ${x.TargetCount ?? 0}`);
      cells.count.dataset.testid = `group-count-${name}`;
      replace(cells.status, badge(x.Status));
    } };
  };
  const el = h('section', { testid: 'groups' }, h('h2', {}, 'Instance groups'),
    h('div', { class: 'table-wrap' }, h('table', {},
      thead('Group', 'Instance type', 'Slurm', 'Running / target', 'Status', page.isAdmin && 'Scale'),
      tbody)), status);
  return { el, update(groups) {
    keyedRows(tbody, groups, (g) => g.InstanceGroupName, create, cache);
  } };
}

function nodesSection(page, clusterName) {
  const tbody = h('tbody');
  const cache = new Map();
  const selected = new Set();
  const status = h('div', { 'aria-live': 'polite' });
  const deleteButton = h('button', { type: 'button', class: 'danger small', disabled: true,
    testid: 'delete-nodes', onclick: async () => {
      const ids = [...selected];
      deleteButton.disabled = true;
      try {
        const out = await page.api.call('BatchDeleteClusterNodes', { ClusterName: clusterName,
          NodeIds: ids });
        const failed = (out.Failed || []).map((f) => `${f.NodeId}: ${f.Code}: ${f.Message}`);
        replace(status, h('div', { role: 'status', testid: 'delete-nodes-result' },
          `Deleting ${(out.Successful || []).join(', ') || 'no nodes'}.`,
          failed.length ? h('ul', { class: 'error' }, failed.map((f) => h('li', {}, f))) : null));
        selected.clear();
        for (const entry of cache.values()) entry.uncheck();
      } catch (err) {
        replace(status, errorBox(err, 'delete-nodes-error'));
      }
      deleteButton.disabled = selected.size === 0;
    } }, 'Delete selected nodes');
  const create = (r) => {
    const id = r.node.InstanceId;
    const box = h('input', { type: 'checkbox', 'aria-label': `Select ${id}`,
      testid: `select-node-${id}`, onchange: () => {
        if (box.checked) selected.add(id);
        else selected.delete(id);
        deleteButton.disabled = selected.size === 0;
      } });
    const cells = Array.from({ length: 6 }, () => h('td'));
    const row = h('tr', { testid: `node-row-${id}` }, page.isAdmin ? h('td', {}, box) : null,
      h('td', {}, h('a', { href: href('node', clusterName, id), testid: `node-link-${id}` }, id)),
      ...cells);
    return { row, uncheck() { box.checked = false; }, update(x) {
      replace(cells[0], x.node.InstanceGroupName);
      replace(cells[1], badge(x.node.InstanceStatus?.Status),
        x.node.InstanceStatus?.Message ? h('div', { class: 'hint' }, x.node.InstanceStatus.Message) : null);
      replace(cells[2], x.hostname || '—');
      replace(cells[3], x.ip || '—');
      replace(cells[4], x.slurmState);
      replace(cells[5], h('span', { class: `health health-${x.health.kind}` }, x.health.text));
    } };
  };
  const el = h('section', { testid: 'nodes' }, h('h2', {}, 'Nodes'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'nodes-table' },
      thead(page.isAdmin && 'Select', 'Instance', 'Group', 'Status', 'Hostname', 'IP', 'Slurm', 'Health'),
      tbody)),
    page.isAdmin ? h('div', { class: 'actions' }, deleteButton) : null, status);
  return { el, update(rows) {
    keyedRows(tbody, rows, (r) => r.node.InstanceId, create, cache);
    for (const id of [...selected]) if (!cache.has(id)) selected.delete(id);
    deleteButton.disabled = selected.size === 0;
  } };
}

export function renderCluster(page, name) {
  const state = { cluster: null };
  const summary = h('dl', { class: 'summary' });
  const statusBadge = h('span', { testid: 'cluster-status' });
  const error = h('div');
  const groups = groupsSection(page, state);
  const nodes = nodesSection(page, name);
  const recoveries = recoveriesSection(page, name);
  const events = eventsSection(page, name);
  const danger = h('div');

  const refresh = async () => {
    try {
      const [cluster, nodeList, slurm, recs] = await Promise.all([
        page.api.call('DescribeCluster', { ClusterName: name }),
        page.api.listAll('ListClusterNodes', { ClusterName: name }, 'ClusterNodeSummaries'),
        page.api.call('HpodListSlurmNodes', { ClusterName: name }).catch(() => ({ SlurmNodes: [] })),
        page.api.call('HpodListRecoveries', { ClusterName: name }).catch(() => ({ Recoveries: [] })),
      ]);
      if (page.disposed) return;
      state.cluster = cluster;
      replace(error);
      replace(statusBadge, badge(cluster.ClusterStatus));
      statusBadge.dataset.status = cluster.ClusterStatus;
      const term = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
      replace(summary, term('ARN', cluster.ClusterArn), term('Created', formatTime(cluster.CreationTime)),
        term('Node recovery', cluster.NodeRecovery || '—'),
        cluster.FailureMessage ? term('Failure', h('span', { class: 'error-text', testid: 'failure-message' },
          cluster.FailureMessage)) : null);
      groups.update(cluster.InstanceGroups || []);
      nodes.update(nodeRows(nodeList, slurm.SlurmNodes, recs.Recoveries));
      recoveries.update(recs.Recoveries || []);
    } catch (err) {
      if (!page.disposed) replace(error, errorBox(err, 'cluster-error'));
    }
  };
  page.poll(refresh, POLL_MS);
  page.poll(events.refresh, POLL_MS);

  const showDelete = () => replace(danger, deleteClusterPanel(page, name,
    () => page.navigate(href('clusters')), () => replace(danger)));
  return h('section', { testid: 'page-cluster' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: href('clusters') }, 'Clusters'), ' / ', name),
    h('div', { class: 'title-row' }, h('h1', {}, name), statusBadge,
      h('a', { class: 'button secondary', href: href('training', name), testid: 'training-link' },
        'Training')),
    error, summary, groups.el, nodes.el, recoveries.el, events.el,
    page.isAdmin ? h('section', {}, h('h2', {}, 'Delete'),
      h('button', { type: 'button', class: 'danger', testid: 'delete-cluster', onclick: showDelete },
        'Delete cluster…'), danger) : null);
}
