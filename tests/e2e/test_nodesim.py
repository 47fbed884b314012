"""hpodd with 500 simulated nodes (issue 30): hpod-nodesim runs every node's agent
on the real channel protocol (tests/support/nodesim/) against hpodd-fake, whose
fake provider hands each launched node's agent config to the simulator.

One cluster of 1 controller + 499 workers (Slurm roles from SlurmConfig; the
simulated controller reports `scontrol show nodes` from the simulated slurmds)
must reach InService with every agent connected; then, at once, 3 nodes hang
(silent, socket open), 3 die (socket gone for good) and 2 report a failing health
check with verdict Replace, while 2 others flap (their channel drops every
700 ms and comes back) and 2 drop their channel once; and the simulator holds one
node's heartbeats back for 12 s, as when its own thread is busy. Each of the 9
failed nodes is recovered exactly once (one HpodListRecoveries record, Succeeded,
a replacement under the same hostname); no other node is touched; the cluster
still has 500 nodes with the same hostnames; the simulator's record of the late
node's heartbeat gap holds that recovery's detection (how the benchmark tells a
recovery the simulator caused from one hpodd made up). The figures (create -> InService,
detection of the silent nodes, the recoveries' span) are printed, not asserted.
HPOD_NODESIM_NODES overrides the size. test_nodesim_tls.py runs the same test with
network agents (join, then mutual TLS).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
from datetime import datetime

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402

NODES = int(os.environ.get("HPOD_NODESIM_NODES", "500"))
NODESIM = os.path.join(hpodtest.BIN_DIR, "tests", "hpod-nodesim")


class Simulator:
    """hpod-nodesim on an agent dir; commands on stdin, JSON lines from stdout."""

    def __init__(self, agent_dir, args=()):
        self.proc = subprocess.Popen([NODESIM, "--agent-dir", agent_dir] + list(args),
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.proc.stdout.readline())
        assert ready.get("event") == "ready", ready
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(json.loads(line))
                self.cv.notify_all()

    def command(self, line, key="reply", timeout=30):
        """Sends one command; returns its answer (the next line with `key`)."""
        with self.cv:
            start = len(self.lines)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for msg in self.lines[start:]:
                    if key in msg:
                        return msg
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError("hpod-nodesim did not answer %r" % line)
                self.cv.wait(left)

    def stats(self):
        return self.command("stats", key="stats")["stats"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def list_nodes(client, name):
    """Every ListClusterNodes page of cluster `name`, through boto3 `client`."""
    out, token = [], None
    while True:
        kw = {"ClusterName": name, "MaxResults": 100}
        if token:
            kw["NextToken"] = token
        page = client.list_cluster_nodes(**kw)
        out += page["ClusterNodeSummaries"]
        token = page.get("NextToken")
        if not token:
            return out


def list_recoveries(daemon, name):
    """HpodListRecoveries of cluster `name`, through the hpod CLI."""
    return json.loads(daemon.hpod("hpod-list-recoveries", "--cluster-name", name))["Recoveries"]


def free_port():
    """A loopback port free now, for hpodd's agent listener: the fake provider
    writes it into each node's config before hpodd starts listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NodeSimTest(unittest.TestCase):
    # Network agents: each node joins with its launch's token, then speaks
    # over mutual TLS (HPOD_FAKE_AGENT_URL). False: hpodd's agent socket.
    tls = False
    NODES = NODES

    @classmethod
    def setUpClass(cls):
        hpodtest.require_aws_clients()
        if not os.path.exists(NODESIM):
            raise unittest.SkipTest("no " + NODESIM)
        cls.d = hpodtest.Daemon(pending_ms=0)
        cls.agent_dir = os.path.join(cls.d.root, "agents")
        cls.d.env_extra["HPOD_FAKE_AGENT_DIR"] = cls.agent_dir
        if cls.tls:
            cls.d.env_extra["HPOD_FAKE_AGENT_URL"] = "https://127.0.0.1:%d" % free_port()
        cls.d.start()
        cls.sim = Simulator(cls.agent_dir)
        cls.client = cls.d.boto3()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.client.delete_cluster(ClusterName="sim")
            hpodtest.wait_cluster(cls.client, "sim", None, timeout=120)
        except Exception as e:  # the test's own failure matters more
            print("cleanup:", e)
        cls.sim.stop()
        cls.d.stop()
        cls.d.cleanup()

    def nodes(self):
        return list_nodes(self.client, "sim")

    def recoveries(self):
        return list_recoveries(self.d, "sim")

    def test_nodes_each_failure_recovered_once(self):
        NODES = self.NODES
        groups = [hpodtest.group("controller-machine", 1, SlurmConfig={"NodeType": "Controller"}),
                  hpodtest.group("workers", NODES - 1, SlurmConfig={"NodeType": "Compute"})]
        t0 = time.time()
        self.client.create_cluster(ClusterName="sim", InstanceGroups=groups)
        hpodtest.wait_cluster(self.client, "sim", "InService", timeout=300)
        created_s = time.time() - t0
        stats = self.sim.stats()
        self.assertEqual(stats["agents"], NODES, stats)
        self.assertEqual(stats["connected"], NODES, stats)
        self.assertEqual(stats["lifecycle_succeeded"], NODES, stats)
        # A connection attempt that failed (a burst of 500 handshakes at once) is
        # retried with backoff, as a real agent's; a refusal (401/404) is not.
        self.assertEqual((stats["errors"], stats["refusals"], stats["join_failures"]), (0, 0, 0),
                         stats)
        # Each network agent joined once, with its launch's token.
        self.assertEqual(stats["joins"], NODES if self.tls else 0, stats)
        first_connect_failures = stats["failure_reasons"]
        before = self.nodes()
        self.assertEqual(len(before), NODES)
        self.assertTrue(all(n["InstanceStatus"]["Status"] == "Running" for n in before))
        host_of = {n["InstanceId"]: n["PrivateDnsHostname"].split(".")[0] for n in before}
        workers = sorted(n["InstanceId"] for n in before if n["InstanceGroupName"] == "workers")
        silent, dead, failing = workers[0:3], workers[3:6], workers[6:8]
        flapping, blipped, late = workers[8:10], workers[10:12], workers[12]

        t_fault = time.time()
        for line in ("silence " + ",".join(silent), "kill " + ",".join(dead),
                     "fail %s slurm Replace" % ",".join(failing),
                     "flap %s 700" % ",".join(flapping), "disconnect " + ",".join(blipped),
                     "late %s 12000" % late):
            reply = self.sim.command(line)
            self.assertTrue(reply["ok"], reply)
        # The late node is the simulator's own fault (its heartbeats held back for
        # longer than hpodd's timeout): hpodd rightly recovers it too.
        failed = set(silent + dead + failing + [late])

        def all_recovered():
            rs = self.recoveries()
            done = [r for r in rs if r["Status"] == "Succeeded"]
            return rs if len(done) >= len(failed) else None
        hpodtest.wait_for(self, "the 9 recoveries", all_recovered, timeout=180,
                          detail=lambda: " (have %s)" % [(r["NodeId"], r["Status"])
                                                         for r in self.recoveries()])
        self.sim.command("flap %s 0" % ",".join(flapping))
        # A few more heartbeat timeouts: a duplicate, or a healthy node taken for
        # dead, would show by now.
        time.sleep(8)
        rs = self.recoveries()
        self.assertEqual(sorted(r["NodeId"] for r in rs), sorted(failed),
                         "one recovery per failed node, none for another: %s" %
                         [(r["NodeId"], r["Source"], r.get("Reason")) for r in rs])
        for r in rs:
            self.assertEqual(r["Status"], "Succeeded", r)
            self.assertEqual(r["Hostname"], host_of[r["NodeId"]], r)
        replacements = {r["ReplacementNodeId"] for r in rs}
        self.assertEqual(len(replacements), len(failed))
        # The simulator's own record of each agent's long heartbeat gaps, which the
        # benchmark lays a recovery no fault asked for against: the late node's gap
        # ran until hpodd replaced it, so it holds that recovery's detection; a
        # healthy node has none. (A silence asked for is not the simulator's gap.)
        healthy = workers[13]
        gaps = self.sim.command("gaps %s,%s" % (late, healthy))
        self.assertTrue(gaps["ok"], "%s; the late node's recovery: %s; simulator: %s" % (
            gaps, [r for r in rs if r["NodeId"] == late], self.sim.stats()))
        self.assertEqual(gaps["gaps"][healthy], [], gaps)
        at = datetime.fromisoformat(
            [r for r in rs if r["NodeId"] == late][0]["Timeline"][0]["Time"]).timestamp()
        self.assertTrue(any(start <= at <= end for start, end in gaps["gaps"][late]),
                        "the late node's gap holds its detection at %.1f: %s" % (at, gaps))

        after = self.nodes()
        self.assertEqual(len(after), NODES)
        ids_after = {n["InstanceId"] for n in after}
        self.assertEqual(sorted(n["PrivateDnsHostname"].split(".")[0] for n in after),
                         sorted(host_of.values()), "hostnames are kept")
        self.assertFalse(failed & ids_after)
        self.assertEqual(replacements - ids_after, set())
        for i in flapping + blipped:
            self.assertIn(i, ids_after, "a node whose channel came back is not replaced")
        self.assertEqual(hpodtest.wait_cluster(self.client, "sim", "InService")["ClusterStatus"],
                         "InService")
        stats = self.sim.stats()
        self.assertEqual(stats["connected"], NODES, stats)  # the replacements' agents too
        self.assertEqual((stats["errors"], stats["refusals"], stats["join_failures"]), (0, 0, 0),
                         stats)
        self.assertEqual(stats["joins"], NODES + len(failed) if self.tls else 0, stats)

        # Figures, not assertions (the machine is shared).
        def epoch(t):
            return datetime.fromisoformat(t).timestamp()
        detect = sorted(epoch(r["Timeline"][0]["Time"]) - t_fault for r in rs if r["NodeId"] in silent)
        span = max(epoch(r["FinishedTime"]) for r in rs) - t_fault
        print("nodesim: %d nodes%s, create -> InService %.1f s; silent nodes detected after %s s "
              "(heartbeat timeout 6 s); 9 recoveries done %.1f s after the faults" %
              (NODES, " (network agents: join, mutual TLS; slowest join %d ms)" %
               stats["max_join_ms"] if self.tls else "", created_s,
               ", ".join("%.1f" % x for x in detect), span))
        print("nodesim: connection attempts that failed during the create: %s" %
              (first_connect_failures or "none"))


if __name__ == "__main__":
    hpodtest.main()
