// The hosts list and a host's page (issue 26): rows, absent members, history
// order, the filter's request, and which admin actions a host's state allows.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { actionResultText, emptyHint, formatMiB, HOST_ACTIONS, HOST_STATES, healthRows, historyRows,
  hostActions, hostRow, hostTerms, instanceTerms, listRequest, servingOf, yesNo } from '../src/lib/hosts.js';
import { href, parseRoute } from '../src/lib/router.js';

const MODEL = JSON.parse(readFileSync(new URL('../../src/api/hpod_extensions_model.json',
  import.meta.url), 'utf8'));

test('host routes', () => {
  assert.deepEqual(parseRoute('#/hosts'), { name: 'hosts', params: [] });
  assert.deepEqual(parseRoute('#/hosts/h-0123456789abcdef'), { name: 'host', params: ['h-0123456789abcdef'] });
  assert.equal(href('hosts'), '#/hosts');
  assert.equal(href('host', 'h-0123456789abcdef'), '#/hosts/h-0123456789abcdef');
  assert.deepEqual(parseRoute(href('host', 'a/b')), { name: 'host', params: ['a/b'] });
  assert.deepEqual(parseRoute('#/hosts/%E0'), { name: 'clusters', params: [] });
  assert.deepEqual(parseRoute('#/hosts/h-1/more'), { name: 'clusters', params: [] });
});

test('the states and operations are the model\'s', () => {
  assert.deepEqual([...HOST_STATES], MODEL.shapes.HpodHostState.enum);
  for (const { operation } of Object.values(HOST_ACTIONS)) {
    assert.ok(MODEL.operations[operation], `${operation} is in the model`);
    assert.deepEqual(MODEL.shapes[MODEL.operations[operation].input].required, ['HostId']);
  }
  assert.deepEqual(Object.keys(MODEL.shapes.HpodListHostsRequest.members).sort(),
    ['InstanceType', 'Pool', 'State']);
});

test('which admin actions a host\'s state allows', () => {
  const actions = (Status, Revoked = false) =>
    hostActions({ HostId: 'h-1', Status, Revoked, InstanceType: 'ml.c5.large' });
  assert.deepEqual(actions('Quarantined'), ['release', 'retire', 'revoke']);
  assert.deepEqual(actions('Retired'), ['release', 'revoke']);
  assert.deepEqual(actions('Spare'), ['retire', 'revoke']);
  assert.deepEqual(actions('Joining'), ['retire', 'revoke']);
  // Serving an instance: replace the node first; never released.
  for (const s of ['Assigned', 'Rebooting']) assert.deepEqual(actions(s), ['revoke'], s);
  assert.deepEqual(actions('Draining'), ['retire', 'revoke']);
  // Revoked: it comes back only by joining again.
  assert.deepEqual(actions('Retired', true), []);
  assert.deepEqual(actions('Quarantined', true), ['retire']);
  // Every state is covered by the rules above; an unknown or missing one offers nothing.
  for (const s of HOST_STATES) assert.ok(actions(s).includes('revoke'), s);
  assert.deepEqual(actions('Bogus'), []);
  // Joined for one launch (a local node over TLS): no type, never released.
  assert.deepEqual(hostActions({ HostId: 'h-2', Status: 'Retired' }), ['revoke']);
  assert.deepEqual(hostActions(undefined), []);
});

test('what an accepted action says', () => {
  assert.equal(actionResultText('release', { HostId: 'h-1', Status: 'Spare', PreviousStatus: 'Quarantined' }),
    'h-1 is Spare (was Quarantined).');
  assert.equal(actionResultText('release', { HostId: 'h-1', Status: 'Spare', PreviousStatus: 'Spare' }),
    'h-1 was Spare already.');
  assert.equal(actionResultText('retire', { HostId: 'h-1', Status: 'Retired', PreviousStatus: 'Spare' }),
    'h-1 is Retired (was Spare).');
  assert.equal(actionResultText('revoke', { HostId: 'h-1', RevokedSerials: ['a', 'b'], Status: 'Retired' }),
    'h-1 was revoked (2 certificates) and is Retired.');
  assert.equal(actionResultText('revoke', { HostId: 'h-1', RevokedSerials: ['a'], Status: 'Retired' }),
    'h-1 was revoked (1 certificate) and is Retired.');
});

test('the filter sends only what is set', () => {
  assert.deepEqual(listRequest(), {});
  assert.deepEqual(listRequest({ state: '', pool: '  ' }), {});
  assert.deepEqual(listRequest({ state: 'Quarantined', pool: ' gpu-a ' }), { State: 'Quarantined', Pool: 'gpu-a' });
  assert.deepEqual(listRequest({ state: 'quarantined' }), {}, 'only the model\'s spelling');
  assert.deepEqual(listRequest({ instanceType: 'ml.g5.xlarge' }), { InstanceType: 'ml.g5.xlarge' });
});

test('an empty list says how to join a machine, or that the filter matched none', () => {
  assert.equal(emptyHint({}), 'No hosts yet. Join a machine: hpod create-join-token, then on the ' +
    'machine hpod-agent join --server URL --token TOKEN --instance-type ml.…');
  assert.equal(emptyHint(), emptyHint({}));
  assert.equal(emptyHint({ State: 'Spare' }), 'No hosts match this filter.');
});

test('list rows: absent members are "—"', () => {
  const full = { HostId: 'h-1', MachineId: 'm', Hostname: 'gpu-7', Pool: 'default', InstanceType: 'ml.g5.xlarge',
    ClusterName: 'c1', InstanceGroupName: 'workers', InstanceId: 'i-0abc', TokenId: 't', Status: 'Assigned',
    StatusChangedAt: 1700958300, Connected: true, JoinedAt: 1700958000, Cpus: 32, MemoryMiB: 131072, Gpus: 4 };
  const r = hostRow(full);
  assert.deepEqual(r, { id: 'h-1', hostname: 'gpu-7', pool: 'default', instanceType: 'ml.g5.xlarge',
    status: 'Assigned', reason: '', serving: { clusterName: 'c1', groupName: 'workers', instanceId: 'i-0abc' },
    connected: 'Yes', cpus: '32', memory: '128.0 GiB', gpus: '4' });
  // Only the members the API always sends.
  const bare = hostRow({ HostId: 'h-2', MachineId: 'm2', Pool: 'p', TokenId: 't', Status: 'Quarantined',
    StatusReason: 'gpu: Xid 79', Connected: false, JoinedAt: 1 });
  assert.deepEqual(bare, { id: 'h-2', hostname: '—', pool: 'p', instanceType: '—', status: 'Quarantined',
    reason: 'gpu: Xid 79', serving: null, connected: 'No', cpus: '—', memory: '—', gpus: '—' });
  // Zero is a value, not an absence.
  assert.equal(hostRow({ HostId: 'h', Gpus: 0 }).gpus, '0');
});

test('what a host serves', () => {
  assert.equal(servingOf({}), null);
  assert.deepEqual(servingOf({ InstanceId: 'i-1' }), { clusterName: '', groupName: '', instanceId: 'i-1' });
  assert.equal(yesNo(undefined), '—');
  assert.equal(formatMiB(1536), '1.5 GiB');
  assert.equal(formatMiB(undefined), '—');
});

test('a host\'s page terms', () => {
  const d = { HostId: 'h-1', MachineId: 'mid', Pool: 'default', InstanceType: 'ml.p5.48xlarge', Status: 'Spare',
    Connected: true, JoinedAt: 1700958300, TokenId: 'tok', CertificateSerial: '0a1b',
    CertificateNotAfter: 1700958300 + 86400, Revoked: false, FailuresLast30Days: 0,
    Facts: { Hostname: 'gpu-7', BootId: 'b', Cpus: 8, MemoryMiB: 16384,
      Gpus: [{ Name: 'NVIDIA H100', Uuid: 'GPU-1', MemoryMiB: 81559 }, { Name: 'NVIDIA H100', Uuid: 'GPU-2' }],
      Addresses: ['10.0.0.7', '192.168.1.7'], Os: 'Debian 12', SlurmVersion: '22.05.8' } };
  const t = Object.fromEntries(hostTerms(d));
  assert.equal(t.Hostname, 'gpu-7');
  assert.equal(t['Status reason'], '—');
  assert.equal(t['Status since'], '—');
  assert.equal(t.Joined, '2023-11-26 00:25:00Z');
  assert.equal(t.Certificate, '0a1b (until 2023-11-27 00:25:00Z)');
  assert.equal(t.Revoked, 'No');
  assert.equal(t['Failures (30 days)'], '0');
  assert.equal(t.Memory, '16.0 GiB');
  assert.equal(t.GPUs, 'NVIDIA H100 · 79.6 GiB · GPU-1; NVIDIA H100 · GPU-2');
  assert.equal(t.Addresses, '10.0.0.7, 192.168.1.7');
  // A revoked host without facts.
  const bare = Object.fromEntries(hostTerms({ HostId: 'h-2', Status: 'Retired', Revoked: true }));
  for (const k of ['Hostname', 'Certificate', 'CPUs', 'Memory', 'GPUs', 'Addresses', 'OS', 'Slurm', 'Boot ID']) {
    assert.equal(bare[k], '—', k);
  }
  assert.equal(bare.Revoked, 'Yes');
  assert.deepEqual(instanceTerms(undefined), []);
  assert.deepEqual(Object.fromEntries(instanceTerms({ ClusterName: 'c1', InstanceId: 'i-1' })),
    { Cluster: 'c1', 'Instance group': '—', Instance: 'i-1', 'Logical ID': '—', Hostname: '—', IP: '—',
      'Instance status': '—' });
});

test('health checks: failing ones are marked', () => {
  const rows = healthRows([{ Name: 'gpu', Result: 'fail', Verdict: 'Replace', Reason: 'Xid 79', Time: 1700958300 },
    { Name: 'disk:/fsx', Result: 'ok', Verdict: 'Healthy' }, { Name: 'slurm', Result: 'skipped' }]);
  assert.deepEqual(rows.map((r) => [r.name, r.result, r.verdict, r.reason, r.time, r.bad]), [
    ['gpu', 'fail', 'Replace', 'Xid 79', '2023-11-26 00:25:00Z', true],
    ['disk:/fsx', 'ok', 'Healthy', '—', '—', false],
    ['slurm', 'skipped', '—', '—', '—', false],
  ]);
  assert.deepEqual(healthRows(undefined), []);
});

test('history is shown newest first', () => {
  const history = [
    { Time: 100, To: 'Joining', Reason: 'joined with token t' },
    { Time: 200, From: 'Joining', To: 'Spare', Reason: 'facts reported' },
    { Time: 300, From: 'Spare', To: 'Assigned', Reason: 'serves i-1', ClusterName: 'c1',
      InstanceGroupName: 'w', InstanceId: 'i-1' },
    { Time: 300, From: 'Assigned', To: 'Quarantined', Reason: 'gpu: Xid 79', InstanceId: 'i-1' },
  ];
  const rows = historyRows(history);
  assert.deepEqual(rows.map((r) => r.change), ['Assigned → Quarantined', 'Spare → Assigned', 'Joining → Spare',
    '→ Joining']);
  assert.deepEqual(rows[1].serving, { clusterName: 'c1', groupName: 'w', instanceId: 'i-1' });
  assert.deepEqual(rows[0].serving, { clusterName: '', groupName: '', instanceId: 'i-1' });
  assert.equal(rows[3].serving, null);
  assert.equal(rows[3].time, '1970-01-01 00:01:40Z');
  assert.deepEqual(history.map((e) => e.Time), [100, 200, 300, 300], 'the answer is not reordered');
  assert.deepEqual(historyRows(undefined), []);
});
