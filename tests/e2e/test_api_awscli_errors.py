"""End-to-end: the errors users see from the real `aws sagemaker` CLI (v1).

Each failing command must exit 255 and print AWS's error line,
`An error occurred (<Code>) when calling the <Operation> operation: <message>`,
for missing clusters, taken names, constraint violations, unsupported fields,
quotas, bad credentials, read-only keys and updates of a cluster still Creating.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, parallel, wait_cluster  # noqa: E402


class AwsCliErrorsTest(hpodtest.CliTestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=100).start()
        cls.addClassCleanup(cls.d.cleanup)
        cls.b = cls.d.boto3()

    def test_error_lines(self):
        d = self.d
        self.b.create_cluster(ClusterName="taken", InstanceGroups=[group("g", 0)])
        wait_cluster(self.b, "taken", "InService")
        # Credentials for the auth cases, as profiles next to the admin one.
        admin = hpodtest.read_profile(os.path.join(d.aws_dir, "credentials"), "hpod")
        user_block = subprocess.run(
            [hpodtest.HPODD_FAKE, "--data-dir", d.data_dir, "create-key", "--role", "user"],
            capture_output=True, text=True, check=True).stdout
        self.assertTrue(user_block.startswith("[user]\n"), user_block)
        with open(os.path.join(d.aws_dir, "credentials"), "a") as f:
            f.write("\n" + user_block)
            f.write("\n[wrongsecret]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    % (admin["aws_access_key_id"], "x" * 40))
            f.write("\n[unknownkey]\naws_access_key_id = HPODUNKNOWNKEY000000\n"
                    "aws_secret_access_key = %s\n" % admin["aws_secret_access_key"])
        igs = json.dumps([group("g", 1)])
        huge = json.dumps([group("g%d" % i, 6758) for i in range(3)])
        msgs = parallel(
            lambda: self.cli_error("DescribeCluster", "ResourceNotFound",
                                   "describe-cluster", "--cluster-name", "no-such-cluster"),
            lambda: self.cli_error("CreateCluster", "ResourceInUse", "create-cluster",
                                   "--cluster-name", "taken", "--instance-groups", igs),
            lambda: self.cli_error("CreateCluster", "ValidationException", "create-cluster",
                                   "--cluster-name", "x_y", "--instance-groups", igs),
            lambda: self.cli_error("CreateCluster", "ValidationException", "create-cluster",
                                   "--cluster-name", "cont", "--instance-groups", igs,
                                   "--tiered-storage-config", json.dumps({"Mode": "Enable"})),
            lambda: self.cli_error("CreateCluster", "ResourceLimitExceeded", "create-cluster",
                                   "--cluster-name", "too-big", "--instance-groups", huge),
            lambda: self.cli_error("ListClusters", "InvalidSignatureException",
                                   "list-clusters", AWS_PROFILE="wrongsecret"),
            lambda: self.cli_error("ListClusters", "UnrecognizedClientException",
                                   "list-clusters", AWS_PROFILE="unknownkey"),
            lambda: self.cli_error("CreateCluster", "AccessDeniedException", "create-cluster",
                                   "--cluster-name", "by-user", "--instance-groups", igs,
                                   AWS_PROFILE="user"),
            lambda: self.cli("describe-cluster", "--cluster-name", "taken", AWS_PROFILE="user"),
        )
        (not_found, in_use, bad_name, unsupported, limit, _sig, _key, denied, user_desc) = msgs
        self.assertIn("no-such-cluster", not_found)
        self.assertIn("taken", in_use)
        self.assertIn("1 validation error detected: Value 'x_y' at 'clusterName' failed to "
                      "satisfy constraint: Member must satisfy regular expression pattern: "
                      "[a-zA-Z0-9](-*[a-zA-Z0-9])*", bad_name)
        self.assertIn("TieredStorageConfig is not supported by hpod", unsupported)
        self.assertIn("20274", limit)
        self.assertIn("CreateCluster", denied)
        self.assertEqual(user_desc["ClusterName"], "taken")
        names = {c["ClusterName"] for c in self.b.list_clusters()["ClusterSummaries"]}
        self.assertFalse(names & {"x_y", "cont", "too-big", "by-user"}, names)
        self.assertEqual(self.b.describe_cluster(ClusterName="taken")["ClusterStatus"], "InService")

    def test_update_while_creating_conflicts(self):
        slow = hpodtest.Daemon(pending_ms=600000)  # nodes stay Pending for the whole test
        self.addCleanup(slow.cleanup)
        slow.start()
        b = slow.boto3()
        b.create_cluster(ClusterName="slow", InstanceGroups=[group("g", 1)])
        msg = self.cli_error("UpdateCluster", "ConflictException", "update-cluster",
                             "--cluster-name", "slow", "--instance-groups",
                             json.dumps([group("g", 2)]), daemon=slow)
        self.assertIn("Creating", msg)
        desc = b.describe_cluster(ClusterName="slow")
        self.assertEqual(desc["ClusterStatus"], "Creating")
        self.assertEqual(desc["InstanceGroups"][0]["TargetCount"], 1)


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()
