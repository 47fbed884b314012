// The small pure pieces of the console: routes, names, node rows, series, the API
// client's request and error handling, and where keys are stored.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ApiClient, ApiError, parseError } from '../src/lib/api.js';
import { clearCredentials, loadCredentials, saveCredentials } from '../src/lib/creds.js';
import { formatBytes, formatTime } from '../src/lib/format.js';
import { healthVerdict, ipOf, nodeRows } from '../src/lib/nodes.js';
import { href, parseRoute } from '../src/lib/router.js';
import { columns, formatTick, formatValue, slug, sortSeries } from '../src/lib/series.js';
import { signRequest } from '../src/lib/sigv4.js';
import { clusterId, sessionTarget, shortHostname } from '../src/lib/target.js';

test('routes', () => {
  assert.deepEqual(parseRoute(''), { name: 'clusters', params: [] });
  assert.deepEqual(parseRoute('#/signin'), { name: 'signin', params: [] });
  assert.deepEqual(parseRoute('#/clusters/a-b'), { name: 'cluster', params: ['a-b'] });
  assert.deepEqual(parseRoute('#/clusters/c/nodes/i-0123'), { name: 'node', params: ['c', 'i-0123'] });
  assert.deepEqual(parseRoute('#/clusters/c/training'), { name: 'training', params: ['c'] });
  assert.deepEqual(parseRoute('#/nonsense'), { name: 'clusters', params: [] });
  assert.equal(href('node', 'c', 'i-1'), '#/clusters/c/nodes/i-1');
  assert.deepEqual(parseRoute(href('cluster', 'a/b c')), { name: 'cluster', params: ['a/b c'] });
});

test('a malformed escape in the address falls back to the clusters page', () => {
  assert.throws(() => decodeURIComponent('%E0'), URIError);
  for (const hash of ['#/clusters/%E0', '#/clusters/%', '#/clusters/c/nodes/%ZZ', '#/clusters/%E0/training']) {
    assert.deepEqual(parseRoute(hash), { name: 'clusters', params: [] }, hash);
  }
  assert.deepEqual(parseRoute('#/clusters/%C3%A9'), { name: 'cluster', params: ['\u00e9'] });
});

test('session targets and names', () => {
  const arn = 'arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef012345';
  assert.equal(clusterId(arn), 'abcdef012345');
  assert.equal(sessionTarget(arn, 'workers', 'i-0123456789abcdef0'),
    'sagemaker-cluster:abcdef012345_workers-i-0123456789abcdef0');
  assert.equal(shortHostname('ip-10-77-1-11.us-west-2.compute.internal'), 'ip-10-77-1-11');
  assert.equal(ipOf('ip-10-77-1-11.us-west-2.compute.internal'), '10.77.1.11');
  assert.equal(ipOf(undefined), '');
});

test('node rows join Slurm and recoveries', () => {
  const nodes = [
    { InstanceId: 'i-1', InstanceGroupName: 'w', InstanceStatus: { Status: 'Running' },
      PrivateDnsHostname: 'ip-10-0-0-1.x' },
    { InstanceId: 'i-2', InstanceGroupName: 'w', InstanceStatus: { Status: 'Running' },
      PrivateDnsHostname: 'ip-10-0-0-2.x' },
    { InstanceId: 'i-3', InstanceGroupName: 'w', InstanceStatus: { Status: 'Failure', Message: 'OnCreate exited 1' } },
  ];
  const slurm = [{ NodeName: 'ip-10-0-0-1', State: 'IDLE' },
    { NodeName: 'ip-10-0-0-2', State: 'FAIL', Reason: 'Action:Replace' }];
  const rows = nodeRows(nodes, slurm, []);
  assert.deepEqual(rows.map((r) => [r.hostname, r.ip, r.slurmState, r.health.text]), [
    ['ip-10-0-0-1', '10.0.0.1', 'IDLE', 'Healthy'],
    ['ip-10-0-0-2', '10.0.0.2', 'FAIL (Action:Replace)', 'Action:Replace'],
    ['', '', '—', 'OnCreate exited 1'],
  ]);
  const rec = { NodeId: 'i-1', Status: 'InProgress', Action: 'Replace', Phase: 'Marked',
    Check: 'heartbeat', Reason: 'no heartbeat for 6 s' };
  assert.deepEqual(healthVerdict(nodes[0], slurm[0], [rec]),
    { kind: 'bad', text: 'Recovering (Replace, Marked): heartbeat: no heartbeat for 6 s' });
  assert.equal(healthVerdict(nodes[0], slurm[0], [{ ...rec, Status: 'Succeeded' }]).text, 'Healthy');
});

test('series', () => {
  const s = sortSeries([{ Tag: 'zeta' }, { Tag: 'train/lr' }, { Tag: 'alpha' }, { Tag: 'train/loss' }]);
  assert.deepEqual(s.map((x) => x.Tag), ['train/loss', 'train/lr', 'alpha', 'zeta']);
  assert.equal(slug('train/loss'), 'train-loss');
  assert.deepEqual(columns([{ Step: 2, Value: 1.5 }, { Step: 1, Value: NaN }]), [[1, 2], [null, 1.5]]);
  assert.deepEqual([6.25523042678833, 0.00006101, 27501.4, 2.5e6, 0, 1.15, -0.5].map(formatValue),
    ['6.26', '6.1e-5', '27.5k', '2.5M', '0', '1.15', '-0.5']);
  assert.deepEqual([[19.1275, 0.0005], [20000, 20000], [0.0004, 0.0002], [6.24, 0.02], [75, 25], [2, 1]]
    .map(([v, inc]) => formatTick(v, inc)), ['19.1275', '20k', '4.0e-4', '6.24', '75', '2']);
});

test('formats', () => {
  assert.equal(formatTime(1700958300), '2023-11-26 00:25:00Z');
  assert.equal(formatTime(undefined), '—');
  assert.equal(formatBytes(1536), '1.5 KiB');
});

test('API errors are shown as the API gives them', () => {
  const e = parseError(400, '{"__type":"com.amazonaws.sagemaker#ValidationException","message":"bad"}');
  assert.equal(e.type, 'ValidationException');
  assert.equal(String(e), 'ValidationException: bad');
  assert.equal(String(parseError(403, '{"__type":"AccessDeniedException","Message":"no"}')),
    'AccessDeniedException: no');
  assert.equal(String(parseError(502, 'Bad gateway')), 'Bad gateway');
  assert.equal(String(parseError(500, '')), 'HTTP 500');
});

test('a call is a signed POST / with the target and JSON body', async () => {
  const sent = [];
  const fetchFn = async (url, init) => {
    sent.push({ url, init });
    return { ok: true, status: 200, text: async () => '{"Role":"admin","AccessKeyId":"AK"}' };
  };
  const creds = { accessKeyId: 'AK', secretAccessKey: 'SK', region: 'us-west-2' };
  const now = new Date(Date.UTC(2025, 0, 2, 3, 4, 5));
  const client = new ApiClient(creds, { host: '127.0.0.1:9', origin: 'http://127.0.0.1:9' }, fetchFn, () => now);
  assert.deepEqual(await client.call('HpodGetCallerIdentity'), { Role: 'admin', AccessKeyId: 'AK' });
  const { url, init } = sent[0];
  assert.equal(url, 'http://127.0.0.1:9/');
  assert.equal(init.method, 'POST');
  assert.equal(init.body, '{}');
  assert.equal(init.credentials, 'omit');
  const headers = Object.fromEntries(init.headers);
  assert.equal(headers['X-Amz-Target'], 'SageMaker.HpodGetCallerIdentity');
  assert.equal(headers['Content-Type'], 'application/x-amz-json-1.1');
  assert.equal(headers.Host, undefined, 'the browser sets Host');
  const want = signRequest({ method: 'POST', target: '/', body: '{}', headers: [['Host', '127.0.0.1:9'],
    ['Content-Type', 'application/x-amz-json-1.1'], ['X-Amz-Target', 'SageMaker.HpodGetCallerIdentity']] },
  creds, 'us-west-2', 'sagemaker', now);
  assert.equal(headers.Authorization, want.authorization);
  assert.match(headers.Authorization, /SignedHeaders=content-type;host;x-amz-date;x-amz-target,/);
});

test('failed calls reject with ApiError', async () => {
  const client = new ApiClient({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r' },
    { host: 'h', origin: 'http://h' }, async () => ({ ok: false, status: 403,
      text: async () => '{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}' }));
  await assert.rejects(client.call('ListClusters'), (e) => e instanceof ApiError &&
    e.type === 'UnrecognizedClientException' && e.status === 403);
  const down = new ApiClient({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r' },
    { host: 'h', origin: 'http://h' }, async () => { throw new TypeError('Failed to fetch'); });
  await assert.rejects(down.call('ListClusters'), /Could not reach hpodd: Failed to fetch/);
});

test('throttled calls are retried with backoff, then given up', async () => {
  const throttled = { ok: false, status: 400,
    text: async () => '{"__type":"ThrottlingException","message":"another training query is being answered"}' };
  const answers = [throttled, throttled, { ok: true, status: 200, text: async () => '{"Series":[]}' }];
  const waits = [];
  const dates = [];
  const client = new ApiClient({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r' },
    { host: 'h', origin: 'http://h' }, async (u, init) => {
      dates.push(Object.fromEntries(init.headers)['X-Amz-Date']);
      return answers.shift();
    }, () => new Date(Date.UTC(2025, 0, 2, 3, 4, 5 + dates.length)), async (ms) => { waits.push(ms); });
  assert.deepEqual(await client.call('HpodGetTrainingMetrics', { ClusterName: 'c', Path: 'p' }), { Series: [] });
  assert.equal(dates.length, 3);
  assert.equal(new Set(dates).size, 3, 'each attempt is signed anew');
  assert.equal(waits.length, 2);
  assert.ok(waits[0] >= 50 && waits[0] < 150 && waits[1] >= 100 && waits[1] < 300, String(waits));
  // Always throttled: the fourth answer is the caller's; other errors are not retried.
  let calls = 0;
  const busy = new ApiClient({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r' },
    { host: 'h', origin: 'http://h' }, async () => { calls += 1; return throttled; }, () => new Date(),
    async () => {});
  await assert.rejects(busy.call('HpodListTrainingRuns'), (e) => e.type === 'ThrottlingException');
  assert.equal(calls, 4);
  calls = 0;
  const refused = new ApiClient({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r' },
    { host: 'h', origin: 'http://h' }, async () => {
      calls += 1;
      return { ok: false, status: 400, text: async () => '{"__type":"ResourceLimitExceeded","message":"x"}' };
    }, () => new Date(), async () => {});
  await assert.rejects(refused.call('ListClusters'), (e) => e.type === 'ResourceLimitExceeded');
  assert.equal(calls, 1);
});

test('listAll follows NextToken', async () => {
  const pages = [{ ClusterSummaries: [1, 2], NextToken: 't' }, { ClusterSummaries: [3] }];
  const bodies = [];
  const client = new ApiClient({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r' },
    { host: 'h', origin: 'http://h' }, async (u, init) => {
      bodies.push(JSON.parse(init.body));
      return { ok: true, status: 200, text: async () => JSON.stringify(pages.shift()) };
    });
  assert.deepEqual(await client.listAll('ListClusters', {}, 'ClusterSummaries'), [1, 2, 3]);
  assert.deepEqual(bodies, [{}, { NextToken: 't' }]);
});

test('keys live in the given session storage only', () => {
  const store = new Map();
  const storage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, v),
    removeItem: (k) => store.delete(k) };
  assert.equal(loadCredentials(storage), null);
  saveCredentials({ accessKeyId: 'A', secretAccessKey: 'S', region: 'r', role: 'user', extra: 1 }, storage);
  assert.deepEqual(loadCredentials(storage), { accessKeyId: 'A', secretAccessKey: 'S', region: 'r', role: 'user' });
  clearCredentials(storage);
  assert.equal(store.size, 0);
  store.set('hpod.console.credentials', '{broken');
  assert.equal(loadCredentials(storage), null);
});
