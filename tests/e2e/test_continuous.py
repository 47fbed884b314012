"""Continuous provisioning on real namespaced nodes with Slurm (NodeProvisioningMode
Continuous, docs/provisioning.md).

A 1+2 cluster whose workers' lifecycle script fails the first time it runs
anywhere, and otherwise waits for a gate file the test creates:
  - the cluster is InService while no worker runs yet (its controller does),
    with the workers' group still Creating: never a race, since no worker can
    run before the gate opens;
  - the worker whose script failed is terminated and launched again with the
    same NodeLogicalId under a new instance id, not the cluster failed;
  - once the gate opens both workers join and `srun -N2` runs on them;
  - `aws sagemaker batch-add-cluster-nodes` (the real aws CLI) adds a worker
    that Slurm uses (`srun -N3`); the same ClientToken again answers the same
    NodeLogicalId and adds nothing.
Needs root."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402


class ContinuousProvisioningTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Slurm is not installed")
        cls.d = nodestest.NodesDaemon("t3c")
        try:
            root = cls.d.root
            lcs = os.path.join(root, "lcs")
            nodestest.write_script(os.path.join(lcs, "controller", "on_create.sh"),
                                   "#!/bin/bash\ntrue\n")
            # In the cluster's shared /fsx (a node's own writes elsewhere stay its
            # own); mkdir is atomic: exactly one run, on whichever worker comes
            # first, fails.
            nodestest.write_script(
                os.path.join(lcs, "workers", "on_create.sh"),
                "#!/bin/bash\n"
                "if mkdir /fsx/failed-once 2>/dev/null; then echo first run fails; exit 7; fi\n"
                "for i in $(seq 1200); do [ -e /fsx/gate ] && exit 0; sleep 0.1; done\n"
                "echo the gate never opened; exit 1\n")
            spec = os.path.join(root, "cluster.json")
            with open(spec, "w") as f:
                json.dump([
                    nodestest.lcs_group("controller-machine", 1, "file://%s/controller/" % lcs,
                                        SlurmConfig={"NodeType": "Controller"}),
                    nodestest.lcs_group("workers", 2, "file://%s/workers/" % lcs,
                                        SlurmConfig={"NodeType": "Compute"})], f)
            cls.d.start()
            cls.d.hpod("create-cluster", "--cluster-name", "cont", "--instance-groups",
                       "file://" + spec, "--node-provisioning-mode", "Continuous")
            cls.in_service = cls.d.wait_status("cont", "InService", timeout=240)
            cls.view = nodestest.ClusterView(cls.d, "cont")
            cls.gate = cls.view.fsx_path("gate")
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def group(self, name):
        d = self.d.hpod_json("describe-cluster", "--cluster-name", "cont")
        return [g for g in d["InstanceGroups"] if g["InstanceGroupName"] == name][0]

    def events(self):
        return self.d.hpod_json("list-cluster-events", "--cluster-name", "cont",
                                "--max-results", "100")["Events"]

    def nodes(self):
        return self.d.hpod_json("list-cluster-nodes", "--cluster-name", "cont",
                                "--include-node-logical-ids")["ClusterNodeSummaries"]

    def wait(self, what, check):
        return hpodtest.wait_for(self, what, check, timeout=180,
                                 detail=lambda: "\n" + self.d.log_tail())

    def on_controller(self, command):
        ctl = [n for n in self.nodes() if n["InstanceGroupName"] == "controller-machine"][0]
        return self.d.session(self.view.target(ctl), command)

    def aws(self, *args):
        cmd = ["aws", "--endpoint-url", self.d.endpoint, "--region", hpodtest.REGION,
               "sagemaker"] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.d.env(), timeout=120)
        self.assertEqual(p.returncode, 0, "%s: %s" % (" ".join(cmd), p.stderr))
        return json.loads(p.stdout)

    def test_1_in_service_before_the_workers_and_a_failed_worker_is_retried(self):
        self.assertEqual(self.in_service["NodeProvisioningMode"], "Continuous")
        groups = {g["InstanceGroupName"]: g for g in self.in_service["InstanceGroups"]}
        self.assertEqual(groups["controller-machine"]["CurrentCount"], 1)
        self.assertEqual(groups["workers"]["CurrentCount"], 0, "the gate is still shut")
        self.assertEqual(groups["workers"]["Status"], "Creating")
        # The first worker's script fails; it is terminated and launched again.
        retried = self.wait("a retry", lambda: [
            e for e in self.events()
            if "Pending: Launch attempt 2 of workers-" in e["Description"]])
        self.assertIn("attempt 1 (", retried[0]["Description"])
        self.assertIn("failed: Lifecycle script on_create.sh exited with code 7",
                      retried[0]["Description"])
        logical = retried[0]["Description"].split("NodeLogicalId ")[1].rstrip(")")
        failed = [e for e in self.events()
                  if e["Description"].startswith("Instance terminated after it failed")]
        self.assertEqual(len(failed), 1, failed)
        self.assertEqual(self.d.hpod_json("describe-cluster", "--cluster-name", "cont")
                         ["ClusterStatus"], "InService")
        # Both join once the gate opens.
        open(self.gate, "w").close()
        self.wait("both workers", lambda: self.group("workers")["CurrentCount"] == 2)
        self.assertEqual(self.group("workers")["Status"], "InService")
        workers = [n for n in self.nodes() if n["InstanceGroupName"] == "workers"]
        again = [n for n in workers if n["NodeLogicalId"] == logical]
        self.assertEqual(len(again), 1, workers)
        self.assertNotEqual(again[0]["InstanceId"], failed[0]["InstanceId"])
        self.assertEqual(again[0]["InstanceStatus"]["Status"], "Running")
        hosts = self.on_controller("srun -N2 hostname").split()
        self.assertEqual(len(set(hosts)), 2, hosts)

    def test_2_batch_add_cluster_nodes_with_the_aws_cli(self):
        self.wait("both workers", lambda: self.group("workers")["CurrentCount"] == 2)
        args = ["batch-add-cluster-nodes", "--cluster-name", "cont", "--client-token", "add-1",
                "--nodes-to-add", "InstanceGroupName=workers,IncrementTargetCountBy=1"]
        first = self.aws(*args)
        self.assertEqual(first["Failed"], [])
        self.assertEqual(len(first["Successful"]), 1)
        added = first["Successful"][0]
        self.assertEqual(added["InstanceGroupName"], "workers")
        self.assertEqual(added["Status"], "Pending")
        # The same token again: the same node, nothing added.
        self.assertEqual(self.aws(*args)["Successful"][0]["NodeLogicalId"],
                         added["NodeLogicalId"])
        self.assertEqual(self.group("workers")["TargetCount"], 3)
        node = self.wait("the added node", lambda: (lambda n: n if n["InstanceStatus"]["Status"]
                                                    == "Running" else None)(
            self.aws("describe-cluster-node", "--cluster-name", "cont", "--node-logical-id",
                     added["NodeLogicalId"])["NodeDetails"]))
        self.assertEqual(node["InstanceGroupName"], "workers")
        self.wait("the group", lambda: self.group("workers")["Status"] == "InService")
        hosts = self.on_controller("srun -N3 hostname").split()
        self.assertEqual(len(set(hosts)), 3, hosts)
        self.assertEqual(len([n for n in self.nodes() if n["InstanceGroupName"] == "workers"]), 3)


if __name__ == "__main__":
    unittest.main()
