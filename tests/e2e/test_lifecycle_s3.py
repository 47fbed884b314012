"""Lifecycle scripts from a real S3 server: OpenStack Swift with s3api on loopback
serves the prefix; nodes fetch it (SigV4, path-style, through hpodd's S3 relay,
since nodes have no route off their cluster network), run OnCreate, and the
cluster reaches InService. With a wrong secret the cluster fails and says why.
Needs root and Debian's swift packages."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402
import s3server  # noqa: E402

ON_CREATE = r"""#!/bin/bash
set -euo pipefail
source ./utils/common.sh
source "./utils/with space+plus.sh"   # keys that need URI encoding (S3's SigV4 rules)
mkdir -p /fsx/markers
echo "$(hostname) $(common_word)" > "/fsx/markers/$(hostname)"
test -f /opt/ml/config/provisioning_parameters.json
echo "[INFO]: Success: All provisioning scripts completed"
"""


class S3LifecycleTest(unittest.TestCase):
    s3 = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not s3server.SwiftS3.available():
            print("SKIP: swift with s3api is not installed")
            sys.exit(hpodtest.SKIP)
        cls.s3 = s3server.SwiftS3().start()
        try:
            cls.s3.create_bucket("sagemaker-lcs")
            cls.s3.put("sagemaker-lcs", "base-config/on_create.sh", ON_CREATE.encode())
            cls.s3.put("sagemaker-lcs", "base-config/utils/common.sh",
                       b"common_word() { echo fetched-from-s3; }\n")
            cls.s3.put("sagemaker-lcs", "base-config/utils/with space+plus.sh", b"true\n")
            cls.s3.put("sagemaker-lcs", "base-config/provisioning_parameters.json",
                       json.dumps({"version": "1.0.0", "workload_manager": "slurm",
                                   "controller_group": "controller-machine",
                                   "worker_groups": []}).encode())
        except BaseException:
            cls.s3.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.s3:
            cls.s3.stop()

    def daemon(self, prefix, secret):
        d = nodestest.NodesDaemon(
            prefix, extra_args=["--s3-endpoint", self.s3.endpoint, "--s3-region", self.s3.region],
            env={"HPOD_S3_ACCESS_KEY_ID": self.s3.access_key,
                 "HPOD_S3_SECRET_ACCESS_KEY": secret})
        self.addCleanup(d.cleanup)
        return d.start()

    def create(self, d, name, count):
        spec = os.path.join(d.root, name + ".json")
        with open(spec, "w") as f:
            json.dump([nodestest.lcs_group("controller-machine", 1, "s3://sagemaker-lcs/base-config/",
                                           SlurmConfig={"NodeType": "Controller"}),
                       nodestest.lcs_group("worker-group-1", count,
                                           "s3://sagemaker-lcs/base-config/")], f)
        d.hpod("create-cluster", "--cluster-name", name, "--instance-groups", "file://" + spec)

    def test_scripts_from_s3_bring_the_cluster_in_service(self):
        d = self.daemon("t3s", self.s3.secret_key)
        self.create(d, "s3demo", 1)
        out = d.wait_status("s3demo", "InService", timeout=240)
        cid = out["ClusterArn"].split("/")[-1]
        markers = os.listdir(os.path.join(d.fsx_root, cid, "markers"))
        self.assertEqual(len(markers), 2, markers)
        for m in markers:
            with open(os.path.join(d.fsx_root, cid, "markers", m)) as f:
                self.assertEqual(f.read().strip(), m + " fetched-from-s3")
        node = d.nodes("s3demo")[0]["InstanceId"]
        pp = json.loads(d.in_node(node, "cat /opt/ml/config/provisioning_parameters.json").stdout)
        self.assertEqual(pp["controller_group"], "controller-machine")

    def test_wrong_secret_fails_the_cluster_clearly(self):
        d = self.daemon("t3w", "not-the-secret")
        self.create(d, "badkey", 1)
        out = d.wait_status("badkey", "Failed", timeout=240)
        self.assertIn("Access denied to s3://sagemaker-lcs/base-config/ (SignatureDoesNotMatch)",
                      out["FailureMessage"])


if __name__ == "__main__":
    hpodtest.main()
