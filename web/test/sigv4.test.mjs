// The console's SigV4 signer against the published AWS test suite, the botocore
// vectors hpodd's own signer is tested with (src/auth/testdata), and — when the
// machine has python3 with botocore — requests botocore signs right now.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { canonicalUri, removeDotSegments, signRequest } from '../src/lib/sigv4.js';

const TESTDATA = new URL('../../src/auth/testdata/', import.meta.url);

// aws-sig-v4-test-suite: AKIDEXAMPLE, 2015-08-30T12:36:00Z, us-east-1, "service"
// (the same cases as src/auth/sigv4_suite_test.cc).
const SUITE = [
  ['get-vanilla', 'GET', '/', [], '', 'host;x-amz-date',
    '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31'],
  ['get-vanilla-query-order-key-case', 'GET', '/?Param2=value2&Param1=value1', [], '',
    'host;x-amz-date', 'b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500'],
  ['get-vanilla-empty-query-key', 'GET', '/?Param1=value1', [], '', 'host;x-amz-date',
    'a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb'],
  ['get-vanilla-query-unreserved', 'GET',
    '/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=' +
    '-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', [], '',
    'host;x-amz-date', '9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197'],
  ['get-vanilla-utf8-query', 'GET', '/?\u1234=bar', [], '', 'host;x-amz-date',
    '2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04'],
  ['get-utf8', 'GET', '/\u1234', [], '', 'host;x-amz-date',
    '8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85'],
  ['get-space', 'GET', '/example space/', [], '', 'host;x-amz-date',
    '652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741'],
  ['get-relative-relative', 'GET', '/example1/example2/../..', [], '', 'host;x-amz-date',
    '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31'],
  ['get-slash-dot-slash', 'GET', '/./', [], '', 'host;x-amz-date',
    '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31'],
  ['get-slashes', 'GET', '//example//', [], '', 'host;x-amz-date',
    '9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84'],
  ['get-header-value-trim', 'GET', '/',
    [['My-Header1', ' value1'], ['My-Header2', ' "a   b   c"']], '',
    'host;my-header1;my-header2;x-amz-date',
    'acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736'],
  ['post-vanilla', 'POST', '/', [], '', 'host;x-amz-date',
    '5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b'],
  ['post-vanilla-query', 'POST', '/?Param1=value1', [], '', 'host;x-amz-date',
    '28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11'],
  ['post-header-key-sort', 'POST', '/', [['My-Header1', 'value1']], '',
    'host;my-header1;x-amz-date', 'c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c'],
  ['post-header-value-case', 'POST', '/', [['My-Header1', 'VALUE1']], '',
    'host;my-header1;x-amz-date', 'cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d'],
  ['post-x-www-form-urlencoded', 'POST', '/',
    [['Content-Type', 'application/x-www-form-urlencoded']], 'Param1=value1',
    'content-type;host;x-amz-date',
    'ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a'],
];

const SUITE_CREDS = { accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

function header(headers, name) {
  const found = headers.filter(([n]) => n.toLowerCase() === name.toLowerCase());
  assert.equal(found.length, 1, `one ${name} header`);
  return found[0][1];
}

test('signs the published SigV4 suite', () => {
  for (const [name, method, target, extra, body, signed, signature] of SUITE) {
    const out = signRequest({ method, target, body,
      headers: [['Host', 'example.amazonaws.com'], ...extra] }, SUITE_CREDS, 'us-east-1',
    'service', new Date(Date.UTC(2015, 7, 30, 12, 36, 0)));
    assert.equal(header(out.headers, 'X-Amz-Date'), '20150830T123600Z', name);
    assert.equal(out.authorization,
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, ' +
      `SignedHeaders=${signed}, Signature=${signature}`, name);
  }
});

test('signs as botocore did for the vectors hpodd is tested with', () => {
  const data = JSON.parse(readFileSync(new URL('botocore_vectors.json', TESTDATA), 'utf8'));
  const vectors = data.vectors.filter((v) => v.kind === 'header');
  assert.ok(vectors.length >= 6, 'header vectors present');
  for (const v of vectors) {
    const out = signRequest({ method: v.method, target: v.target, headers: v.headers, body: v.body },
      { accessKeyId: v.access_key_id, secretAccessKey: v.secret_access_key,
        sessionToken: v.session_token }, v.region, v.service, new Date(v.epoch_seconds * 1000));
    assert.equal(out.canonicalRequest, v.canonical_request, v.name);
    assert.equal(out.stringToSign, v.string_to_sign, v.name);
    assert.equal(out.authorization, v.authorization, v.name);
    const want = Object.fromEntries(v.signed_headers.map(([n, val]) => [n.toLowerCase(), val]));
    for (const [n, val] of out.headers) assert.equal(val, want[n.toLowerCase()], `${v.name}: ${n}`);
  }
});

test('canonical paths', () => {
  assert.equal(removeDotSegments('/a/./b/../c//d/'), '/a/c/d/');
  assert.equal(canonicalUri(''), '/');
  assert.equal(canonicalUri('/my%3Acluster'), '/my%253Acluster');
});

// The console's own requests (what fetch sends) signed by botocore now, when it is
// installed: python3 prints {name: Authorization} for the same inputs.
const BOTOCORE = `
import datetime, json, sys
from unittest import mock
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
cases = json.load(sys.stdin)
out = {}
for c in cases:
    r = AWSRequest(method='POST', url='http://' + c['host'] + '/', data=c['body'].encode(),
                   headers={'X-Amz-Target': c['target'],
                            'Content-Type': 'application/x-amz-json-1.1'})
    with mock.patch('botocore.auth.get_current_datetime',
                    return_value=datetime.datetime.utcfromtimestamp(c['epoch'])):
        SigV4Auth(Credentials(c['key'], c['secret'], c.get('token') or None), 'sagemaker',
                  c['region']).add_auth(r)
    out[c['name']] = r.headers['Authorization']
print(json.dumps(out))
`;

test('signs the console requests as botocore does', (t) => {
  const probe = spawnSync('python3', ['-c', 'import botocore'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    t.skip('python3 with botocore is not installed');
    return;
  }
  const cases = [
    { name: 'list', host: '127.0.0.1:8450', target: 'SageMaker.ListClusters', body: '{}' },
    { name: 'unicode', host: 'hpod.example', target: 'SageMaker.CreateCluster',
      body: JSON.stringify({ ClusterName: 'équipe-🚀', Tags: [{ Key: 'k', Value: 'a\n"b"' }] }) },
    { name: 'token', host: '10.0.0.1:8450', target: 'SageMaker.HpodStartSession',
      body: '{"Target":"x"}', token: 'FwoGZXIvYXdzEXAMPLE//token+/=' },
    { name: 'region', host: 'localhost:1', target: 'SageMaker.DeleteCluster', region: 'eu-west-1',
      body: '{"ClusterName":"c"}' },
  ].map((c, i) => ({ key: 'AKIAHPODCONSOLE' + i, secret: 'secret/+' + i, region: 'us-west-2',
    epoch: 1733000000 + i * 86399, ...c }));
  const p = spawnSync('python3', ['-c', BOTOCORE], { input: JSON.stringify(cases), encoding: 'utf8' });
  assert.equal(p.status, 0, p.stderr);
  const want = JSON.parse(p.stdout);
  for (const c of cases) {
    const out = signRequest({ method: 'POST', target: '/', body: c.body, headers: [
      ['Host', c.host], ['X-Amz-Target', c.target], ['Content-Type', 'application/x-amz-json-1.1']] },
    { accessKeyId: c.key, secretAccessKey: c.secret, sessionToken: c.token }, c.region, 'sagemaker',
    new Date(c.epoch * 1000));
    assert.equal(out.authorization, want[c.name], c.name);
  }
});
