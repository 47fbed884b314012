// Live events of a cluster (ListClusterEvents, newest first), polled.

import { badge, errorBox, h, replace, table } from '../lib/dom.js';
import { formatTime } from '../lib/format.js';

const SHOWN = 50;

export function eventsSection(page, clusterName) {
  const body = h('div', { testid: 'events' }, 'Loading…');
  const refresh = async () => {
    try {
      const out = await page.api.call('ListClusterEvents', { ClusterName: clusterName,
        SortOrder: 'Descending', MaxResults: SHOWN });
      if (page.disposed) return;
      const events = out.Events || [];
      replace(body, events.length ? table(['Time', 'Level', 'Resource', 'Description'],
        events.map((e) => [h('span', { class: 'nowrap' }, formatTime(e.EventTime)), badge(e.EventLevel),
          [e.ResourceType, e.InstanceGroupName, e.InstanceId].filter(Boolean).join(' '),
          e.Description || '']), { testid: 'events-table' }) : h('p', {}, 'No events.'));
    } catch (err) {
      if (!page.disposed) replace(body, errorBox(err, 'events-error'));
    }
  };
  const el = h('section', { class: 'events' }, h('h2', {}, 'Events'), body);
  return { el, refresh };
}
