"""End-to-end: the real `aws sagemaker` CLI (v1) against hpodd-fake.

The cluster journey (create with flags and with --cli-input-json, describe, list,
update up/down, add and delete groups, batch-delete nodes, events, delete) and a
cluster whose lifecycle scripts fail. test_api_awscli_errors.py and
test_api_awscli_paging.py cover error lines and pagination. boto3 is used only to
wait and to set up, because every CLI run costs a Python start-up; whatever is
asserted about the CLI comes from the CLI.
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, parallel, wait_cluster  # noqa: E402

ARN_RE = re.compile(r"^arn:aws:sagemaker:us-west-2:123456789012:cluster/[a-z0-9]{12}$")
INSTANCE_RE = re.compile(r"^i-[a-f0-9]{17}$")
DNS_RE = re.compile(r"^ip-(\d+)-(\d+)-(\d+)-(\d+)\.us-west-2\.compute\.internal$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
VPC = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}


class AwsCliJourneyTest(hpodtest.CliTestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=100, fail_groups="broken").start()
        cls.addClassCleanup(cls.d.cleanup)
        cls.b = cls.d.boto3()

    # helpers ---------------------------------------------------------------------
    def nodes(self, name):
        return self.b.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]

    def wait_nodes(self, name, pred, timeout=30):
        deadline = time.time() + timeout
        while True:
            nodes = self.nodes(name)
            if pred(nodes) or time.time() > deadline:
                return nodes
            time.sleep(0.1)

    # the journey ---------------------------------------------------------------
    def test_cluster_journey(self):
        d = self.d
        spec_path = os.path.join(d.root, "create.json")
        with open(spec_path, "w") as f:
            json.dump({"ClusterName": "journey-json",
                       "InstanceGroups": [group("controller-machine", 1, ThreadsPerCore=1)],
                       "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
                       "NodeRecovery": "None"}, f)
        created, created_json = parallel(
            lambda: self.cli("create-cluster", "--cluster-name", "journey",
                             "--instance-groups", json.dumps([group("controller", 1),
                                                              group("worker", 2)]),
                             "--vpc-config", json.dumps(VPC),
                             "--tags", "Key=team,Value=ml", "Key=env,Value=e2e"),
            lambda: self.cli("create-cluster", "--cli-input-json", "file://" + spec_path))
        self.assertRegex(created["ClusterArn"], ARN_RE)
        self.assertRegex(created_json["ClusterArn"], ARN_RE)
        self.assertEqual(list(created), ["ClusterArn"])
        wait_cluster(self.b, "journey", "InService")
        wait_cluster(self.b, "journey-json", "InService")

        desc, desc_json, listed = parallel(
            lambda: self.cli("describe-cluster", "--cluster-name", "journey"),
            lambda: self.cli("describe-cluster", "--cluster-name", created_json["ClusterArn"]),
            lambda: self.cli("list-cluster-nodes", "--cluster-name", "journey"))
        self.assertEqual(desc["ClusterArn"], created["ClusterArn"])
        self.assertEqual(desc["ClusterName"], "journey")
        self.assertEqual(desc["ClusterStatus"], "InService")
        self.assertIsInstance(desc["CreationTime"], (int, float))
        self.assertEqual(desc["VpcConfig"], VPC)
        self.assertEqual(desc["NodeRecovery"], "Automatic")  # the default
        self.assertNotIn("Tags", desc)  # not a DescribeClusterResponse member
        # The tags: CreateCluster's, then AddTags, ListTags and DeleteTags by the ARN.
        arn = created["ClusterArn"]
        self.assertEqual(self.cli("list-tags", "--resource-arn", arn),
                         {"Tags": [{"Key": "team", "Value": "ml"}, {"Key": "env", "Value": "e2e"}]})
        added = self.cli("add-tags", "--resource-arn", arn, "--tags", "Key=team,Value=infra",
                         "Key=cost,Value=42")
        self.assertEqual(added["Tags"], [{"Key": "team", "Value": "infra"},
                                         {"Key": "cost", "Value": "42"}])
        self.cli("delete-tags", "--resource-arn", arn, "--tag-keys", "env", "absent")
        self.assertEqual(self.cli("list-tags", "--resource-arn", arn)["Tags"],
                         [{"Key": "team", "Value": "infra"}, {"Key": "cost", "Value": "42"}])
        self.assertIn("reserved", self.cli_error(
            "AddTags", "ValidationException", "add-tags", "--resource-arn", arn, "--tags",
            "Key=aws:owner,Value=x"))
        self.assertIn("is not a cluster ARN", self.cli_error(
            "ListTags", "ValidationException", "list-tags", "--resource-arn",
            "arn:aws:sagemaker:us-west-2:123456789012:notebook-instance/nb"))
        self.assertNotIn("FailureMessage", desc)
        groups = {g["InstanceGroupName"]: g for g in desc["InstanceGroups"]}
        self.assertEqual([g["InstanceGroupName"] for g in desc["InstanceGroups"]],
                         ["controller", "worker"])
        for name, count in (("controller", 1), ("worker", 2)):
            g = groups[name]
            self.assertEqual((g["CurrentCount"], g["TargetCount"]), (count, count))
            self.assertEqual(g["Status"], "InService")
            self.assertEqual(g["InstanceType"], "ml.c5.xlarge")
            self.assertEqual(g["LifeCycleConfig"], group(name, 1)["LifeCycleConfig"])
            self.assertEqual(g["ExecutionRole"], group(name, 1)["ExecutionRole"])
            self.assertNotIn("InstanceCount", g)
        # The --cli-input-json cluster: arn as name, Orchestrator and NodeRecovery round-trip.
        self.assertEqual(desc_json["ClusterName"], "journey-json")
        self.assertEqual(desc_json["Orchestrator"], {"Slurm": {"SlurmConfigStrategy": "Managed"}})
        self.assertEqual(desc_json["NodeRecovery"], "None")
        self.assertNotIn("VpcConfig", desc_json)
        self.assertEqual(desc_json["InstanceGroups"][0]["ThreadsPerCore"], 1)

        summaries = listed["ClusterNodeSummaries"]
        self.assertNotIn("NextToken", listed)
        self.assertEqual(len(summaries), 3)
        self.assertEqual(sorted(n["InstanceGroupName"] for n in summaries),
                         ["controller", "worker", "worker"])
        for n in summaries:
            self.assertRegex(n["InstanceId"], INSTANCE_RE)
            self.assertEqual(n["InstanceStatus"]["Status"], "Running")
            self.assertEqual(n["InstanceType"], "ml.c5.xlarge")
            self.assertRegex(n["PrivateDnsHostname"], DNS_RE)
            self.assertNotIn("NodeLogicalId", n)  # only with --include-node-logical-ids
        self.assertEqual(len({n["InstanceId"] for n in summaries}), 3)

        worker = next(n for n in summaries if n["InstanceGroupName"] == "worker")
        details = self.cli("describe-cluster-node", "--cluster-name", "journey",
                           "--node-id", worker["InstanceId"])["NodeDetails"]
        self.assertEqual(details["InstanceId"], worker["InstanceId"])
        self.assertEqual(details["InstanceGroupName"], "worker")
        self.assertEqual(details["InstanceStatus"]["Status"], "Running")
        self.assertEqual(details["InstanceType"], "ml.c5.xlarge")
        self.assertEqual(details["LaunchTime"], worker["LaunchTime"])
        self.assertEqual(details["LifeCycleConfig"], group("w", 1)["LifeCycleConfig"])
        self.assertEqual(details["PrivateDnsHostname"], worker["PrivateDnsHostname"])
        ip = ".".join(DNS_RE.match(worker["PrivateDnsHostname"]).groups())
        self.assertEqual(details["PrivatePrimaryIp"], ip)

        # Scale up, then down.
        out = self.cli("update-cluster", "--cluster-name", "journey",
                       "--instance-groups", json.dumps([group("worker", 4)]))
        self.assertEqual(out, {"ClusterArn": created["ClusterArn"]})
        wait_cluster(self.b, "journey", "InService")
        listed = self.nodes("journey")
        self.assertEqual(len(listed), 5)
        self.assertTrue(all(n["InstanceStatus"]["Status"] == "Running" for n in listed))
        before = {n["InstanceId"] for n in summaries}
        self.assertTrue(before <= {n["InstanceId"] for n in listed}, "scale-up replaced nodes")

        self.cli("update-cluster", "--cluster-name", "journey",
                 "--instance-groups", json.dumps([group("worker", 1)]))
        wait_cluster(self.b, "journey", "InService")
        desc = self.b.describe_cluster(ClusterName="journey")
        listed = self.cli("list-cluster-nodes", "--cluster-name", "journey",
                          "--instance-group-name-contains", "work")
        worker_group = [g for g in desc["InstanceGroups"] if g["InstanceGroupName"] == "worker"][0]
        self.assertEqual((worker_group["CurrentCount"], worker_group["TargetCount"]), (1, 1))
        self.assertEqual(len(listed["ClusterNodeSummaries"]), 1)
        self.assertEqual(len(self.nodes("journey")), 2)

        # Add a group and delete another in one call.
        self.cli("update-cluster", "--cluster-name", "journey",
                 "--instance-groups", json.dumps([group("extra", 2, instance_type="ml.m5.large")]),
                 "--instance-groups-to-delete", "worker")
        wait_cluster(self.b, "journey", "InService")
        desc = self.b.describe_cluster(ClusterName="journey")
        self.assertEqual([(g["InstanceGroupName"], g["CurrentCount"], g["TargetCount"])
                          for g in desc["InstanceGroups"]],
                         [("controller", 1, 1), ("extra", 2, 2)])
        nodes = self.nodes("journey")
        self.assertEqual(sorted(n["InstanceGroupName"] for n in nodes),
                         ["controller", "extra", "extra"])

        # BatchDeleteClusterNodes: one real node, one unknown id.
        victim = next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "extra")
        missing = "i-0123456789abcdef0"
        out = self.cli("batch-delete-cluster-nodes", "--cluster-name", "journey",
                       "--node-ids", victim, missing)
        self.assertEqual(out["Successful"], [victim])
        self.assertEqual(len(out["Failed"]), 1)
        self.assertEqual(out["Failed"][0]["NodeId"], missing)
        self.assertEqual(out["Failed"][0]["Code"], "NodeIdNotFound")
        self.assertIsInstance(out["Failed"][0]["Message"], str)
        self.assertNotIn("SuccessfulNodeLogicalIds", out)
        nodes = self.wait_nodes("journey", lambda ns: victim not in {n["InstanceId"] for n in ns})
        self.assertNotIn(victim, {n["InstanceId"] for n in nodes})
        self.assertEqual(len(nodes), 2)
        extra = [g for g in wait_cluster(self.b, "journey", "InService")["InstanceGroups"]
                 if g["InstanceGroupName"] == "extra"][0]
        self.assertEqual(extra["TargetCount"], 1)

        # Events: newest first by default, with every resource type; describe one.
        events = self.cli("list-cluster-events", "--cluster-name", "journey")["Events"]
        self.assertGreater(len(events), 5)
        times = [e["EventTime"] for e in events]
        self.assertEqual(times, sorted(times, reverse=True))
        self.assertEqual({e["ResourceType"] for e in events}, {"Cluster", "InstanceGroup", "Instance"})
        for e in events:
            self.assertRegex(e["EventId"], UUID_RE)
            self.assertEqual((e["ClusterName"], e["ClusterArn"]), ("journey", created["ClusterArn"]))
            self.assertIn(e["EventLevel"], ("Info", "Warn", "Error"))
        self.assertEqual(len({e["EventId"] for e in events}), len(events))
        instance_event = next(e for e in events if e["ResourceType"] == "Instance")
        detail = self.cli("describe-cluster-event", "--cluster-name", "journey",
                          "--event-id", instance_event["EventId"])["EventDetails"]
        for k in ("EventId", "ClusterArn", "ClusterName", "InstanceGroupName", "InstanceId",
                  "ResourceType", "EventTime", "Description", "EventLevel"):
            self.assertEqual(detail[k], instance_event[k], k)
        only_nodes = self.cli("list-cluster-events", "--cluster-name", "journey",
                              "--resource-type", "Instance", "--sort-order", "Ascending")["Events"]
        self.assertTrue(only_nodes and all(e["ResourceType"] == "Instance" for e in only_nodes))
        times = [e["EventTime"] for e in only_nodes]
        self.assertEqual(times, sorted(times))

        # Delete: Deleting (unless already done), then ResourceNotFound everywhere.
        out = self.cli("delete-cluster", "--cluster-name", "journey")
        self.assertEqual(out, {"ClusterArn": created["ClusterArn"]})
        try:
            self.assertEqual(self.b.describe_cluster(ClusterName="journey")["ClusterStatus"],
                             "Deleting")
        except self.b.exceptions.ResourceNotFound:
            pass  # the fake provider terminates at once, so deletion may be over
        wait_cluster(self.b, "journey", None)
        msg = self.cli_error("DescribeCluster", "ResourceNotFound",
                             "describe-cluster", "--cluster-name", "journey")
        self.assertIn("journey", msg)
        names = [c["ClusterName"] for c in self.b.list_clusters()["ClusterSummaries"]]
        self.assertNotIn("journey", names)
        self.assertFalse([n for n in self.d.fake_nodes().values()
                          if n["cluster_id"] == created["ClusterArn"].rsplit("/", 1)[1]])

    def test_failing_lifecycle_scripts(self):
        self.cli("create-cluster", "--cluster-name", "lcs-fails", "--instance-groups",
                 json.dumps([group("controller", 1), group("broken", 2)]))
        wait_cluster(self.b, "lcs-fails", "Failed")
        self.wait_nodes("lcs-fails", lambda ns: not ns)
        desc, listed = parallel(
            lambda: self.cli("describe-cluster", "--cluster-name", "lcs-fails"),
            lambda: self.cli("list-cluster-nodes", "--cluster-name", "lcs-fails"))
        self.assertEqual(desc["ClusterStatus"], "Failed")
        msg = desc["FailureMessage"]
        self.assertRegex(msg, r"^Instance i-[a-f0-9]{17} failed to provision with the following "
                              r"error: \"Lifecycle scripts did not run successfully\.")
        self.assertIn("Lifecycle scripts did not run successfully", msg)
        self.assertTrue(msg.endswith("Note that multiple instances may be impacted."), msg)
        self.assertEqual(listed["ClusterNodeSummaries"], [])
        cluster_id = desc["ClusterArn"].rsplit("/", 1)[1]
        self.assertFalse([n for n in self.d.fake_nodes().values() if n["cluster_id"] == cluster_id])
        events = self.b.list_cluster_events(ClusterName="lcs-fails")["Events"]
        self.assertTrue(any(e["EventLevel"] == "Error" for e in events))
        # A Failed cluster can still be deleted.
        self.b.delete_cluster(ClusterName="lcs-fails")
        wait_cluster(self.b, "lcs-fails", None)


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()
