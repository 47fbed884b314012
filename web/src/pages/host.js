// One host (HpodDescribeHost): its facts, the instance it serves, the agent's
// last health report and its state history, polled; for admins the actions its
// state allows (Release, Retire, Revoke — the last after typing the host's id,
// as deleting a cluster asks for its name).

import { badge, errorBox, field, h, replace, table } from '../lib/dom.js';
import { actionResultText, HOST_ACTIONS, healthRows, historyRows, hostActions, hostTerms,
  instanceTerms } from '../lib/hosts.js';
import { href } from '../lib/router.js';
import { servingLinks } from './hosts.js';

const POLL_MS = 5000;

const terms = (pairs) => pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]);

/** Revoking cannot be undone: the machine must join again with a new token. */
function revokePanel(page, hostId, done, cancel) {
  const input = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false',
    testid: 'revoke-confirm-input' });
  const status = h('div', { 'aria-live': 'polite' });
  const button = h('button', { type: 'submit', class: 'danger', disabled: true,
    testid: 'revoke-confirm-button' }, 'Revoke host');
  input.addEventListener('input', () => {
    button.disabled = input.value !== hostId;
  });
  const form = h('form', { class: 'panel danger-zone', testid: 'revoke-panel', novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      if (input.value !== hostId) return;
      button.disabled = true;
      replace(status, 'Revoking…');
      try {
        const out = await page.api.call(HOST_ACTIONS.revoke.operation, { HostId: hostId });
        if (!page.disposed) done(out);
      } catch (err) {
        replace(status, errorBox(err, 'host-action-error'));
        button.disabled = input.value !== hostId;
      }
    } },
  h('h2', {}, `Revoke host ${hostId}`),
  h('p', {}, 'Its certificates are refused from now on and the host is retired; the machine ' +
    'comes back only by joining again with a new token.'),
  field(`Type ${hostId} to confirm`, input),
  h('div', { class: 'actions' }, button,
    h('button', { type: 'button', class: 'secondary', onclick: cancel }, 'Cancel')),
  status);
  queueMicrotask(() => input.focus());
  return form;
}

/** The admin buttons, made once and shown or hidden by state so a focused one keeps the focus. */
function actionsSection(page, hostId, refreshNow) {
  const status = h('div', { 'aria-live': 'polite' });
  const panel = h('div');
  const buttons = {};
  const run = async (action) => {
    const b = buttons[action];
    b.disabled = true;
    replace(status, `${HOST_ACTIONS[action].label}…`);
    try {
      const out = await page.api.call(HOST_ACTIONS[action].operation, { HostId: hostId });
      if (page.disposed) return;
      replace(status, h('p', { class: 'notice', role: 'status', testid: 'host-action-result' },
        actionResultText(action, out)));
      refreshNow();
    } catch (err) {
      if (!page.disposed) replace(status, errorBox(err, 'host-action-error'));
    } finally {
      b.disabled = false;
    }
  };
  buttons.release = h('button', { type: 'button', testid: 'host-release', hidden: true,
    onclick: () => run('release') }, HOST_ACTIONS.release.label);
  buttons.retire = h('button', { type: 'button', class: 'secondary', testid: 'host-retire', hidden: true,
    onclick: () => run('retire') }, HOST_ACTIONS.retire.label);
  buttons.revoke = h('button', { type: 'button', class: 'danger', testid: 'host-revoke', hidden: true,
    onclick: () => replace(panel, revokePanel(page, hostId, (out) => {
      replace(panel);
      replace(status, h('p', { class: 'notice', role: 'status', testid: 'host-action-result' },
        actionResultText('revoke', out)));
      refreshNow();
    }, () => replace(panel))) }, HOST_ACTIONS.revoke.label);
  const hint = h('p', { class: 'hint', testid: 'host-no-actions', hidden: true },
    'No action applies to a host in this state.');
  const el = h('section', { testid: 'host-actions' }, h('h2', {}, 'Actions'),
    h('div', { class: 'actions' }, buttons.release, buttons.retire, buttons.revoke), hint, status, panel);
  return { el, update(d) {
    const shown = hostActions(d);
    for (const [name, b] of Object.entries(buttons)) b.hidden = !shown.includes(name);
    hint.hidden = shown.length > 0;
    if (!shown.includes('revoke')) replace(panel);
  } };
}

function instanceSection(d) {
  const cur = d.CurrentInstance;
  if (!cur) return h('p', { testid: 'host-instance' }, 'Not serving an instance.');
  // The cluster and the instance as links (the node page needs both).
  const name = cur.ClusterName;
  const links = {
    Cluster: name ? h('a', { href: href('cluster', name), testid: 'host-cluster-link' }, name) : null,
    Instance: name && cur.InstanceId ? h('a', { href: href('node', name, cur.InstanceId),
      testid: 'host-node-link' }, cur.InstanceId) : null,
  };
  return h('dl', { class: 'summary', testid: 'host-instance' },
    terms(instanceTerms(cur).map(([k, v]) => [k, links[k] || v])));
}

function healthSection(d) {
  const rows = healthRows(d.LastHealthReport);
  if (!rows.length) return h('p', { testid: 'host-health' }, 'No health report.');
  return table(['Check', 'Result', 'Verdict', 'Reason', 'Time'], rows.map((r) => [
    r.name, h('span', { class: r.bad ? 'health-bad' : 'health-ok' }, r.result), r.verdict, r.reason,
    h('span', { class: 'nowrap' }, r.time)]), { testid: 'host-health' });
}

function historySection(d) {
  const rows = historyRows(d.History);
  if (!rows.length) return h('p', { testid: 'host-history' }, 'No state changes recorded.');
  return table(['Time', 'Change', 'Reason', 'Instance'], rows.map((r) => [
    h('span', { class: 'nowrap' }, r.time), h('span', { class: 'nowrap' }, r.change), r.reason,
    servingLinks(r.serving)]), { testid: 'host-history' });
}

export function renderHost(page, hostId) {
  const statusBadge = h('span', { testid: 'host-status' });
  const error = h('div');
  const summary = h('dl', { class: 'summary', testid: 'host-details' }, 'Loading…');
  const instance = h('div');
  const health = h('div');
  const history = h('div');
  let poller = null;
  let shown = '';
  const actions = page.isAdmin ? actionsSection(page, hostId, () => poller?.wake()) : null;

  const refresh = async () => {
    try {
      const d = await page.api.call('HpodDescribeHost', { HostId: hostId });
      if (page.disposed) return;
      replace(error);
      // Rebuilt only when the answer changed, so a focused link keeps the focus.
      const text = JSON.stringify(d);
      if (text === shown) return;
      shown = text;
      replace(statusBadge, badge(d.Status));
      statusBadge.dataset.status = d.Status || '';
      replace(summary, terms(hostTerms(d)));
      replace(instance, instanceSection(d));
      replace(health, healthSection(d));
      replace(history, historySection(d));
      if (actions) actions.update(d);
    } catch (err) {
      if (!page.disposed) replace(error, errorBox(err, 'host-error'));
    }
  };
  poller = page.poll(refresh, POLL_MS);

  return h('section', { testid: 'page-host' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: href('hosts'), testid: 'back-to-hosts' }, 'Hosts'), ' / ', hostId),
    h('div', { class: 'title-row' }, h('h1', {}, hostId), statusBadge),
    error, summary,
    actions ? actions.el : null,
    h('section', {}, h('h2', {}, 'Current instance'), instance),
    h('section', {}, h('h2', {}, 'Last health report'), health),
    h('section', {}, h('h2', {}, 'History (newest first)'), history));
}
