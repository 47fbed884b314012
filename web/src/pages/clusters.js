// Clusters: ListClusters with status, polled; admins may delete one (typed
// confirmation) or go to the create form.

import { badge, errorBox, h, keyedRows, replace, table } from '../lib/dom.js';
import { formatTime } from '../lib/format.js';
import { href } from '../lib/router.js';
import { deleteClusterPanel } from './delete.js';

export function renderClusters(page) {
  const tableEl = table(['Name', 'Status', 'Created', page.isAdmin ? 'Actions' : null]
    .filter(Boolean), []);
  const tbody = tableEl.querySelector('tbody');
  const rows = new Map();
  const list = h('div', { testid: 'clusters-table' }, 'Loading…');
  const error = h('div');
  const panel = h('div');
  let deleting = null;

  const askDelete = (name) => {
    deleting = name;
    replace(panel, deleteClusterPanel(page, name, () => {
      deleting = null;
      replace(panel, h('p', { class: 'notice', role: 'status', testid: 'delete-started' },
        `Deletion of ${name} started.`));
    }, () => {
      deleting = null;
      replace(panel);
    }));
  };

  // One row per cluster kept across polls (keyedRows), so a focused Delete… button
  // keeps the keyboard focus while the list refreshes.
  const create = (c) => {
    const name = c.ClusterName;
    const status = h('td');
    const created = h('td');
    const del = page.isAdmin ? h('button', { type: 'button', class: 'danger small',
      testid: `delete-cluster-${name}`, onclick: () => askDelete(name) }, 'Delete…') : null;
    const row = h('tr', { testid: `cluster-row-${name}` },
      h('td', {}, h('a', { href: href('cluster', name) }, name)), status, created,
      del ? h('td', {}, del) : null);
    return { row, update(x) {
      replace(status, badge(x.ClusterStatus, `cluster-status-${name}`));
      replace(created, formatTime(x.CreationTime));
      if (del) del.disabled = x.ClusterStatus === 'Deleting';
    } };
  };

  const refresh = async () => {
    try {
      const clusters = await page.api.listAll('ListClusters', {}, 'ClusterSummaries');
      if (page.disposed) return;
      replace(error);
      keyedRows(tbody, clusters, (c) => c.ClusterName, create, rows);
      if (!clusters.length) replace(list, h('p', { testid: 'no-clusters' }, 'No clusters yet.'));
      else if (list.firstChild !== tableEl) replace(list, tableEl);
      if (deleting && !clusters.some((c) => c.ClusterName === deleting)) replace(panel);
    } catch (err) {
      if (!page.disposed) replace(error, errorBox(err, 'clusters-error'));
    }
  };
  page.poll(refresh, 3000);

  return h('section', { testid: 'page-clusters' },
    h('div', { class: 'title-row' }, h('h1', {}, 'Clusters'),
      page.isAdmin ? h('a', { class: 'button', href: href('create'), testid: 'create-cluster-link' },
        'Create cluster') : null),
    error, list, panel);
}
