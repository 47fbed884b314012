"""End-to-end: hpodd's HTTP routes on a real daemon, over loopback with http.client.

GET /healthz answers 200 {"status": "ok"} to anyone (no signature, no key), HEAD too;
every request that no route serves still gets the API's own error (400
UnknownOperationException in the AWS JSON shape, as tests/e2e/test_bad_input.py also
requires for signed requests), with an Allow header where the path exists under
another method; POST / stays the SigV4-authenticated SageMaker API.
"""
import http.client
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402

JSON_CT = "application/x-amz-json-1.1"


class HttpRoutesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon().start()
        cls.addClassCleanup(cls.d.cleanup)

    def request(self, method, path, body=b"", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
        finally:
            conn.close()

    def test_healthz_needs_no_credentials(self):
        status, headers, body = self.request("GET", "/healthz")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers.get("content-type"), "application/json")
        self.assertEqual(json.loads(body), {"status": "ok"})
        # The query string does not change the path.
        status, _, body = self.request("GET", "/healthz?probe=1")
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        status, headers, body = self.request("HEAD", "/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        self.assertEqual(headers.get("content-length"), str(len('{"status":"ok"}')))

    def assert_api_error(self, method, path, allow=None, body=b""):
        status, headers, raw = self.request(method, path, body=body,
                                            headers={"Content-Type": JSON_CT})
        self.assertEqual(status, 400, raw)
        self.assertEqual(headers.get("content-type"), JSON_CT)
        self.assertTrue(headers.get("x-amzn-requestid"), headers)
        self.assertEqual(headers.get("x-amzn-errortype"), "UnknownOperationException")
        err = json.loads(raw)
        self.assertEqual(err["__type"], "UnknownOperationException")
        self.assertIn("hpod serves the SageMaker API as POST / (got %s %s)"
                      % (method, path.split("?")[0]), err["message"])
        self.assertEqual(headers.get("allow"), allow)

    def test_unrouted_requests_get_the_api_error(self):
        self.assert_api_error("GET", "/", allow="POST")
        self.assert_api_error("DELETE", "/", allow="POST")
        self.assert_api_error("POST", "/foo", body=b"{}")
        self.assert_api_error("POST", "/healthz", allow="GET, HEAD", body=b"{}")
        self.assert_api_error("GET", "/metrics")  # not served yet
        self.assert_api_error("GET", "/healthz/")

    def test_post_root_is_still_the_signed_api(self):
        status, headers, raw = self.request(
            "POST", "/", body=b"{}",
            headers={"Content-Type": JSON_CT, "X-Amz-Target": "SageMaker.ListClusters"})
        self.assertEqual(status, 403, raw)
        self.assertEqual(json.loads(raw)["__type"], "MissingAuthenticationTokenException")
        self.assertIsNone(headers.get("allow"))


if __name__ == "__main__":
    hpodtest.main()
