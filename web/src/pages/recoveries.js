// Recoveries of a cluster (HpodListRecoveries) and, for the one opened, its
// timeline (HpodDescribeRecovery): detected → marked → drained → launched →
// resumed, each step with its time and detail.

import { badge, errorBox, h, replace, table } from '../lib/dom.js';
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
  const list = h('div', { testid: 'recoveries' });
  const detail = h('div');
  let open = null;

  const show = async (id) => {
    open = id;
    try {
      const out = await page.api.call('HpodDescribeRecovery', { ClusterName: clusterName,
        RecoveryId: id });
      if (!page.disposed && open === id) replace(detail, timeline(out.Recovery || {}));
    } catch (err) {
      if (!page.disposed) replace(detail, errorBox(err, 'recovery-error'));
    }
  };

  const update = (recs) => {
    // Newest first: the one a user just caused is at the top.
    const sorted = [...recs].sort((a, b) => (b.CreatedTime || 0) - (a.CreatedTime || 0));
    replace(list, sorted.length ? table(['Recovery', 'Node', 'Action', 'Check / reason', 'Phase',
      'Status', 'Started', 'Finished'], sorted.map((r) => [
      h('button', { type: 'button', class: 'link', testid: `recovery-${r.RecoveryId}`,
        'aria-expanded': String(open === r.RecoveryId), onclick: () => show(r.RecoveryId) },
      r.RecoveryId),
      [r.NodeId, r.Hostname].filter(Boolean).join(' '), r.Action || '',
      [r.Check, r.Reason].filter(Boolean).join(': '), r.Phase || '', badge(r.Status),
      formatTime(r.CreatedTime), r.FinishedTime ? formatTime(r.FinishedTime) : '—']),
    { testid: 'recoveries-table' }) : h('p', {}, 'No recoveries.'));
    if (open) show(open);
  };
  const el = h('section', {}, h('h2', {}, 'Recoveries'), list, detail);
  return { el, update };
}
