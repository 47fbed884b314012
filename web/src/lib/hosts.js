// Hosts (issue 26): machines that joined hpodd with a token and serve a
// cluster's instances. What the hosts list and a host's page show, computed from
// HpodListHosts / HpodDescribeHost answers, and which admin actions apply to a
// host in its state. Pure: no DOM, no calls.

import { formatBytes, formatTime } from './format.js';

/** HpodHostState (src/api/hpod_extensions_model.json), in the model's order. */
export const HostState = Object.freeze({
  Joining: 'Joining',
  Spare: 'Spare',
  Assigned: 'Assigned',
  Rebooting: 'Rebooting',
  Draining: 'Draining',
  Quarantined: 'Quarantined',
  Retired: 'Retired',
});
export const HOST_STATES = Object.freeze(Object.values(HostState));

/**
 * States in which a host serves an instance: it is not retired until that node is
 * replaced. (A Draining host has left its instance: its tenure is being wiped.)
 */
export const SERVING_STATES = Object.freeze([HostState.Assigned, HostState.Rebooting]);

/**
 * The admin actions, in the order their buttons appear. Each is one API call
 * whose only input is the host; the API checks the state again (and answers
 * ConflictException when it changed meanwhile).
 */
export const HOST_ACTIONS = Object.freeze({
  release: { operation: 'HpodReleaseHost', label: 'Release' },
  retire: { operation: 'HpodRetireHost', label: 'Retire' },
  revoke: { operation: 'HpodRevokeHost', label: 'Revoke…' },
});

/** "—" for a member the API left out, as the other pages show it. */
const ABSENT = '—';
const orAbsent = (v) => (v === undefined || v === null || v === '' ? ABSENT : String(v));

/**
 * Which admin actions apply to a host (a HpodDescribeHost answer):
 * - release: Quarantined or Retired → Spare, unless its certificates were revoked
 *   (a revoked machine comes back only by joining again) or it has no instance
 *   type (it joined for one launch);
 * - retire: unless Retired already or serving an instance (replace the node first);
 * - revoke: unless revoked already.
 * @returns {Array<'release'|'retire'|'revoke'>}
 */
export function hostActions(host) {
  const status = host?.Status;
  if (!HOST_STATES.includes(status)) return [];
  const revoked = host.Revoked === true;
  const actions = [];
  // A host that joined for one launch has no instance type: no cluster could take it.
  if ((status === HostState.Quarantined || status === HostState.Retired) && !revoked &&
      host.InstanceType) {
    actions.push('release');
  }
  if (status !== HostState.Retired && !SERVING_STATES.includes(status)) actions.push('retire');
  if (!revoked) actions.push('revoke');
  return actions;
}

/** What an accepted action did, in words (HpodHostStateResponse / HpodRevokeHostResponse). */
export function actionResultText(action, out) {
  const id = out?.HostId || 'The host';
  if (action === 'revoke') {
    const n = (out?.RevokedSerials || []).length;
    return `${id} was revoked (${n} certificate${n === 1 ? '' : 's'}) and is ${out?.Status || 'Retired'}.`;
  }
  if (out?.PreviousStatus && out.PreviousStatus === out.Status) return `${id} was ${out.Status} already.`;
  return `${id} is ${out?.Status || 'changed'}` +
    (out?.PreviousStatus ? ` (was ${out.PreviousStatus}).` : '.');
}

/**
 * The HpodListHosts request for the list's filter: only the members set
 * (an unknown state is left out; the pool is trimmed).
 */
export function listRequest({ state = '', pool = '', instanceType = '' } = {}) {
  const req = {};
  if (HOST_STATES.includes(state)) req.State = state;
  if (pool.trim()) req.Pool = pool.trim();
  if (instanceType.trim()) req.InstanceType = instanceType.trim();
  return req;
}

/** The one line shown for an empty list: how to join a machine, or that the filter matched none. */
export function emptyHint(request = {}) {
  if (Object.keys(request).length) return 'No hosts match this filter.';
  return 'No hosts yet. Join a machine: hpod create-join-token, then on the machine ' +
    'hpod-agent join --server URL --token TOKEN --instance-type ml.…';
}

/** 16384 → "16.0 GiB"; "—" when absent. */
export function formatMiB(n) {
  return typeof n === 'number' ? formatBytes(n * 1024 * 1024) : ABSENT;
}

/** true → "Yes", false → "No", absent → "—". */
export function yesNo(b) {
  if (b === true) return 'Yes';
  if (b === false) return 'No';
  return ABSENT;
}

/**
 * What a host serves, for links: {clusterName, groupName, instanceId} (members
 * "" when the API left them out), or null when it serves no instance. A host
 * whose cluster was deleted may name an instance without a cluster.
 */
export function servingOf(x) {
  if (!x || (!x.ClusterName && !x.InstanceId && !x.InstanceGroupName)) return null;
  return { clusterName: x.ClusterName || '', groupName: x.InstanceGroupName || '',
    instanceId: x.InstanceId || '' };
}

/** One row of the hosts list (HpodHostSummary): display text, "—" for what is absent. */
export function hostRow(x) {
  return {
    id: x.HostId,
    hostname: orAbsent(x.Hostname),
    pool: orAbsent(x.Pool),
    instanceType: orAbsent(x.InstanceType),
    status: x.Status || '',
    reason: x.StatusReason || '',
    serving: servingOf(x),
    connected: yesNo(x.Connected),
    cpus: orAbsent(x.Cpus),
    memory: formatMiB(x.MemoryMiB),
    gpus: orAbsent(x.Gpus),
  };
}

/** "NVIDIA H100 80GB HBM3 · 79.6 GiB · GPU-1234…" per GPU of the facts. */
export function gpuLines(gpus) {
  return (gpus || []).map((g) => [g.Name || 'GPU', typeof g.MemoryMiB === 'number' ?
    formatMiB(g.MemoryMiB) : '', g.Uuid || ''].filter(Boolean).join(' · '));
}

/**
 * A host's page summary (HpodDescribeHost) as [term, text] pairs, "—" for what
 * is absent. The status itself is shown beside the heading.
 */
export function hostTerms(d) {
  const f = d.Facts || {};
  const gpus = gpuLines(f.Gpus);
  return [
    ['Hostname', orAbsent(f.Hostname)],
    ['Pool', orAbsent(d.Pool)],
    ['Instance type', orAbsent(d.InstanceType)],
    ['Status reason', orAbsent(d.StatusReason)],
    ['Status since', formatTime(d.StatusChangedAt)],
    ['Connected', yesNo(d.Connected)],
    ['Joined', formatTime(d.JoinedAt)],
    ['Machine ID', orAbsent(d.MachineId)],
    ['Join token', orAbsent(d.TokenId)],
    ['Certificate', d.CertificateSerial ? `${d.CertificateSerial} (until ${formatTime(d.CertificateNotAfter)})`
      : ABSENT],
    ['Revoked', yesNo(d.Revoked)],
    ['Failures (30 days)', orAbsent(d.FailuresLast30Days)],
    ['CPUs', orAbsent(f.Cpus)],
    ['Memory', formatMiB(f.MemoryMiB)],
    ['GPUs', gpus.length ? gpus.join('; ') : ABSENT],
    ['Addresses', f.Addresses?.length ? f.Addresses.join(', ') : ABSENT],
    ['OS', orAbsent(f.Os)],
    ['Slurm', orAbsent(f.SlurmVersion)],
    ['Boot ID', orAbsent(f.BootId)],
  ];
}

/** The instance a host serves (CurrentInstance) as [term, text] pairs; [] when none. */
export function instanceTerms(cur) {
  if (!cur) return [];
  return [
    ['Cluster', orAbsent(cur.ClusterName)],
    ['Instance group', orAbsent(cur.InstanceGroupName)],
    ['Instance', orAbsent(cur.InstanceId)],
    ['Logical ID', orAbsent(cur.NodeLogicalId)],
    ['Hostname', orAbsent(cur.Hostname)],
    ['IP', orAbsent(cur.PrivateIpAddress)],
    ['Instance status', orAbsent(cur.InstanceStatus)],
  ];
}

/** The last health report's checks as rows; failing ones (result not ok/skipped) marked bad. */
export function healthRows(checks) {
  return (checks || []).map((c) => ({
    name: orAbsent(c.Name),
    result: orAbsent(c.Result),
    verdict: orAbsent(c.Verdict),
    reason: orAbsent(c.Reason),
    time: formatTime(c.Time),
    bad: !!c.Result && c.Result !== 'ok' && c.Result !== 'skipped',
  }));
}

/**
 * The host's state changes, newest first (the API gives them oldest first; of
 * two at the same second the later one stays first). The first entry has no From.
 */
export function historyRows(history) {
  return (history || []).map((e, i) => ({ e, i }))
    .sort((a, b) => ((b.e.Time || 0) - (a.e.Time || 0)) || (b.i - a.i))
    .map(({ e }) => ({
      time: formatTime(e.Time),
      change: e.From ? `${e.From} → ${orAbsent(e.To)}` : `→ ${orAbsent(e.To)}`,
      reason: orAbsent(e.Reason),
      serving: servingOf(e),
    }));
}
