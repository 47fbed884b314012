// Hosts (issue 26): HpodListHosts with each host's state, what it serves and its
// size, polled; filtered by state and pool. A host opens its page (host.js).

import { badge, errorBox, field, h, keyedRows, replace, table } from '../lib/dom.js';
import { emptyHint, HOST_STATES, hostRow, listRequest } from '../lib/hosts.js';
import { href } from '../lib/router.js';

const POLL_MS = 3000;

/** Cluster / group / instance, each a link where the console has a page for it. */
export function servingLinks(serving, testid) {
  if (!serving) return '—';
  const { clusterName, groupName, instanceId } = serving;
  const parts = [
    clusterName ? h('a', { href: href('cluster', clusterName) }, clusterName) : null,
    groupName || null,
    instanceId ? (clusterName ? h('a', { href: href('node', clusterName, instanceId) }, instanceId)
      : instanceId) : null,
  ].filter(Boolean);
  return h('span', { testid }, parts.flatMap((p, i) => (i ? [' / ', p] : [p])));
}

export function renderHosts(page) {
  const tableEl = table(['Host', 'Hostname', 'Pool', 'Instance type', 'Status', 'Serving',
    'Connected', 'CPUs', 'Memory', 'GPUs'], [], { testid: 'hosts-table' });
  const tbody = tableEl.querySelector('tbody');
  const rows = new Map();
  const list = h('div', { testid: 'hosts' }, 'Loading…');
  const error = h('div');

  const state = h('select', { testid: 'hosts-filter-state' }, h('option', { value: '' }, 'All states'),
    HOST_STATES.map((s) => h('option', { value: s }, s)));
  const pool = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'any pool', testid: 'hosts-filter-pool' });
  const filter = () => listRequest({ state: state.value, pool: pool.value });
  let poller = null;

  // Rows kept across polls (keyedRows): a focused host link keeps the keyboard focus.
  const create = (x) => {
    const id = x.HostId;
    const cells = Array.from({ length: 9 }, (_, i) => h('td', { class: i >= 6 ? 'nowrap' : null }));
    const row = h('tr', { testid: `host-row-${id}` },
      h('td', { class: 'nowrap' }, h('a', { href: href('host', id), testid: `host-link-${id}` }, id)),
      ...cells);
    return { row, update(item) {
      const r = hostRow(item);
      replace(cells[0], r.hostname);
      replace(cells[1], r.pool);
      replace(cells[2], r.instanceType);
      replace(cells[3], badge(r.status, `host-status-${id}`),
        r.reason ? h('div', { class: 'hint' }, r.reason) : null);
      if (r.reason) cells[3].title = r.reason;
      else cells[3].removeAttribute('title');
      replace(cells[4], servingLinks(r.serving));
      replace(cells[5], r.connected);
      replace(cells[6], r.cpus);
      replace(cells[7], r.memory);
      replace(cells[8], r.gpus);
    } };
  };

  const refresh = async () => {
    const req = filter();
    try {
      const out = await page.api.call('HpodListHosts', req);
      // A filter changed while this call was out: the next tick (woken) shows it.
      if (page.disposed || JSON.stringify(req) !== JSON.stringify(filter())) return;
      const hosts = out.Hosts || [];
      replace(error);
      keyedRows(tbody, hosts, (x) => x.HostId, create, rows);
      if (!hosts.length) replace(list, h('p', { class: 'hint', testid: 'no-hosts' }, emptyHint(req)));
      else if (list.firstChild !== tableEl) replace(list, tableEl);
    } catch (err) {
      if (!page.disposed) replace(error, errorBox(err, 'hosts-error'));
    }
  };
  poller = page.poll(refresh, POLL_MS);
  const apply = () => poller.wake();
  state.addEventListener('change', apply);
  pool.addEventListener('change', apply);

  return h('section', { testid: 'page-hosts' },
    h('div', { class: 'title-row' }, h('h1', {}, 'Hosts')),
    h('form', { class: 'grid', testid: 'hosts-filter', role: 'search', novalidate: true,
      onsubmit: (ev) => {
        ev.preventDefault();
        apply();
      } }, field('State', state), field('Pool', pool)),
    error, list);
}
