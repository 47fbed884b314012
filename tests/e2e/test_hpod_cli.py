"""The hpod CLI end to end against a real hpodd (with the fake provider).

The whole admin journey through `hpod` only: create from a file:// instance-group
definition, wait for InService, describe/list in every output format, scale,
delete a node, delete the cluster and wait for it to go; plus the AWS CLI v2 exit
codes (252 usage, 253 credentials, 254 service error, 255 connection).
"""
import json
import os
import subprocess
import tempfile
import unittest

import hpodtest


class HpodCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(hpodtest.HPOD_CLI):
            raise unittest.SkipTest("hpod CLI not built at " + hpodtest.HPOD_CLI)
        cls.d = hpodtest.Daemon(pending_ms=100).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()

    def hpod(self, *args, env_extra=None, endpoint=True):
        cmd = [hpodtest.HPOD_CLI]
        if endpoint:
            cmd += ["--endpoint-url", self.d.endpoint]
        env = self.d.env(**(env_extra or {}))
        p = subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args):
        rc, out, err = self.hpod(*args)
        self.assertEqual(rc, 0, "hpod %s failed: %s" % (" ".join(args), err))
        return out

    def test_admin_journey(self):
        groups = [hpodtest.group("controller-machine", 1, SlurmConfig={"NodeType": "Controller"}),
                  hpodtest.group("workers", 2)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(groups, f)
        self.addCleanup(os.unlink, f.name)
        arn = json.loads(self.ok("create-cluster", "--cluster-name", "journey",
                                 "--instance-groups", "file://" + f.name))["ClusterArn"]
        self.assertRegex(arn, r"^arn:aws:sagemaker:us-west-2:\d{12}:cluster/[a-z0-9]{12}$")
        self.ok("wait", "cluster-in-service", "--cluster-name", "journey", "--timeout", "60")
        desc = json.loads(self.ok("describe-cluster", "--cluster-name", "journey"))
        self.assertEqual(desc["ClusterStatus"], "InService")
        self.assertEqual([g["CurrentCount"] for g in desc["InstanceGroups"]], [1, 2])

        table = self.ok("list-cluster-nodes", "--cluster-name", "journey", "--output", "table")
        self.assertIn("ListClusterNodes", table)
        self.assertEqual(table.count("Running"), 3)
        text = self.ok("list-clusters", "--output", "text")
        self.assertIn("CLUSTERSUMMARIES\t" + arn + "\tjourney\tInService", text)
        ids = self.ok("list-cluster-nodes", "--cluster-name", "journey",
                      "--query", "ClusterNodeSummaries[].InstanceId", "--output", "text").split()
        self.assertEqual(len(ids), 3)

        # Scale the workers up with shorthand syntax, then delete one node.
        self.ok("update-cluster", "--cluster-name", "journey", "--instance-groups",
                json.dumps([hpodtest.group("workers", 3)]))
        self.ok("wait", "cluster-in-service", "--cluster-name", "journey", "--timeout", "60")
        nodes = json.loads(self.ok("list-cluster-nodes", "--cluster-name", "journey",
                                   "--instance-group-name-contains", "workers"))
        self.assertEqual(len(nodes["ClusterNodeSummaries"]), 3)
        victim = nodes["ClusterNodeSummaries"][0]["InstanceId"]
        out = json.loads(self.ok("batch-delete-cluster-nodes", "--cluster-name", "journey",
                                 "--node-ids", victim, "i-0000000000000000a"))
        self.assertEqual(out["Successful"], [victim])
        self.assertEqual(out["Failed"][0]["Code"], "NodeIdNotFound")

        events = json.loads(self.ok("list-cluster-events", "--cluster-name", "journey"))
        self.assertTrue(any("to InService" in e["Description"] for e in events["Events"]))

        self.ok("delete-cluster", "--cluster-name", "journey")
        self.ok("wait", "cluster-deleted", "--cluster-name", "journey", "--timeout", "60")
        rc, _, err = self.hpod("describe-cluster", "--cluster-name", "journey")
        self.assertEqual(rc, 254)
        self.assertIn("An error occurred (ResourceNotFound) when calling the DescribeCluster "
                      "operation", err)

    def test_get_caller_identity_names_the_key_and_its_role(self):
        # HpodGetCallerIdentity, as `hpod get-caller-identity` (what the web console
        # asks to decide which actions to show).
        admin = hpodtest.read_profile(os.path.join(self.d.aws_dir, "credentials"), "hpod")
        self.assertEqual(json.loads(self.ok("get-caller-identity")),
                         {"AccessKeyId": admin["aws_access_key_id"], "Role": "admin"})
        user_block = subprocess.run(
            [hpodtest.HPODD_FAKE, "--data-dir", self.d.data_dir, "create-key", "--role", "user"],
            capture_output=True, text=True, check=True).stdout
        user_key = user_block.split("aws_access_key_id = ")[1].split()[0]
        user_secret = user_block.split("aws_secret_access_key = ")[1].split()[0]
        as_user = {"AWS_ACCESS_KEY_ID": user_key, "AWS_SECRET_ACCESS_KEY": user_secret,
                   "AWS_PROFILE": ""}
        rc, out, err = self.hpod("--region", "us-west-2", "hpod-get-caller-identity",
                                 "--query", "[AccessKeyId, Role]", "--output", "text",
                                 env_extra=as_user)
        self.assertEqual((rc, out.split()), (0, [user_key, "user"]), err)
        rc, _, err = self.hpod("get-caller-identity", env_extra={
            "AWS_ACCESS_KEY_ID": user_key, "AWS_SECRET_ACCESS_KEY": "x" * 40, "AWS_PROFILE": "",
            "AWS_REGION": "us-west-2"})
        self.assertEqual(rc, 254)
        self.assertIn("(InvalidSignatureException)", err)

    def test_exit_codes(self):
        rc, _, err = self.hpod("describe-cluster")
        self.assertEqual(rc, 252)
        self.assertIn("--cluster-name", err)
        rc, _, err = self.hpod("describe-cluster", "--cluster-name", "x", "--bogus-flag", "1")
        self.assertEqual(rc, 252)
        rc, _, err = self.hpod("describe-cluster", "--cluster-name", "x_y")
        self.assertEqual(rc, 254)
        self.assertIn("(ValidationException)", err)
        rc, _, err = self.hpod("--region", "us-west-2", "list-clusters", env_extra={
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_PROFILE": ""})
        self.assertEqual(rc, 253)
        self.assertIn("Unable to locate credentials", err)
        rc, _, err = self.hpod("--endpoint-url", "http://127.0.0.1:9", "list-clusters",
                               endpoint=False)
        self.assertEqual(rc, 255)
        self.assertIn('Could not connect to the endpoint URL: "http://127.0.0.1:9/"', err)


if __name__ == "__main__":
    hpodtest.main()
