// Recoveries of a cluster (HpodListRecoveries) and, for the one opened, its
// timeline (HpodDescribeRecovery): detected → marked → drained → launched →
// resumed, each step with its time and detail.

import { badge, errorBox, h, keyedRows, replace, table } from '../lib/dom.js';
import { formatTime } from '../lib/format.js';

function timeline(rec) {
  const steps = rec.Timeline || [];
  return h('div', { class: 'panel', testid: 'recovery-timeline', 'data-recovery': rec.RecoveryId,
    'data-status': rec.Status },
  h('h3', {}, `Recovery ${rec.RecoveryId}: ${rec.Action} of ${rec.NodeId}`),
  h('p', {}, [rec.Check, rec.Reason].filter(Boolean).join(': '),
    rec.ReplacementNodeId ? ` — replacement ${rec.ReplacementNodeId}` : ''),
  h('p', {}, 'Status ', badge(rec.Status, 'recovery-status'), ` · phase ${rec.Phase}`,
    rec.Message ? ` · ${rec.Message}` : ''),
  steps.length ? h('ol', { class: 'timeline' }, steps.map((s) => h('li', { testid: 'timeline-step' },
    h('time', {}, formatTime(s.Time)), ' ', h('strong', {}, s.Step), s.Detail ? ` — ${s.Detail}` : '')))
    : h('p', {}, 'No steps recorded yet.'));
}

export function recoveriesSection(page, clusterName) {
  const tableEl = table(['Recovery', 'Node', 'Action', 'Check / reason', 'Phase', 'Status',
    'Started', 'Finished'], [], { testid: 'recoveries-table' });
  const tbody = tableEl.querySelector('tbody');
  const rows = new Map();
  const list = h('div', { testid: 'recoveries' });
  const detail = h('div');
  let open = null;

  const show = async (id) => {
    open = id;
    for (const [key, entry] of rows) entry.button.setAttribute('aria-expanded', String(key === id));
    try {
      const out = await page.api.call('HpodDescribeRecovery', { ClusterName: clusterName,
        RecoveryId: id });
      if (!page.disposed && open === id) replace(detail, timeline(out.Recovery || {}));
    } catch (err) {
      if (!page.disposed) replace(detail, errorBox(err, 'recovery-error'));
    }
  };

  // Rows kept across polls (keyedRows): a recovery's button keeps the keyboard
  // focus while the cluster page refreshes.
  const create = (r) => {
    const id = r.RecoveryId;
    const button = h('button', { type: 'button', class: 'link', testid: `recovery-${id}`,
      'aria-expanded': String(open === id), onclick: () => show(id) }, id);
    const cells = Array.from({ length: 7 }, (_, i) => h('td', { class: i >= 5 ? 'nowrap' : null }));
    const row = h('tr', { testid: `recovery-row-${id}` }, h('td', {}, button), ...cells);
    return { row, button, update(x) {
      const text = [[x.NodeId, x.Hostname].filter(Boolean).join(' '), x.Action || '',
        [x.Check, x.Reason].filter(Boolean).join(': '), x.Phase || ''];
      text.forEach((t, i) => replace(cells[i], t));
      replace(cells[4], badge(x.Status));
      replace(cells[5], formatTime(x.CreatedTime));
      replace(cells[6], x.FinishedTime ? formatTime(x.FinishedTime) : '—');
    } };
  };

  const update = (recs) => {
    // Newest first: the one a user just caused is at the top.
    const sorted = [...recs].sort((a, b) => (b.CreatedTime || 0) - (a.CreatedTime || 0));
    keyedRows(tbody, sorted, (r) => r.RecoveryId, create, rows);
    if (!sorted.length) replace(list, h('p', {}, 'No recoveries.'));
    else if (list.firstChild !== tableEl) replace(list, tableEl);
    if (open) show(open);
  };
  const el = h('section', {}, h('h2', {}, 'Recoveries'), list, detail);
  return { el, update };
}
