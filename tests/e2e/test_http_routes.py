"""End-to-end: hpodd's HTTP routes on a real daemon, over loopback with http.client.

GET /healthz answers 200 {"status": "ok"} to anyone (no signature, no key), HEAD too;
GET / (and /index.html, /assets/*) is the web console from --console-dir, served to
anyone with its Content-Security-Policy, or, with no console found (an hpodd installed
without one), a 404 saying how to build it; every other request that no route serves
still gets the API's own error (400 UnknownOperationException in the AWS JSON shape,
as tests/e2e/test_bad_input.py also requires for signed requests), with an Allow header
where the path exists under another method; POST / stays the SigV4-authenticated
SageMaker API.
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402

JSON_CT = "application/x-amz-json-1.1"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")
INDEX = b'<!doctype html><script type="module" src="/assets/app-1a2b3c.js"></script>'
APP_JS = b"document.title = 'hpod';"


def write_console(root):
    """A built console as web/'s build leaves it: index.html plus hashed assets; plus
    a file beside index.html (not a console file) and a symlink out of the directory."""
    os.makedirs(os.path.join(root, "assets"))
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(INDEX)
    with open(os.path.join(root, "assets", "app-1a2b3c.js"), "wb") as f:
        f.write(APP_JS)
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write("not under assets/")
    with open(os.path.join(os.path.dirname(root), "secret.txt"), "w") as f:
        f.write("outside the console")
    os.symlink("../../secret.txt", os.path.join(root, "assets", "leak.txt"))


class HttpRoutesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = tempfile.mkdtemp(prefix="hpod-console-")
        cls.addClassCleanup(shutil.rmtree, base, True)
        cls.console_dir = os.path.join(base, "dist")
        write_console(cls.console_dir)
        cls.d = hpodtest.Daemon(extra_args=["--console-dir", cls.console_dir]).start()
        cls.addClassCleanup(cls.d.cleanup)

    def request(self, method, path, body=b"", headers=None, port=None):
        conn = http.client.HTTPConnection("127.0.0.1", port or self.d.port, timeout=30)
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
        self.assert_api_error("DELETE", "/", allow="POST, GET, HEAD")
        self.assert_api_error("POST", "/foo", body=b"{}")
        self.assert_api_error("POST", "/healthz", allow="GET, HEAD", body=b"{}")
        self.assert_api_error("GET", "/healthz/")
        self.assert_api_error("GET", "/notes.txt")  # beside index.html, not a console file
        self.assert_api_error("GET", "/assets")
        self.assert_api_error("POST", "/index.html", allow="GET, HEAD", body=b"{}")

    def assert_console_headers(self, headers):
        self.assertEqual(headers.get("content-security-policy"), CSP)
        self.assertEqual(headers.get("x-content-type-options"), "nosniff")
        self.assertEqual(headers.get("referrer-policy"), "no-referrer")
        self.assertEqual(headers.get("x-frame-options"), "DENY")

    def test_console_is_served_to_anyone_with_its_policy(self):
        for path in ("/", "/index.html", "/?next=clusters"):
            status, headers, body = self.request("GET", path)
            self.assertEqual((status, body), (200, INDEX), path)
            self.assertEqual(headers.get("content-type"), "text/html; charset=utf-8")
            self.assertEqual(headers.get("cache-control"), "no-cache")
            self.assert_console_headers(headers)
        status, headers, body = self.request("HEAD", "/")
        self.assertEqual((status, body), (200, b""))
        self.assertEqual(headers.get("content-length"), str(len(INDEX)))
        self.assert_console_headers(headers)
        status, headers, body = self.request("GET", "/assets/app-1a2b3c.js")
        self.assertEqual((status, body), (200, APP_JS))
        self.assertEqual(headers.get("content-type"), "text/javascript; charset=utf-8")
        self.assertEqual(headers.get("cache-control"), "public, max-age=31536000, immutable")
        self.assert_console_headers(headers)

    def test_console_serves_nothing_else(self):
        # Unknown names, a symlink out of the directory, and paths that climb out
        # of assets/: 404 as text, with the same policy.
        for path in ("/assets/nope.js", "/assets/leak.txt", "/assets/../notes.txt",
                     "/assets/%2e%2e/notes.txt", "/assets/..%2fnotes.txt",
                     "/assets/../../secret.txt"):
            status, headers, body = self.request("GET", path)
            self.assertEqual(status, 404, path)
            self.assertNotIn(b"not under assets", body)
            self.assertNotIn(b"outside the console", body)
            self.assertEqual(headers.get("content-type"), "text/plain; charset=utf-8")
            self.assert_console_headers(headers)

    def test_console_dir_that_does_not_load_stops_hpodd(self):
        missing = os.path.join(self.console_dir, "missing")
        d = hpodtest.Daemon()
        self.addCleanup(d.cleanup)
        p = subprocess.run([hpodtest.HPODD_FAKE, "--data-dir", d.data_dir, "--listen",
                            "127.0.0.1:0", "--console-dir", missing],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, **d.env_extra))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("--console-dir: console directory %s does not exist" % missing, p.stderr)

    def test_installed_hpodd_finds_its_console_beside_it_or_says_how_to_build_it(self):
        # An hpodd outside the build tree: <prefix>/bin/hpodd-fake.
        prefix = tempfile.mkdtemp(prefix="hpod-prefix-")
        self.addCleanup(shutil.rmtree, prefix, True)
        os.makedirs(os.path.join(prefix, "bin"))
        exe = os.path.join(prefix, "bin", "hpodd-fake")
        shutil.copy2(hpodtest.HPODD_FAKE, exe)
        d = hpodtest.Daemon()
        self.addCleanup(d.cleanup)
        with mock.patch.object(hpodtest, "HPODD_FAKE", exe):
            d.start()
        status, headers, body = self.request("GET", "/", port=d.port)
        self.assertEqual(status, 404, body)
        self.assertIn(b"The hpod console is not built", body)
        self.assertIn(b"run `make`", body)
        self.assertIn(os.path.join(prefix, "share", "hpod", "console").encode(), body)
        self.assert_console_headers(headers)
        d.stop()
        write_console(os.path.join(prefix, "share", "hpod", "console"))
        with mock.patch.object(hpodtest, "HPODD_FAKE", exe):
            d.start()
        status, headers, body = self.request("GET", "/", port=d.port)
        self.assertEqual((status, body), (200, INDEX))
        with open(os.path.join(d.root, "hpodd.out")) as f:
            self.assertIn("hpodd console: 2 files", f.read())

    def test_post_root_is_still_the_signed_api(self):
        status, headers, raw = self.request(
            "POST", "/", body=b"{}",
            headers={"Content-Type": JSON_CT, "X-Amz-Target": "SageMaker.ListClusters"})
        self.assertEqual(status, 403, raw)
        self.assertEqual(json.loads(raw)["__type"], "MissingAuthenticationTokenException")
        self.assertIsNone(headers.get("allow"))


if __name__ == "__main__":
    hpodtest.main()
