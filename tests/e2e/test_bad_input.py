"""End-to-end: malformed and hostile requests, sent raw with http.client.

Each row of CASES is one request (signed with botocore's SigV4Auth and the admin
profile's key unless it says otherwise) with the HTTP status and `__type` hpodd
must answer. Afterwards the daemon must still serve, and none of the requests may
have left anything behind.
"""
import datetime
import http.client
import json
import os
import socket
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group  # noqa: E402

import botocore.auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

JSON_CT = "application/x-amz-json-1.1"
BODY_LIMIT = 8 * 1024 * 1024  # hpodd's default --max-request-bytes


def J(obj):
    return json.dumps(obj).encode()


def create(name, **extra):
    req = {"ClusterName": name, "InstanceGroups": [group("g", 1)]}
    req.update(extra)
    return req


def nested(depth, open_="[", close="]"):
    return open_ * depth + close * depth


def nested_objects(depth):
    return '{"a":' * depth + "1" + "}" * depth


class Case:
    def __init__(self, name, status, type_, *, op="ListClusters", body=b"{}", method="POST",
                 path="/", headers=None, drop=(), sign="admin", after_sign=None, when=None,
                 message=None):
        self.name, self.status, self.type = name, status, type_
        self.op, self.body, self.method, self.path = op, body, method, path
        self.headers = headers or {}
        self.drop = drop            # headers to remove before signing
        self.sign = sign            # "admin", "unknown-key", or None (unsigned)
        self.after_sign = after_sign  # fn(headers dict) -> (headers, body|None)
        self.when = when            # signing time offset (timedelta)
        self.message = message      # substring of the message


def tamper_body(new_body):
    return lambda h, b: (h, new_body)


def set_header(name, value):
    def f(h, b):
        h = dict(h)
        h[name] = value
        return h, b
    return f


def add_second_authorization(h, b):
    return list(h.items()) + [("Authorization", h["Authorization"])], b


def scope_region(h, b):
    auth = h["Authorization"].replace("/us-west-2/", "/eu-west-1/")
    return dict(h, Authorization=auth), b


CASES = [
    # positive controls: the table's machinery itself works
    Case("plain ListClusters", 200, None),
    Case("empty body is {}", 200, None, body=b""),
    Case("charset parameter on Content-Type", 200, None,
         headers={"Content-Type": JSON_CT + "; charset=utf-8"}),
    # body encoding
    Case("invalid JSON", 400, "SerializationException", body=b'{"ClusterName": '),
    Case("body is a JSON array", 400, "SerializationException", body=b"[]"),
    Case("body is a JSON string", 400, "SerializationException", body=b'"x"'),
    Case("trailing garbage", 400, "SerializationException", body=b"{} {}"),
    Case("invalid UTF-8 in a string", 400, "SerializationException", op="CreateCluster",
         body=b'{"ClusterName": "bad-\xff\xfe", "InstanceGroups": []}'),
    Case("lone UTF-16 surrogate escape", 400, "SerializationException", op="DescribeCluster",
         body=b'{"ClusterName": "\\ud800"}'),
    Case("deeply nested arrays", 400, "SerializationException", op="DescribeCluster",
         body=('{"ClusterName": %s}' % nested(200000)).encode()),
    Case("deeply nested objects under an unknown member", 400, "ValidationException",
         op="CreateCluster",
         body=('{"ClusterName": "bad-deep", "InstanceGroups": [], "Extra": %s}'
               % nested_objects(200000)).encode()),
    Case("deeply nested arrays inside Tags", 400, "SerializationException", op="CreateCluster",
         body=('{"ClusterName": "bad-deep-tags", "InstanceGroups": [], "Tags": %s}'
               % nested(200000)).encode()),
    # protocol
    Case("wrong Content-Type", 400, "SerializationException", op="CreateCluster",
         body=J(create("bad-content-type")), headers={"Content-Type": "text/plain"}),
    Case("no Content-Type", 400, "SerializationException", op="CreateCluster",
         body=J(create("bad-no-content-type")), drop=("Content-Type",)),
    Case("missing X-Amz-Target", 400, "UnknownOperationException", op=None,
         body=J(create("bad-no-target"))),
    Case("unknown operation", 400, "UnknownOperationException", op="NoSuchOperation"),
    Case("SageMaker operation hpod does not serve", 400, "UnknownOperationException",
         op="CreateTrainingJob", body=b"{}"),
    Case("another service's target prefix", 400, "UnknownOperationException",
         headers={"X-Amz-Target": "DynamoDB_20120810.ListTables"}),
    # GET / is the web console (tests/e2e/test_http_routes.py); other GETs are the API's.
    Case("GET of another path", 400, "UnknownOperationException", method="GET",
         path="/clusters", body=b""),
    Case("POST to another path", 400, "UnknownOperationException", path="/2017-07-24/clusters",
         op="CreateCluster", body=J(create("bad-path"))),
    # shapes and constraints
    Case("string for an integer", 400, "SerializationException", body=J({"MaxResults": "10"})),
    Case("fraction for an integer", 400, "SerializationException", body=J({"MaxResults": 1.5})),
    Case("boolean for an integer", 400, "SerializationException", body=J({"MaxResults": True})),
    Case("number for a string", 400, "SerializationException", op="DescribeCluster",
         body=J({"ClusterName": 42})),
    Case("object for a list", 400, "SerializationException", op="CreateCluster",
         body=J({"ClusterName": "bad-shape", "InstanceGroups": {"a": 1}})),
    Case("MaxResults 0", 400, "ValidationException", body=J({"MaxResults": 0}),
         message="Member must have value greater than or equal to 1"),
    Case("MaxResults 101", 400, "ValidationException", body=J({"MaxResults": 101}),
         message="Member must have value less than or equal to 100"),
    Case("bad enum", 400, "ValidationException", body=J({"SortOrder": "Sideways"}),
         message="enum value set"),
    Case("unknown top-level field", 400, "ValidationException", op="CreateCluster",
         body=J(create("bad-unknown-field", Foo=1)), message="Foo"),
    Case("unknown field inside a group", 400, "ValidationException", op="CreateCluster",
         body=J(create("bad-unknown-group-field",
                       InstanceGroups=[group("g", 1, Colour="blue")])), message="Colour"),
    Case("union with two members", 400, "ValidationException", op="CreateCluster",
         body=J(create("bad-union", InstanceGroups=[group("g", 1, InstanceStorageConfigs=[
             {"EbsVolumeConfig": {"VolumeSizeInGB": 100},
              "FsxLustreConfig": {"DnsName": "fs-0123.fsx.us-west-2.amazonaws.com",
                                  "MountName": "abcdefgh"}}])])),
         message="exactly one"),
    Case("union with no member", 400, "ValidationException", op="CreateCluster",
         body=J(create("bad-empty-union",
                       InstanceGroups=[group("g", 1, InstanceStorageConfigs=[{}])]))),
    Case("missing required ClusterName", 400, "ValidationException", op="DescribeCluster",
         body=b"{}", message="Value null at 'clusterName' failed to satisfy constraint: "
                             "Member must not be null"),
    Case("null required ClusterName", 400, "ValidationException", op="CreateCluster",
         body=J({"ClusterName": None, "InstanceGroups": [group("g", 1)]})),
    Case("InstanceGroups missing", 400, "ValidationException", op="CreateCluster",
         body=J({"ClusterName": "bad-no-groups"})),
    Case("InstanceCount -1", 400, "ValidationException", op="CreateCluster",
         body=J(create("bad-count", InstanceGroups=[group("g", -1)]))),
    Case("ClusterName too long", 400, "ValidationException", op="CreateCluster",
         body=J(create("b" * 64))),
    Case("ClusterName with a trailing dash", 400, "ValidationException", op="CreateCluster",
         body=J(create("bad-name-"))),
    Case("more than 20000 nodes", 400, "ResourceLimitExceeded", op="CreateCluster",
         body=J(create("bad-too-big", InstanceGroups=[group("g%d" % i, 6758) for i in range(3)]))),
    Case("garbage NextToken", 400, "ValidationException", body=J({"NextToken": "not-a-token"})),
    # authentication
    Case("unsigned", 403, "MissingAuthenticationTokenException", op="CreateCluster",
         body=J(create("bad-unsigned")), sign=None),
    Case("malformed Authorization", 400, "IncompleteSignatureException", op="CreateCluster",
         body=J(create("bad-auth-header")),
         after_sign=set_header("Authorization", "AWS4-HMAC-SHA256 garbage")),
    Case("Authorization without Signature", 400, "IncompleteSignatureException",
         after_sign=lambda h, b: (dict(h, Authorization=h["Authorization"].split(
             ", Signature=")[0]), b)),
    Case("two Authorization headers", 400, "IncompleteSignatureException",
         after_sign=add_second_authorization),
    Case("X-Amz-Date an hour old", 403, "InvalidSignatureException", op="CreateCluster",
         body=J(create("bad-old-date")), when=datetime.timedelta(hours=-1),
         message="Signature expired"),
    Case("X-Amz-Date an hour ahead", 403, "InvalidSignatureException",
         when=datetime.timedelta(hours=1), message="Signature not yet current"),
    Case("body changed after signing", 403, "InvalidSignatureException", op="CreateCluster",
         body=J(create("bad-signed-name")), after_sign=tamper_body(J(create("bad-tampered")))),
    Case("X-Amz-Target changed after signing", 403, "InvalidSignatureException",
         op="DescribeCluster", body=J({"ClusterName": "bad-target-swap"}),
         after_sign=set_header("X-Amz-Target", "SageMaker.DeleteCluster")),
    Case("credential scoped to another region", 403, "InvalidSignatureException",
         after_sign=scope_region),
    Case("unknown access key", 403, "UnrecognizedClientException", sign="unknown-key",
         op="CreateCluster", body=J(create("bad-unknown-key"))),
]


class BadInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=50).start()
        cls.addClassCleanup(cls.d.cleanup)
        c = hpodtest.read_profile(os.path.join(cls.d.aws_dir, "credentials"), "hpod")
        cls.creds = Credentials(c["aws_access_key_id"], c["aws_secret_access_key"])

    def build(self, case):
        headers = {"Content-Type": JSON_CT}
        if case.op:
            headers["X-Amz-Target"] = "SageMaker." + case.op
        headers.update(case.headers)
        for h in case.drop:
            headers.pop(h, None)
        body = case.body
        if case.sign:
            creds = self.creds if case.sign == "admin" else Credentials(
                "HPODNOSUCHKEY0000000", self.creds.secret_key)
            req = AWSRequest(method=case.method, url=self.d.endpoint + case.path, data=body,
                             headers=headers)
            signer = botocore.auth.SigV4Auth(creds, "sagemaker", hpodtest.REGION)
            if case.when is not None:
                at = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) + case.when
                with mock.patch.object(botocore.auth, "get_current_datetime", return_value=at):
                    signer.add_auth(req)
            else:
                signer.add_auth(req)
            headers = dict(req.headers.items())
        if case.after_sign:
            headers, new_body = case.after_sign(headers, body)
            body = body if new_body is None else new_body
        return headers, body

    def send(self, method, path, headers, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=60)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            items = headers.items() if isinstance(headers, dict) else headers
            for k, v in items:
                conn.putheader(k, v)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            try:
                conn.send(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer (and close) before reading everything
            resp = conn.getresponse()
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
        finally:
            conn.close()

    def check_json_error(self, case, status, headers, raw):
        self.assertEqual(headers.get("content-type"), JSON_CT)
        self.assertTrue(headers.get("x-amzn-requestid"), headers)
        body = json.loads(raw)
        self.assertEqual(body.get("__type"), case.type, body)
        self.assertEqual(headers.get("x-amzn-errortype"), case.type)
        message = body.get("message") or body.get("Message")
        self.assertIsInstance(message, str)
        self.assertTrue(message)
        if case.message:
            self.assertIn(case.message, message)

    def test_table(self):
        for case in CASES:
            with self.subTest(case.name):
                headers, body = self.build(case)
                status, rheaders, raw = self.send(case.method, case.path, headers, body)
                self.assertEqual(status, case.status, raw[:500])
                if case.type is None:
                    self.assertEqual(rheaders.get("content-type"), JSON_CT)
                    json.loads(raw)
                else:
                    self.check_json_error(case, status, rheaders, raw)
        self.assert_alive_and_untouched()

    def test_body_over_the_limit(self):
        # 413 before the body is read; the daemon carries on.
        body = b'{"ClusterName": "bad-huge", "Tags": [' + b" " * BODY_LIMIT + b"]}"
        case = Case("huge", 413, None, op="CreateCluster", body=body)
        headers, body = self.build(case)
        status, _, _ = self.send("POST", "/", headers, body)
        self.assertEqual(status, 413)
        # Just under the limit is read and judged (here: an empty Tags list is fine,
        # the missing InstanceGroups is not).
        body = b'{"ClusterName": "bad-big", "Tags": [' + b" " * (BODY_LIMIT - 100) + b"]}"
        headers, body = self.build(Case("big", 400, None, op="CreateCluster", body=body))
        status, _, raw = self.send("POST", "/", headers, body)
        self.assertEqual(status, 400, raw[:300])
        self.assertEqual(json.loads(raw)["__type"], "ValidationException")
        self.assert_alive_and_untouched()

    def test_http_level_garbage(self):
        # Not HTTP at all, then a header section over the 64 KiB limit.
        for raw_request, want in (
                (b"HELLO\r\n\r\n", b" 400 "),
                (b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n",
                 b" 431 ")):
            with self.subTest(want=want):
                with socket.create_connection(("127.0.0.1", self.d.port), timeout=30) as s:
                    s.sendall(raw_request)
                    reply = s.recv(4096)
                self.assertIn(want, reply.split(b"\r\n", 1)[0])
        self.assert_alive_and_untouched()

    def test_null_members(self):
        """JSON null is how some clients say "absent" (the validator accepts it so).

        Each request must be answered as if the member were absent, never with a
        5xx, and must leave the daemon serving. The daemon is restarted after a case
        that breaks it, so every case is judged on its own."""
        sm = self.d.boto3()
        sm.create_cluster(ClusterName="nulls", InstanceGroups=[group("g", 1)])
        hpodtest.wait_cluster(sm, "nulls", "InService")
        node = sm.list_cluster_nodes(ClusterName="nulls",
                                     IncludeNodeLogicalIds=True)["ClusterNodeSummaries"][0]
        cases = [
            ("ListClusters", {"MaxResults": None}, 200),
            ("ListClusters", {"NextToken": None}, 200),
            ("ListClusters", {"SortBy": None, "SortOrder": None}, 200),
            ("ListClusters", {"NameContains": None}, 200),
            ("ListClusterNodes", {"ClusterName": "nulls", "IncludeNodeLogicalIds": None}, 200),
            ("ListClusterEvents", {"ClusterName": "nulls", "NodeId": None}, 200),
            ("DescribeClusterNode", {"ClusterName": "nulls", "NodeId": node["InstanceId"],
                                     "NodeLogicalId": None}, 200),
            ("DescribeClusterNode", {"ClusterName": "nulls", "NodeId": None}, 400),
            ("BatchDeleteClusterNodes", {"ClusterName": "nulls", "NodeIds": None}, 400),
            ("CreateCluster", {"ClusterName": "null-mode", "NodeProvisioningMode": None,
                               "InstanceGroups": [group("g", 0, ImageId=None)]}, 200),
            # hpod requires InstanceType; null is its absence.
            ("CreateCluster", {"ClusterName": "null-type",
                               "InstanceGroups": [group("g", 1, InstanceType=None)]}, 400),
        ]
        broken = []
        for op, body, want in cases:
            with self.subTest(op=op, body=body):
                headers, raw_body = self.build(Case(op, want, None, op=op, body=J(body)))
                status, _, raw = self.send("POST", "/", headers, raw_body)
                try:
                    for c in sm.list_clusters()["ClusterSummaries"]:
                        sm.describe_cluster(ClusterName=c["ClusterName"])
                        sm.list_cluster_nodes(ClusterName=c["ClusterName"])
                    alive = True
                except Exception as e:  # noqa: BLE001
                    alive = False
                    broken.append("%s %s -> %d, then reads failed: %s"
                                  % (op, json.dumps(body), status, e))
                    self.d.restart()
                    sm = self.d.boto3()
                self.assertTrue(alive, broken[-1] if broken else "")
                self.assertEqual(status, want, raw[:300])
        names = {c["ClusterName"] for c in sm.list_clusters()["ClusterSummaries"]}
        self.assertLessEqual(names, {"nulls", "null-mode", "null-type"})
        for name in names:
            sm.delete_cluster(ClusterName=name)
        for name in names:
            hpodtest.wait_cluster(sm, name, None)

    def assert_alive_and_untouched(self):
        self.assertIsNone(self.d.proc.poll(), "hpodd exited")
        sm = self.d.boto3()
        self.assertEqual(sm.list_clusters()["ClusterSummaries"], [])
        self.assertEqual(self.d.fake_nodes(live_only=False), {})


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()
