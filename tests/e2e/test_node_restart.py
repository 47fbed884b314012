"""hpodd restarts under running nodes: after kill -9 of hpodd the nodes keep
running, the new hpodd re-adopts them (they stay Running, their agents reconnect
with their node credentials, sessions work, and the restart judges no live node
unhealthy), and a node whose namespaces died meanwhile is detected and reported.
With NodeRecovery=None (here) it stays Failure, its group Degraded, and an update
still completes beside it; with Automatic it is replaced (test_recovery.py).
Needs root."""
import json
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402


class NodeRestartTest(unittest.TestCase):
    def test_restart_readopts_nodes_and_reports_vanished_ones(self):
        nodestest.require_nodes()
        d = nodestest.NodesDaemon("t3r")
        self.addCleanup(d.cleanup)
        lcs = os.path.join(d.root, "lcs")
        # The script counts its runs: a restart of hpodd must not re-run it.
        nodestest.write_script(os.path.join(lcs, "on_create.sh"),
                               "#!/bin/bash\nmkdir -p /fsx/runs\n"
                               "echo run >> /fsx/runs/$(hostname)\n")
        d.start()
        spec = os.path.join(d.root, "c.json")
        with open(spec, "w") as f:
            json.dump([nodestest.lcs_group("workers", 2, "file://%s/" % lcs)], f)
        d.hpod("create-cluster", "--cluster-name", "r", "--instance-groups", "file://" + spec,
               "--node-recovery", "None")
        out = d.wait_status("r", "InService")
        cid = out["ClusterArn"].split("/")[-1]
        nodes = d.nodes("r")
        pids = {n["InstanceId"]: d.node_pid(n["InstanceId"]) for n in nodes}

        d.kill()
        for pid in pids.values():
            os.kill(pid, 0)  # still alive without hpodd
        # One node dies while hpodd is down.
        victim, survivor = nodes[0]["InstanceId"], nodes[1]["InstanceId"]
        os.kill(pids[victim], signal.SIGKILL)
        d.start()

        deadline = time.time() + 60
        status = {}
        while time.time() < deadline:
            status = {n["InstanceId"]: n["InstanceStatus"]["Status"] for n in d.nodes("r")}
            if status.get(victim) == "Failure":
                break
            time.sleep(0.5)
        self.assertEqual(status.get(victim), "Failure", status)
        self.assertEqual(status.get(survivor), "Running", status)
        detail = d.hpod_json("describe-cluster-node", "--cluster-name", "r", "--node-id",
                             victim)["NodeDetails"]
        self.assertIn("its namespaces vanished", detail["InstanceStatus"].get("Message", ""),
                      detail)
        self.assertEqual(d.node_pid(survivor), pids[survivor])  # adopted, not relaunched
        # The survivor's agent reconnected with its credential: a session works.
        target = "sagemaker-cluster:%s_workers-%s" % (cid, survivor)
        deadline = time.time() + 30
        while True:
            p = d.hpod("start-session", "--target", target, "--command", "cat /fsx/runs/$(hostname)",
                       check=False)
            if p.returncode == 0 or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(p.returncode, 0, p.stderr)
        # The script ran once, not again (a login shell may print its own lines too).
        self.assertEqual(p.stdout.split().count("run"), 1, p.stdout)
        # Past the startup grace, the restart judged only the dead node: it is
        # reported (marked only), the survivor has no recovery at all.
        time.sleep(16)
        recoveries = d.hpod_json("hpod-list-recoveries", "--cluster-name", "r")["Recoveries"]
        self.assertEqual([(r["NodeId"], r["Status"]) for r in recoveries],
                         [(victim, "Reported")], recoveries)

        # The failed node degrades its group, not the cluster (ClusterStatus has no
        # Degraded), and says so in the cluster's events.
        desc = d.hpod_json("describe-cluster", "--cluster-name", "r")
        self.assertEqual(desc["ClusterStatus"], "InService", desc)
        self.assertEqual(desc["InstanceGroups"][0]["Status"], "Degraded", desc)
        events = [e["Description"] for e in
                  d.hpod_json("list-cluster-events", "--cluster-name", "r")["Events"]]
        self.assertTrue(any("Instance group workers is Degraded" in e and victim in e
                            for e in events), events)
        # It keeps its slot and blocks no update: scaling up launches a node beside
        # it and the update ends InService (it used to stay Updating for good).
        with open(spec, "w") as f:
            json.dump([nodestest.lcs_group("workers", 3, "file://%s/" % lcs)], f)
        d.hpod("update-cluster", "--cluster-name", "r", "--instance-groups", "file://" + spec)
        out = d.wait_status("r", "InService")
        group = out["InstanceGroups"][0]
        self.assertEqual((group["TargetCount"], group["CurrentCount"], group["Status"]),
                         (3, 2, "Degraded"), out)
        status = {n["InstanceId"]: n["InstanceStatus"]["Status"] for n in d.nodes("r")}
        self.assertEqual(sorted(status.values()), ["Failure", "Running", "Running"], status)


if __name__ == "__main__":
    hpodtest.main()
