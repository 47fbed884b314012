"""End-to-end: continuous provisioning's API through boto3, the real aws CLI (v1)
and the hpod CLI against hpodd-fake, whose `workers` group always fails (what
the provisioning does on real nodes: test_continuous.py).

- CreateCluster with NodeProvisioningMode Continuous is InService with its
  controller while every worker fails and is launched again, each retry naming
  its attempt; the default mode fails the same cluster.
- BatchAddClusterNodes: boto3 fills in a ClientToken of its own; the same
  explicit token answers the same NodeLogicalIds; an unknown group is in
  Failed; the default mode's cluster is a ValidationException that says why.
- The SageMaker cluster operations hpod does not serve on purpose (EKS volumes,
  scheduler configs, compute quotas) are ValidationExceptions with the reason,
  not unknown operations.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, wait_cluster  # noqa: E402

import botocore.exceptions  # noqa: E402

CONTROLLER = group("controller-machine", 1, SlurmConfig={"NodeType": "Controller"})
WORKERS = group("workers", 2, SlurmConfig={"NodeType": "Compute"})
CPU = group("cpu", 1, SlurmConfig={"NodeType": "Compute"})


class ContinuousApiTest(hpodtest.CliTestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=100, fail_groups="workers").start()
        cls.addClassCleanup(cls.d.cleanup)
        cls.sm = cls.d.boto3()
        cls.sm.create_cluster(ClusterName="cont", NodeProvisioningMode="Continuous",
                              InstanceGroups=[CONTROLLER, WORKERS, CPU])
        wait_cluster(cls.sm, "cont", "InService")

    def error(self, call, code, **kwargs):
        try:
            call(**kwargs)
        except botocore.exceptions.ClientError as e:
            self.assertEqual(e.response["Error"]["Code"], code, e.response)
            return e.response["Error"]["Message"]
        self.fail("no %s" % code)

    def test_in_service_while_failed_workers_are_launched_again(self):
        d = self.sm.describe_cluster(ClusterName="cont")
        self.assertEqual(d["NodeProvisioningMode"], "Continuous")
        groups = {g["InstanceGroupName"]: g for g in d["InstanceGroups"]}
        self.assertEqual(groups["workers"]["CurrentCount"], 0)
        self.assertEqual(groups["workers"]["Status"], "Creating")
        deadline = time.time() + 30
        while True:
            nodes = self.sm.list_cluster_nodes(ClusterName="cont", InstanceGroupNameContains="workers",
                                               IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
            messages = [n["InstanceStatus"].get("Message", "") for n in nodes]
            if any("Launch attempt 2 of workers-" in m for m in messages) or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertTrue(any("Launch attempt 2 of workers-" in m for m in messages), messages)
        self.assertEqual(len(nodes), 2, "a retry takes its node's place")
        self.assertEqual(sorted(n["NodeLogicalId"].rsplit("-", 1)[0] for n in nodes),
                         ["workers-1", "workers-2"])
        self.assertEqual(self.sm.describe_cluster(ClusterName="cont")["ClusterStatus"],
                         "InService")
        # The default mode fails the same cluster, all or nothing.
        self.sm.create_cluster(ClusterName="all-or-nothing",
                               InstanceGroups=[CONTROLLER, WORKERS])
        wait_cluster(self.sm, "all-or-nothing", "Failed")

    def test_batch_add_with_boto3_the_aws_cli_and_hpod(self):
        out = self.sm.batch_add_cluster_nodes(
            ClusterName="cont",
            NodesToAdd=[{"InstanceGroupName": "cpu", "IncrementTargetCountBy": 2},
                        {"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}])
        self.assertEqual([n["Status"] for n in out["Successful"]], ["Pending", "Pending"])
        self.assertEqual(out["Failed"][0]["ErrorCode"], "InstanceGroupNotFound")
        self.assertEqual(out["Failed"][0]["FailedCount"], 1)
        for n in out["Successful"]:
            deadline = time.time() + 30
            while self.sm.describe_cluster_node(ClusterName="cont", NodeLogicalId=n["NodeLogicalId"])[
                    "NodeDetails"]["InstanceStatus"]["Status"] != "Running":
                self.assertLess(time.time(), deadline)
                time.sleep(0.1)
        # boto3 filled in its own token: a second call adds one more.
        again = self.sm.batch_add_cluster_nodes(
            ClusterName="cont", NodesToAdd=[{"InstanceGroupName": "cpu",
                                             "IncrementTargetCountBy": 1}])
        self.assertNotIn(again["Successful"][0]["NodeLogicalId"],
                         [n["NodeLogicalId"] for n in out["Successful"]])
        # The aws CLI with an explicit token, twice: the same node.
        args = ["batch-add-cluster-nodes", "--cluster-name", "cont", "--client-token", "t-1",
                "--nodes-to-add", "InstanceGroupName=cpu,IncrementTargetCountBy=1"]
        first, second = self.cli(*args), self.cli(*args)
        self.assertEqual(first["Successful"][0]["NodeLogicalId"],
                         second["Successful"][0]["NodeLogicalId"])
        self.assertEqual(first["Failed"], [])
        groups = {g["InstanceGroupName"]: g
                  for g in self.sm.describe_cluster(ClusterName="cont")["InstanceGroups"]}
        self.assertEqual(groups["cpu"]["TargetCount"], 5)  # 1 + 2 + 1 + 1
        # hpod's own CLI prints the same response.
        hp = self.d.hpod("batch-add-cluster-nodes", "--cluster-name", "cont", "--client-token",
                         "t-1", "--nodes-to-add",
                         "InstanceGroupName=cpu,IncrementTargetCountBy=1")
        self.assertIn(first["Successful"][0]["NodeLogicalId"], hp)
        # Without a token, hpod fills in one of its own, as the aws CLI does.
        own = json.loads(self.d.hpod("batch-add-cluster-nodes", "--cluster-name", "cont",
                                     "--nodes-to-add",
                                     "InstanceGroupName=cpu,IncrementTargetCountBy=1"))
        self.assertNotEqual(own["Successful"][0]["NodeLogicalId"],
                            first["Successful"][0]["NodeLogicalId"])
        # Refusals.
        msg = self.cli_error("BatchAddClusterNodes", "ValidationException", *args[:-2],
                             "--client-token", "t-1", "--nodes-to-add",
                             "InstanceGroupName=cpu,IncrementTargetCountBy=2")
        self.assertIn("with other parameters", msg)
        self.sm.create_cluster(ClusterName="plain", InstanceGroups=[CONTROLLER, CPU])
        msg = self.error(self.sm.batch_add_cluster_nodes, "ValidationException",
                         ClusterName="plain",
                         NodesToAdd=[{"InstanceGroupName": "cpu", "IncrementTargetCountBy": 1}])
        self.assertIn("only supported for clusters using Continuous", msg)
        self.error(self.sm.batch_add_cluster_nodes, "ResourceNotFound", ClusterName="nope",
                   NodesToAdd=[{"InstanceGroupName": "cpu", "IncrementTargetCountBy": 1}])

    def test_operations_refused_with_their_reason(self):
        msg = self.cli_error("AttachClusterNodeVolume", "ValidationException",
                             "attach-cluster-node-volume", "--cluster-arn",
                             "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef",
                             "--node-id", "i-0123456789abcdef0", "--volume-id",
                             "vol-0123456789abcdef0")
        self.assertIn("AttachClusterNodeVolume is not supported by hpod", msg)
        self.assertIn("EKS", msg)
        msg = self.error(self.sm.list_cluster_scheduler_configs, "ValidationException")
        self.assertIn("task governance", msg)
        msg = self.error(self.sm.list_compute_quotas, "ValidationException")
        self.assertIn("sacctmgr", msg)


if __name__ == "__main__":
    hpodtest.main()
