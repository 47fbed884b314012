// One row per node for the cluster page: what ListClusterNodes says, the node's
// Slurm state (HpodListSlurmNodes, by hostname = Slurm NodeName) and a health
// verdict. hpod has no per-node health field in the API; the verdict shown is
// what the API does say: an open recovery names its check and reason, Slurm's
// Action:Replace / Action:Reboot marks say what is asked, else the node's status.

import { shortHostname } from './target.js';

/** @returns {{text: string, kind: 'ok'|'bad'|'wait'}} */
export function healthVerdict(node, slurm, recoveries) {
  const open = (recoveries || []).find((r) => r.Status === 'InProgress' &&
    (r.NodeId === node.InstanceId || r.ReplacementNodeId === node.InstanceId));
  if (open) {
    return { kind: 'bad', text: `Recovering (${open.Action}, ${open.Phase}): ` +
      [open.Check, open.Reason].filter(Boolean).join(': ') };
  }
  const status = node.InstanceStatus?.Status || '';
  if (slurm && /^Action:/.test(slurm.Reason || '')) return { kind: 'bad', text: slurm.Reason };
  if (status === 'Running') return { kind: 'ok', text: 'Healthy' };
  if (status === 'Pending' || status === 'SystemUpdating') return { kind: 'wait', text: status };
  return { kind: 'bad', text: node.InstanceStatus?.Message || status || 'Unknown' };
}

/** Rows for the nodes table, in the API's order. */
export function nodeRows(nodes, slurmNodes, recoveries) {
  const byName = new Map((slurmNodes || []).map((s) => [s.NodeName, s]));
  return (nodes || []).map((n) => {
    const hostname = shortHostname(n.PrivateDnsHostname);
    const slurm = byName.get(hostname);
    return {
      node: n,
      hostname,
      ip: ipOf(n.PrivateDnsHostname),
      slurmState: slurm ? slurm.State + (slurm.Reason ? ` (${slurm.Reason})` : '') : '—',
      health: healthVerdict(n, slurm, recoveries),
    };
  });
}

/** ip-10-77-1-11.us-west-2.compute.internal → 10.77.1.11 ("" when not that form). */
export function ipOf(dns) {
  const m = /^ip-(\d+)-(\d+)-(\d+)-(\d+)(\.|$)/.exec(dns || '');
  return m ? m.slice(1, 5).join('.') : '';
}
