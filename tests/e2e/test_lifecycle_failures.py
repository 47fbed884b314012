"""Lifecycle scripts that fail: a non-zero exit, a missing OnCreate file, a missing
prefix and a timeout each fail the cluster (HyperPod's all-or-nothing mode) with
HyperPod's FailureMessage wording naming the cause, and every node of the failed
operation is cleaned up. Once deleted, a failed cluster's events and lifecycle logs
stay readable (by ARN or name). Needs root."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402


class LifecycleFailureTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        cls.d = nodestest.NodesDaemon("t3f", extra_args=["--lifecycle-timeout", "3"])
        try:
            lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(lcs, "ok", "on_create.sh"),
                                   "#!/bin/bash\necho fine\n")
            nodestest.write_script(os.path.join(lcs, "exit3", "on_create.sh"),
                                   "#!/bin/bash\necho about to fail\nexit 3\n")
            nodestest.write_script(os.path.join(lcs, "slow", "on_create.sh"),
                                   "#!/bin/bash\necho sleeping\nsleep 60\n")
            cls.lcs = lcs
            cls.d.start()
            cls.cases = {
                # name: (source, on_create, expected words in the FailureMessage)
                "exit3": ("file://%s/exit3/" % lcs, "on_create.sh",
                          "Lifecycle script on_create.sh exited with code 3"),
                "missing-file": ("file://%s/ok/" % lcs, "nope.sh",
                                 "OnCreate file nope.sh not found under file://%s/ok/" % lcs),
                "missing-prefix": ("file://%s/absent/" % lcs, "on_create.sh",
                                   "file://%s/absent/" % lcs),
                "timeout": ("file://%s/slow/" % lcs, "on_create.sh",
                            "Lifecycle script on_create.sh timed out after 3 s"),
            }
            for name, (src, on_create, _) in cls.cases.items():
                spec = os.path.join(cls.d.root, name + ".json")
                with open(spec, "w") as f:
                    json.dump([nodestest.lcs_group("workers", 2, src, on_create=on_create)], f)
                cls.d.hpod("create-cluster", "--cluster-name", name, "--instance-groups",
                           "file://" + spec)
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def check_failed(self, name):
        out = self.d.wait_status(name, "Failed", timeout=180)
        msg = out.get("FailureMessage", "")
        self.assertRegex(msg, r'^Instance i-[0-9a-f]{17} failed to provision with the following '
                              r'error: ".*" Note that multiple instances may be impacted\.$')
        self.assertIn(self.cases[name][2], msg)
        # Every node of the failed operation goes away.
        deadline = time.time() + 60
        while time.time() < deadline and self.d.nodes(name):
            time.sleep(0.5)
        self.assertEqual(self.d.nodes(name), [])
        return msg

    def test_exit_code(self):
        self.check_failed("exit3")
        # The script's output is kept for the user.
        events = self.d.hpod_json("list-cluster-events", "--cluster-name", "exit3")["Events"]
        failed = [e for e in events if "Lifecycle scripts Failed" in e.get("Description", "")]
        self.assertTrue(failed, events)
        out = self.d.hpod("logs", "--cluster-name", "exit3", "--node-id",
                          failed[0]["InstanceId"], check=False)
        self.assertIn("about to fail", out.stdout, out.stderr)

    def test_missing_on_create_file(self):
        self.check_failed("missing-file")

    def test_missing_prefix(self):
        self.check_failed("missing-prefix")

    def test_timeout(self):
        self.check_failed("timeout")

    def test_zz_nothing_left(self):
        for name in self.cases:
            self.d.wait_status(name, "Failed", timeout=180)
            deadline = time.time() + 60
            while time.time() < deadline and self.d.nodes(name):
                time.sleep(0.5)
        arn = self.d.hpod_json("describe-cluster", "--cluster-name", "exit3")["ClusterArn"]
        for name in self.cases:
            self.d.hpod("delete-cluster", "--cluster-name", name)
        for name in self.cases:
            self.d.wait_status(name, None, timeout=60)
        self.assertEqual(self.d.leftovers(), [])
        # Deleted for a retry, the failed cluster's history stays readable: why it
        # failed, its events by ARN or name, and the script's output.
        gone = self.d.hpod("describe-cluster", "--cluster-name", "exit3", check=False)
        self.assertNotEqual(gone.returncode, 0)
        self.assertIn("was deleted at", gone.stderr)
        self.assertIn("Lifecycle script on_create.sh exited with code 3", gone.stderr)
        for key in (arn, "exit3"):
            events = self.d.hpod_json("list-cluster-events", "--cluster-name", key)["Events"]
            self.assertEqual(events[0]["Description"], "Cluster deleted")
            failed = [e for e in events if "Lifecycle scripts Failed" in e["Description"]]
            self.assertTrue(failed, events)
        out = self.d.hpod("logs", "--cluster-name", arn, "--node-id", failed[0]["InstanceId"])
        self.assertIn("about to fail", out.stdout)


if __name__ == "__main__":
    hpodtest.main()
