"""End-to-end check of the throw-away S3 server (s3server.SwiftS3) other e2e tests use.

One Swift + s3api is started for the class; requests are plain SigV4 over
http.client (s3server.request), so neither boto3 nor the aws CLI is needed.
The last test (named to sort last: unittest runs methods alphabetically)
stops the server and checks that nothing it started is left behind.
Exits 77 (skipped) when the swift packages are missing.
"""
import os
import sys
import time
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
import s3server  # noqa: E402
from s3server import SwiftS3  # noqa: E402

NS = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
BUCKET = "sagemaker-lcs"
OBJECTS = {
    "lcs/on_create.sh": b"#!/bin/bash\necho on_create\n",
    "lcs/utils/x.sh": b"#!/bin/bash\necho x\n",
    "other/y.txt": b"not under lcs/",
    "odd/a b+c=d~e.sh": b"a key that needs percent-encoding",
}


def _list_v2(s3, **query):
    query = dict({"list-type": "2"}, **query)
    status, _, body = s3.request("GET", BUCKET, query=query)
    if status != 200:
        raise AssertionError("ListObjectsV2 %s: HTTP %d %s" % (query, status, body))
    root = ET.fromstring(body)
    keys = [e.text for e in root.findall("s3:Contents/s3:Key", NS)]
    truncated = root.findtext("s3:IsTruncated", namespaces=NS)
    token = root.findtext("s3:NextContinuationToken", namespaces=NS)
    return keys, truncated, token


def _error_code(body):
    return ET.fromstring(body).findtext("Code")


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _processes_mentioning(text):
    """PIDs whose command line contains `text` (e.g. the server's temp dir)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if text.encode() in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


class SwiftS3Test(unittest.TestCase):
    s3 = None

    @classmethod
    def setUpClass(cls):
        cls.s3 = SwiftS3()
        t0 = time.monotonic()
        cls.s3.start()
        cls.startup_s = time.monotonic() - t0
        print("SwiftS3 start-up: %.1f s (%s)" % (cls.startup_s, cls.s3.endpoint), flush=True)
        cls.root = cls.s3.root
        cls.s3.create_bucket(BUCKET)
        for key, data in OBJECTS.items():
            cls.s3.put(BUCKET, key, data)

    @classmethod
    def tearDownClass(cls):
        if cls.s3 is not None:
            cls.s3.stop()

    def setUp(self):
        if self.s3.root is None:
            self.skipTest("server already stopped")

    def test_attributes(self):
        self.assertRegex(self.s3.endpoint, r"^http://127\.0\.0\.1:\d+$")
        self.assertEqual(self.s3.access_key, "test:tester")
        self.assertEqual(self.s3.secret_key, "testing")
        self.assertEqual(self.s3.region, "us-east-1")

    def test_get_object_returns_content(self):
        for key, data in OBJECTS.items():
            status, headers, body = self.s3.request("GET", BUCKET, key)
            self.assertEqual(status, 200, "%s: %s\n%s" % (key, body, self.s3.log_tail()))
            self.assertEqual(body, data)
            self.assertEqual(int(headers["content-length"]), len(data))

    def test_missing_key_is_no_such_key(self):
        status, _, body = self.s3.request("GET", BUCKET, "lcs/absent.sh")
        self.assertEqual(status, 404)
        self.assertEqual(_error_code(body), "NoSuchKey")

    def test_list_v2_prefix(self):
        keys, truncated, token = _list_v2(self.s3, prefix="lcs/")
        self.assertEqual(keys, ["lcs/on_create.sh", "lcs/utils/x.sh"])
        self.assertEqual(truncated, "false")
        self.assertIsNone(token)

    def test_list_v2_paginates_with_continuation_token(self):
        keys1, truncated1, token1 = _list_v2(self.s3, prefix="lcs/", **{"max-keys": "1"})
        self.assertEqual(keys1, ["lcs/on_create.sh"])
        self.assertEqual(truncated1, "true")
        self.assertTrue(token1)
        keys2, truncated2, token2 = _list_v2(
            self.s3, prefix="lcs/", **{"max-keys": "1", "continuation-token": token1})
        self.assertEqual(keys2, ["lcs/utils/x.sh"])
        self.assertEqual(truncated2, "false")
        self.assertIsNone(token2)

    def test_list_v2_delimiter(self):
        status, _, body = self.s3.request(
            "GET", BUCKET, query={"list-type": "2", "prefix": "lcs/", "delimiter": "/"})
        self.assertEqual(status, 200)
        root = ET.fromstring(body)
        self.assertEqual([e.text for e in root.findall("s3:Contents/s3:Key", NS)],
                         ["lcs/on_create.sh"])
        self.assertEqual([e.text for e in root.findall("s3:CommonPrefixes/s3:Prefix", NS)],
                         ["lcs/utils/"])

    def test_wrong_secret_is_signature_does_not_match(self):
        status, _, body = self.s3.request("GET", BUCKET, "lcs/on_create.sh",
                                          secret_key="not-the-secret")
        self.assertEqual(status, 403)
        self.assertEqual(_error_code(body), "SignatureDoesNotMatch")

    def test_unknown_access_key_is_signature_does_not_match(self):
        # AWS answers InvalidAccessKeyId; Swift's tempauth cannot tell an
        # unknown user from a bad signature and s3api answers this.
        url = s3server.object_url(self.s3.endpoint, BUCKET, "lcs/on_create.sh")
        status, _, body = s3server.request("GET", url, "nobody:none", self.s3.secret_key,
                                           self.s3.region)
        self.assertEqual(status, 403)
        self.assertEqual(_error_code(body), "SignatureDoesNotMatch")

    def test_missing_bucket_is_no_such_bucket(self):
        status, _, body = self.s3.request("GET", "no-such-bucket", "x")
        self.assertEqual(status, 404)
        self.assertEqual(_error_code(body), "NoSuchBucket")

    def test_zz_stop_leaves_nothing(self):
        s3 = self.s3
        pids = s3.pids()
        root = s3.root
        self.assertEqual(len(pids), 4)
        self.assertTrue(all(_alive(p) for p in pids))
        s3.stop()
        self.assertEqual([p for p in pids if _alive(p)], [])
        self.assertEqual(_processes_mentioning(root), [])
        self.assertFalse(os.path.exists(root))
        s3.stop()  # idempotent
        self.assertEqual(s3.pids(), [])


if __name__ == "__main__":
    if not SwiftS3.available():
        print("SKIP: swift (proxy/account/container/object servers with s3api) is not installed")
        sys.exit(hpodtest.SKIP)
    hpodtest.main()
