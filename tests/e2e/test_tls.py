"""hpodd's API over TLS (issue 25), end to end with the real clients.

A real hpodd (`hpodd-fake`: hpodd with the fake provider) serves its API listener
with `--tls` on loopback, with the CA and server certificate `hpodd init` made in
its data dir. The real aws CLI verifies it with `--ca-bundle` and with
AWS_CA_BUNDLE, boto3 with `verify=`, the hpod CLI with the `ca_bundle` that
`hpodd init --endpoint-url https://…` writes into its profile; without the CA each
of them refuses the server. A plain-HTTP request to the TLS port gets a 400 that
says to use https://, and GET /metrics works over TLS with its bearer token. hpodd
refuses to start, before it binds anything, on a non-loopback address it has no
usable certificate for. Nothing leaves loopback; the non-loopback addresses below
are never bound.
"""
import json
import os
import shutil
import socket
import ssl
import subprocess
import unittest
import urllib.error
import urllib.request

import hpodtest


class TlsTest(hpodtest.CliTestCase):
    @classmethod
    def setUpClass(cls):
        hpodtest.require_aws_clients()
        cls.d = hpodtest.Daemon(pending_ms=50, extra_args=["--tls"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()

    def aws_tls(self, *args, ca=None, env=None):
        """`aws [--ca-bundle ca] --endpoint-url https://… sagemaker <args>`."""
        cmd = ["aws"] + (["--ca-bundle", ca] if ca else []) + [
            "--endpoint-url", self.d.endpoint, "--region", hpodtest.REGION, "sagemaker"]
        p = subprocess.run(cmd + list(args), capture_output=True, text=True,
                           env=self.d.env(**(env or {})), timeout=120)
        return p.returncode, p.stdout, p.stderr

    def test_serves_https_with_the_certificate_init_made(self):
        self.assertEqual(self.d.scheme, "https")
        self.assertTrue(os.path.exists(self.d.ca_bundle))
        self.assertIn("TLS: CA " + self.d.ca_bundle, self.d.init_output)

    def test_aws_cli_verifies_hpodd_against_its_ca(self):
        groups = [hpodtest.group("workers", 1)]
        rc, out, err = self.aws_tls("create-cluster", "--cluster-name", "tls-cli",
                                    "--instance-groups", json.dumps(groups), ca=self.d.ca_bundle)
        self.assertEqual(rc, 0, err)
        self.assertIn("ClusterArn", json.loads(out))
        rc, out, err = self.aws_tls("list-clusters", env={"AWS_CA_BUNDLE": self.d.ca_bundle})
        self.assertEqual(rc, 0, err)
        self.assertIn("tls-cli", [c["ClusterName"] for c in json.loads(out)["ClusterSummaries"]])

    def test_aws_cli_without_the_ca_refuses_the_server(self):
        rc, out, err = self.aws_tls("list-clusters")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("SSL validation failed", err)

    def test_boto3_verifies_with_the_ca(self):
        import boto3
        import botocore.config
        import botocore.exceptions
        creds = hpodtest.read_profile(os.path.join(self.d.aws_dir, "credentials"), "hpod")

        def client(verify):
            return boto3.session.Session(
                aws_access_key_id=creds["aws_access_key_id"],
                aws_secret_access_key=creds["aws_secret_access_key"],
                region_name=hpodtest.REGION).client(
                    "sagemaker", endpoint_url=self.d.endpoint, verify=verify,
                    config=botocore.config.Config(retries={"max_attempts": 1}))

        self.assertIn("ClusterSummaries", client(self.d.ca_bundle).list_clusters())
        with self.assertRaises(botocore.exceptions.SSLError):
            client(True).list_clusters()  # the system's CAs do not know hpodd's

    def test_hpod_cli_uses_the_profile_ca_bundle(self):
        # `hpodd init` again with an https:// endpoint: same CA, and the profile gets
        # ca_bundle (hpodd is serving; init only rewrites the profile and keeps the rest).
        out = subprocess.run(
            [hpodtest.HPODD_FAKE, "--data-dir", self.d.data_dir, "init", "--aws-dir",
             self.d.aws_dir, "--region", hpodtest.REGION, "--listen", "127.0.0.1:1",
             "--endpoint-url", self.d.endpoint],
            capture_output=True, text=True, check=True).stdout
        self.assertIn("Already initialized", out)
        config = hpodtest.read_profile(os.path.join(self.d.aws_dir, "config"), "profile hpod")
        self.assertEqual(config.get("ca_bundle"), self.d.ca_bundle)
        self.assertEqual(config.get("endpoint_url"), self.d.endpoint)
        env = self.d.env()
        p = subprocess.run([hpodtest.HPOD_CLI, "list-clusters"], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ClusterSummaries", json.loads(p.stdout))
        # Another CA (the system's bundle) cannot verify hpodd: refused, saying so.
        p = subprocess.run([hpodtest.HPOD_CLI, "--ca-bundle", "/etc/ssl/certs/ca-certificates.crt",
                            "list-clusters"], capture_output=True, text=True, env=env, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("SSL validation failed", p.stderr)

    def test_plain_http_to_the_tls_port_is_refused(self):
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            reply = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        text = reply.decode("utf-8", "replace")
        self.assertTrue(text.startswith("HTTP/1.1 400"), text)
        self.assertIn("This port speaks HTTPS (TLS) only; use https://", text)

    def test_metrics_and_healthz_over_tls(self):
        context = ssl.create_default_context(cafile=self.d.ca_bundle)
        with urllib.request.urlopen(self.d.endpoint + "/healthz", context=context,
                                    timeout=10) as r:
            self.assertEqual(json.load(r), {"status": "ok"})
        token = subprocess.run([hpodtest.HPODD_FAKE, "--data-dir", self.d.data_dir,
                                "metrics-token"], capture_output=True, text=True,
                               check=True).stdout.strip()
        req = urllib.request.Request(self.d.endpoint + "/metrics",
                                     headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, context=context, timeout=10) as r:
            self.assertIn("hpod_build_info", r.read().decode())
        with self.assertRaises(urllib.error.URLError):  # no CA: not verified
            urllib.request.urlopen(self.d.endpoint + "/healthz", timeout=10,
                                   context=ssl.create_default_context())

    def serve_refused(self, data_dir, listen):
        """hpodd-fake on `listen` must exit at once with an error (nothing is bound)."""
        p = subprocess.run([hpodtest.HPODD_FAKE, "--data-dir", data_dir, "--listen", listen],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HPOD_FAKE_STATE_DIR=os.path.join(
                               self.d.root, "refused-fake")))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertNotIn("ready on", p.stdout)
        return p.stderr

    def test_non_loopback_without_a_usable_certificate_does_not_start(self):
        # 192.0.2.1 (TEST-NET-1) is never bound: hpodd stops before it listens.
        err = self.serve_refused(self.d.data_dir, "192.0.2.1:0")
        self.assertIn("cannot serve TLS on 192.0.2.1: hpodd's server certificate names", err)
        self.assertIn("hpodd rotate-certs --data-dir %s --tls-name 192.0.2.1" % self.d.data_dir,
                      err)
        bare = hpodtest.Daemon(pending_ms=50)  # a second data dir, init'ed, never started
        self.addCleanup(bare.cleanup)
        os.unlink(os.path.join(bare.data_dir, "tls", "server.pem"))
        err = self.serve_refused(bare.data_dir, "192.0.2.1:0")
        self.assertIn("hpodd speaks only TLS on an address other than loopback, such as "
                      "192.0.2.1", err)
        self.assertIn("server.pem is missing", err)


if __name__ == "__main__":
    unittest.main()
