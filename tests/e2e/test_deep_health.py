"""Deep health checks on real namespaced nodes with Slurm (docs/node-health.md,
"Deep health checks").

A 1+2 cluster whose workers' group has OnStartDeepHealthChecks InstanceStress and
InstanceConnectivity:
  - the cluster is InService only after both workers passed: stress-ng on each,
    iperf3 both ways between them and an allreduce of our collectives; each
    worker went through DeepHealthCheckInProgress (the gate holds a new node until
    its check passed, so this is no race), and the Slurm reservation is gone;
  - `hpod inject-fault --kind slow-link` shapes what one worker sends to
    100 Mbit/s with tc inside its namespace; `aws sagemaker
    start-cluster-health-check` (the real aws CLI) with InstanceConnectivity fails
    that worker by ratio against the other link, passes the other, and the failed
    one is replaced under its hostname (its replacement checked on start, its
    connectivity against the other worker);
  - `hpod inject-fault --kind cpu-throttle` holds a worker to 2% of a CPU;
    InstanceStress on it alone fails by stress-ng's rate, and it is replaced.
Needs root, stress-ng and iperf3."""
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402


def short(hostname):
    """Slurm's and hpod's messages name a node by its short hostname."""
    return hostname.split(".")[0]


class DeepHealthTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Slurm is not installed")
        for tool in ("stress-ng", "iperf3", "tc"):
            if not shutil.which(tool):
                raise unittest.SkipTest(tool + " is not installed (scripts/install-deps.sh)")
        cls.d = nodestest.NodesDaemon("t3h")
        try:
            root = cls.d.root
            lcs = os.path.join(root, "lcs")
            nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
            src = "file://%s/" % lcs
            spec = os.path.join(root, "cluster.json")
            with open(spec, "w") as f:
                json.dump([
                    nodestest.lcs_group("controller-machine", 1, src,
                                        SlurmConfig={"NodeType": "Controller"}),
                    nodestest.lcs_group("workers", 2, src, SlurmConfig={"NodeType": "Compute"},
                                        OnStartDeepHealthChecks=["InstanceStress",
                                                                 "InstanceConnectivity"])], f)
            cls.d.start()
            cls.d.hpod("create-cluster", "--cluster-name", "deep", "--instance-groups",
                       "file://" + spec)
            cls.d.wait_status("deep", "InService", timeout=300)
            cls.view = nodestest.ClusterView(cls.d, "deep")
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def workers(self):
        return sorted((n for n in self.d.nodes("deep") if n["InstanceGroupName"] == "workers"),
                      key=lambda n: n["InstanceId"])

    def node(self, instance_id):
        return self.d.hpod_json("describe-cluster-node", "--cluster-name", "deep", "--node-id",
                                instance_id)["NodeDetails"]

    def events(self):
        return self.d.hpod_json("list-cluster-events", "--cluster-name", "deep",
                                "--max-results", "100")["Events"]

    def wait(self, what, check, timeout=240):
        return hpodtest.wait_for(self, what, check, timeout=timeout, detail=self.state)

    def state(self):
        """What a timed-out wait shows: each node's status and check record, the
        newest events, then hpodd's log."""
        out = []
        try:
            for n in self.d.nodes("deep"):
                p = self.d.hpod("describe-cluster-node", "--cluster-name", "deep", "--node-id",
                                n["InstanceId"], "--output", "json", check=False)
                d = json.loads(p.stdout)["NodeDetails"] if p.returncode == 0 else {}
                out.append("%s %s %s" % (n["InstanceId"], n["InstanceStatus"],
                                         d.get("HpodDeepHealthCheck")))
            out += ["%s %s %s" % (e.get("EventTime"), e.get("InstanceId", "-"), e["Description"])
                    for e in reversed(self.events()[:25])]
        except Exception as e:  # noqa: BLE001 - a failure message must not fail
            out.append("(state unreadable: %s)" % e)
        return "\n" + "\n".join(out) + "\n" + self.d.log_tail()

    def on_controller(self, command):
        ctl = [n for n in self.d.nodes("deep") if n["InstanceGroupName"] == "controller-machine"]
        return self.d.session(self.view.target(ctl[0]), command)

    def aws(self, *args):
        cmd = ["aws", "--endpoint-url", self.d.endpoint, "--region", hpodtest.REGION,
               "sagemaker"] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.d.env(), timeout=120)
        self.assertEqual(p.returncode, 0, "%s: %s" % (" ".join(cmd), p.stderr))
        return json.loads(p.stdout)

    def check_of(self, instance_id):
        return self.node(instance_id).get("HpodDeepHealthCheck", {})

    def result(self, instance_id, before):
        """The event with the node's deep health check result, once there is one
        that is not among the events `before` (a failed node may be replaced, and
        gone, before its record is read)."""
        for e in self.events():
            if e["EventId"] in before:
                continue
            if e.get("InstanceId") == instance_id and e["Description"].startswith(
                    ("Deep health check passed at", "Deep health check failed at")):
                return e["Description"]
        return None

    def replaced(self, failed):
        """Waits until the worker with `failed`'s hostname is a new instance that
        is Running after its own OnStart check; returns it."""
        def back():
            for n in self.workers():
                if n["InstanceId"] == failed["InstanceId"]:
                    continue
                # A node listed a moment ago may be gone now (the failed one).
                p = self.d.hpod("describe-cluster-node", "--cluster-name", "deep", "--node-id",
                                n["InstanceId"], "--output", "json", check=False)
                if p.returncode != 0:
                    continue
                d = json.loads(p.stdout)["NodeDetails"]
                if (d["PrivateDnsHostname"] == failed["PrivateDnsHostname"]
                        and d["InstanceStatus"]["Status"] == "Running"):
                    return d
            return None
        d = self.wait("the replacement of " + failed["InstanceId"], back)
        self.assertEqual(d["HpodDeepHealthCheck"]["Status"], "Passed", d)
        self.assertEqual(d["HpodDeepHealthCheck"]["Origin"], "OnStartDeepHealthChecks")
        # Checked alone, it was measured against the other worker (not judged).
        self.assertIn("InstanceConnectivity passed: 2 nodes", d["HpodDeepHealthCheck"]["Message"])
        self.assertIn(", a Running peer)", d["HpodDeepHealthCheck"]["Message"])
        self.wait("the cluster InService", lambda: self.d.hpod_json(
            "describe-cluster", "--cluster-name", "deep")["ClusterStatus"] == "InService")
        # The recovery is done once it saw the replacement Running (a next pass).
        self.wait("the recovery's end", lambda: [
            e for e in self.events() if "recovered by Replace" in e["Description"]
            and "→ %s)" % d["InstanceId"] in e["Description"]])
        return d

    def test_1_new_workers_pass_before_the_cluster_serves(self):
        workers = self.workers()
        self.assertEqual(len(workers), 2)
        hosts = sorted(short(self.node(w["InstanceId"])["PrivateDnsHostname"]) for w in workers)
        for w in workers:
            c = self.check_of(w["InstanceId"])
            self.assertEqual(c["Status"], "Passed", c)
            self.assertEqual(c["Origin"], "OnStartDeepHealthChecks")
            self.assertEqual(c["DeepHealthChecks"], ["InstanceStress", "InstanceConnectivity"])
            self.assertIn("InstanceStress passed: stress-ng for 5 s", c["Message"])
            self.assertIn("InstanceConnectivity passed: 2 nodes, every pair connected; 2 iperf3 "
                          "links", c["Message"])
            self.assertIn("allreduce bus bandwidth", c["Message"])
        held = [e for e in self.events() if "Instance status changed from Pending to "
                "DeepHealthCheckInProgress" in e["Description"]]
        self.assertEqual(len(held), 2, held)
        # The reservation that held them ends on the checker's next pass; then
        # Slurm runs on both.
        self.wait("the reservation's end", lambda: "No reservations" in self.on_controller(
            "scontrol show reservation"), timeout=30)
        self.assertEqual(sorted(set(self.on_controller("srun -N2 hostname").split())), hosts)

    def test_2_a_slow_link_fails_connectivity_and_its_node_is_replaced(self):
        slow, other = self.workers()
        slow = self.node(slow["InstanceId"])
        self.d.hpod("inject-fault", "--cluster-name", "deep", "--node-id", slow["InstanceId"],
                    "--kind", "slow-link")
        before = {e["EventId"] for e in self.events()}
        out = self.aws("start-cluster-health-check", "--cluster-name", "deep",
                       "--deep-health-check-configurations",
                       "InstanceGroupName=workers,DeepHealthChecks=InstanceConnectivity")
        self.assertEqual(out["ClusterArn"], self.view.arn)
        bad = self.wait("the slow worker's result",
                        lambda: self.result(slow["InstanceId"], before))
        good = self.wait("the other's", lambda: self.result(other["InstanceId"], before))
        self.assertIn("Deep health check failed at", bad)
        self.assertIn("InstanceConnectivity failed: every link out of %s is slow"
                      % short(slow["PrivateDnsHostname"]), bad)
        self.assertIn("Deep health check passed at", good)
        self.assertEqual(self.check_of(other["InstanceId"])["Origin"], "StartClusterHealthCheck")
        recovery = [e for e in self.events() if "is unhealthy: deep health check "
                    "InstanceConnectivity failed" in e["Description"]]
        self.assertTrue(recovery, self.events())
        self.replaced(slow)

    def test_3_a_throttled_cpu_fails_stress_and_its_node_is_replaced(self):
        running = self.wait("two Running workers", lambda: (lambda w: w if len(w) == 2 and all(
            n["InstanceStatus"]["Status"] == "Running" for n in w) else None)(self.workers()))
        node = self.node(running[0]["InstanceId"])
        self.d.hpod("inject-fault", "--cluster-name", "deep", "--node-id", node["InstanceId"],
                    "--kind", "cpu-throttle")
        before = {e["EventId"] for e in self.events()}
        self.d.hpod("start-cluster-health-check", "--cluster-name", "deep",
                    "--deep-health-check-configurations",
                    json.dumps([{"InstanceGroupName": "workers",
                                 "InstanceIds": [node["InstanceId"]],
                                 "DeepHealthChecks": ["InstanceStress"]}]))
        bad = self.wait("the throttled worker's result",
                        lambda: self.result(node["InstanceId"], before))
        self.assertIn("Deep health check failed at", bad)
        self.assertIn("InstanceStress failed: cpu ran at", bad)
        self.replaced(node)


if __name__ == "__main__":
    unittest.main()
