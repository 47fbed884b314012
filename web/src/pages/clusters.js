// Clusters: ListClusters with status, polled; admins may delete one (typed
// confirmation) or go to the create form.

import { badge, errorBox, h, replace, table } from '../lib/dom.js';
import { formatTime } from '../lib/format.js';
import { href } from '../lib/router.js';
import { deleteClusterPanel } from './delete.js';

export function renderClusters(page) {
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

  const refresh = async () => {
    try {
      const clusters = await page.api.listAll('ListClusters', {}, 'ClusterSummaries');
      if (page.disposed) return;
      replace(error);
      if (!clusters.length) {
        replace(list, h('p', { testid: 'no-clusters' }, 'No clusters yet.'));
        return;
      }
      replace(list, table(['Name', 'Status', 'Created', page.isAdmin ? 'Actions' : null]
        .filter(Boolean), clusters.map((c) => h('tr', { testid: `cluster-row-${c.ClusterName}` },
        h('td', {}, h('a', { href: href('cluster', c.ClusterName) }, c.ClusterName)),
        h('td', {}, badge(c.ClusterStatus, `cluster-status-${c.ClusterName}`)),
        h('td', {}, formatTime(c.CreationTime)),
        page.isAdmin ? h('td', {}, h('button', { type: 'button', class: 'danger small',
          testid: `delete-cluster-${c.ClusterName}`, disabled: c.ClusterStatus === 'Deleting',
          onclick: () => askDelete(c.ClusterName) }, 'Delete…')) : null))));
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
