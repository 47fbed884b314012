// What the create form, a paste and a scale send (checked against the seed's
// examples/demo-cluster.json and the shape hpodd's DescribeCluster returns).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { createRequest, DEFAULT_ROLE, groupFromForm, requestFromPaste, scaledGroup, scaleRequest,
  SPEC_MEMBERS } from '../src/lib/groups.js';

const DEMO = JSON.parse(readFileSync(new URL('../../examples/demo-cluster.json', import.meta.url), 'utf8'));
const MODEL = JSON.parse(readFileSync(new URL('../../src/api/sagemaker_cluster_model.json',
  import.meta.url), 'utf8'));

test('the form builds the seed groups', () => {
  // The seed's JSON has no SlurmConfig (roles come from provisioning_parameters.json
  // in its lifecycle prefix) and its own execution role.
  const role = 'arn:aws:iam::111122223333:role/my-role-for-cluster';
  const source = 's3://sagemaker-lifecycle-demo/LifecycleScripts/base-config/';
  const controller = groupFromForm({ name: 'controller-group', instanceType: 'ml.m5.xlarge',
    count: '1', source, onCreate: 'on_create.sh', role, slurmNodeType: '', partition: '' });
  const { ThreadsPerCore, ...seed } = DEMO[0];
  assert.equal(ThreadsPerCore, 1);
  assert.deepEqual(controller, seed);
  const worker = groupFromForm({ name: ' worker-group ', instanceType: 'ml.c5.2xlarge', count: '4',
    source, onCreate: 'on_create.sh', role, slurmNodeType: '', partition: 'dev' });
  const { ThreadsPerCore: _, ...seed1 } = DEMO[1];
  assert.deepEqual(worker, seed1);
  // The per-group form of the Slurm roles.
  const compute = groupFromForm({ name: 'w', instanceType: 'ml.c5.2xlarge', count: '4', source,
    onCreate: 'on_create.sh', role: DEFAULT_ROLE, slurmNodeType: 'Compute', partition: 'dev' });
  assert.deepEqual(compute.SlurmConfig, { NodeType: 'Compute', PartitionNames: ['dev'] });
  assert.equal(compute.ExecutionRole, DEFAULT_ROLE);
});

test('empty fields are left for the API to name', () => {
  assert.deepEqual(groupFromForm({ name: '', instanceType: '', count: '', source: '', onCreate: '',
    role: '', slurmNodeType: '', partition: 'ignored' }), {});
  assert.equal(groupFromForm({ count: 'two' }).InstanceCount, 'two');
  assert.deepEqual(createRequest(' c1 ', 'None', []), { ClusterName: 'c1', InstanceGroups: [], NodeRecovery: 'None' });
});

test('a paste of the seed JSON or a whole request', () => {
  const text = readFileSync(new URL('../../examples/demo-cluster.json', import.meta.url), 'utf8');
  assert.deepEqual(requestFromPaste(text, 'demo', 'Automatic'),
    { ClusterName: 'demo', InstanceGroups: DEMO, NodeRecovery: 'Automatic' });
  assert.deepEqual(requestFromPaste(JSON.stringify({ ClusterName: 'x', InstanceGroups: [] }), 'y', ''),
    { ClusterName: 'x', InstanceGroups: [] });
  assert.throws(() => requestFromPaste('{oops', 'c', ''), /not JSON/);
  assert.throws(() => requestFromPaste('{"a": 1}', 'c', ''), /array of instance groups/);
});

test('SPEC_MEMBERS are the model\'s ClusterInstanceGroupSpecification', () => {
  assert.deepEqual([...SPEC_MEMBERS].sort(),
    Object.keys(MODEL.shapes.ClusterInstanceGroupSpecification.members).sort());
});

test('a scale sends the group as specified with the new count', () => {
  // DescribeCluster: the stored spec minus InstanceCount, plus output members.
  const details = { ...DEMO[1], CurrentCount: 4, TargetCount: 4, Status: 'InService' };
  delete details.InstanceCount;
  assert.deepEqual(scaledGroup(details, '6'), { ...DEMO[1], InstanceCount: 6 });
  const cluster = { ClusterName: 'demo', InstanceGroups: [{ ...details, InstanceGroupName: 'a' }, details] };
  assert.deepEqual(scaleRequest(cluster, 'worker-group', 0),
    { ClusterName: 'demo', InstanceGroups: [{ ...DEMO[1], InstanceCount: 0 }] });
  assert.throws(() => scaleRequest(cluster, 'nope', 1), /no instance group nope/);
});
