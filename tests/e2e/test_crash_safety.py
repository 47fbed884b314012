"""End-to-end: hpodd killed with SIGKILL mid-operation converges after a restart.

Clusters of 1 controller + 6 workers are created, scaled up and down, trimmed
with BatchDeleteClusterNodes, failed and deleted; hpodd is killed at many points
during each operation and restarted on the same data dir. The fake provider's
nodes (files in HPOD_FAKE_STATE_DIR, which outlive the daemon like machines do)
are the ground truth: once the cluster has converged, ListClusterNodes must name
exactly the live machines of that cluster, with no duplicate and no orphan.
Also: SIGTERM stops hpodd cleanly (exit 0) even while work is in flight.
"""
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, wait_cluster  # noqa: E402

PENDING_MS = 150
BASE = {"ctl": 1, "work": 6}


def groups_for(counts):
    return [group(name, n) for name, n in counts.items()]


class CrashSafetyTest(unittest.TestCase):
    def setUp(self):
        self.d = hpodtest.Daemon(pending_ms=PENDING_MS, fail_groups="broken").start()
        self.addCleanup(self.d.cleanup)
        self.sm = self.d.boto3()
        self.kills = 0

    # helpers -------------------------------------------------------------------
    def crash_and_restart(self, delay_ms):
        if delay_ms:
            time.sleep(delay_ms / 1000.0)
        self.d.kill()
        self.kills += 1
        self.d.start()
        self.sm = self.d.boto3()

    def cluster_id(self, name_or_arn):
        return self.sm.describe_cluster(ClusterName=name_or_arn)["ClusterArn"].rsplit("/", 1)[1]

    def all_nodes(self, name):
        pages = self.sm.get_paginator("list_cluster_nodes").paginate(
            ClusterName=name, PaginationConfig={"PageSize": 4})
        return [n for p in pages for n in p["ClusterNodeSummaries"]]

    def assert_converged(self, name, counts, why, timeout=45):
        """Waits for InService, then until the checks hold (they must, eventually)."""
        deadline = time.time() + timeout
        wait_cluster(self.sm, name, "InService", timeout=timeout)
        while True:
            try:
                return self._check_converged(name, counts, why)
            except AssertionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def _check_converged(self, name, counts, why):
        desc = self.sm.describe_cluster(ClusterName=name)
        self.assertEqual(desc["ClusterStatus"], "InService", why)
        cid = desc["ClusterArn"].rsplit("/", 1)[1]
        self.assertEqual({g["InstanceGroupName"]: (g["TargetCount"], g["CurrentCount"])
                          for g in desc["InstanceGroups"]},
                         {g: (n, n) for g, n in counts.items()}, why)
        self.assertTrue(all(g["Status"] == "InService" for g in desc["InstanceGroups"]), why)
        nodes = self.all_nodes(name)
        ids = [n["InstanceId"] for n in nodes]
        self.assertEqual(len(ids), len(set(ids)), "%s: duplicated instance ids %s" % (why, ids))
        self.assertEqual(len(ids), sum(counts.values()), why)
        self.assertTrue(all(n["InstanceStatus"]["Status"] == "Running" for n in nodes), why)
        for g, n in counts.items():
            self.assertEqual(sum(1 for x in nodes if x["InstanceGroupName"] == g), n, why)
        hostnames = [n["PrivateDnsHostname"] for n in nodes]
        self.assertEqual(len(hostnames), len(set(hostnames)), "%s: duplicated hostnames" % why)
        live = {i: r for i, r in self.d.fake_nodes().items() if r["cluster_id"] == cid}
        self.assertEqual(set(live), set(ids), "%s: API nodes vs provider machines" % why)
        for n in nodes:
            self.assertEqual(live[n["InstanceId"]]["group"], n["InstanceGroupName"], why)
        self.assertTrue(self.sm.list_cluster_events(ClusterName=name)["Events"], why)
        return nodes

    def assert_no_orphans(self):
        """Every live machine belongs to a cluster that lists it."""
        listed, hostnames = set(), []
        for c in self.sm.list_clusters()["ClusterSummaries"]:
            nodes = self.all_nodes(c["ClusterArn"])
            listed |= {n["InstanceId"] for n in nodes}
            hostnames += [n["PrivateDnsHostname"] for n in nodes]
        self.assertEqual(set(self.d.fake_nodes()), listed, "machines nobody lists (or vice versa)")
        self.assertEqual(len(hostnames), len(set(hostnames)), "two machines share an address")

    # create --------------------------------------------------------------------
    def test_kill_during_create(self):
        for i, delay in enumerate((0, 20, 60, 120, 200, 350)):
            name = "create-%d" % i
            with self.subTest(kill_after_ms=delay):
                self.sm.create_cluster(ClusterName=name, InstanceGroups=groups_for(BASE))
                self.crash_and_restart(delay)
                self.assert_converged(name, BASE, "create, killed after %d ms" % delay)
        self.assert_no_orphans()

    def test_kill_while_create_request_in_flight(self):
        # The response may or may not have been sent: either the cluster exists and
        # converges, or it never existed and no machine was launched for it.
        for i, delay in enumerate((0, 2, 5)):
            name = "inflight-%d" % i
            with self.subTest(kill_after_ms=delay):
                t = threading.Thread(target=self._create_quietly, args=(name,))
                t.start()
                self.crash_and_restart(delay)
                t.join(30)
                try:
                    self.sm.describe_cluster(ClusterName=name)
                    exists = True
                except self.sm.exceptions.ResourceNotFound:
                    exists = False
                if exists:
                    self.assert_converged(name, BASE, "in-flight create, kill at %d ms" % delay)
                else:
                    self.sm.create_cluster(ClusterName=name, InstanceGroups=groups_for(BASE))
                    self.assert_converged(name, BASE, "retried create")
        self.assert_no_orphans()

    def _create_quietly(self, name):
        try:
            self.d.boto3().create_cluster(ClusterName=name, InstanceGroups=groups_for(BASE))
        except Exception:  # noqa: BLE001 -- the daemon dies under it, by design
            pass

    # update --------------------------------------------------------------------
    def test_kill_during_scale_up_and_down(self):
        self.sm.create_cluster(ClusterName="scale", InstanceGroups=groups_for(BASE))
        self.assert_converged("scale", BASE, "initial create")
        steps = [(9, 0), (12, 50), (14, 150), (16, 300),      # up
                 (10, 0), (5, 30), (3, 100), (1, 250)]        # down
        for target, delay in steps:
            counts = {"ctl": 1, "work": target}
            with self.subTest(work=target, kill_after_ms=delay):
                self.sm.update_cluster(ClusterName="scale",
                                       InstanceGroups=[group("work", target)])
                self.crash_and_restart(delay)
                self.assert_converged("scale", counts, "scale to %d, killed after %d ms"
                                      % (target, delay))
        # Add a group and delete one at once, killed at once.
        self.sm.update_cluster(ClusterName="scale", InstanceGroups=[group("extra", 3)],
                               InstanceGroupsToDelete=["work"])
        self.crash_and_restart(0)
        self.assert_converged("scale", {"ctl": 1, "extra": 3}, "add+delete group, killed")
        self.assert_no_orphans()

    def test_kill_during_batch_delete(self):
        self.sm.create_cluster(ClusterName="trim", InstanceGroups=groups_for(BASE))
        nodes = self.assert_converged("trim", BASE, "initial create")
        workers = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "work"]
        for k, delay in enumerate((0, 10)):
            victims = workers[2 * k:2 * k + 2]
            with self.subTest(kill_after_ms=delay):
                out = self.sm.batch_delete_cluster_nodes(ClusterName="trim", NodeIds=victims)
                self.assertEqual(sorted(out["Successful"]), sorted(victims))
                self.crash_and_restart(delay)
                # BatchDelete lowers the target; the cluster stays InService meanwhile, so
                # wait for the machines to go rather than for a status.
                deadline = time.time() + 30
                while time.time() < deadline and set(victims) & set(self.d.fake_nodes()):
                    time.sleep(0.1)
                remaining = {"ctl": 1, "work": 6 - 2 * (k + 1)}
                nodes = self.assert_converged("trim", remaining, "batch delete, killed after %d ms"
                                              % delay)
                self.assertFalse(set(victims) & {n["InstanceId"] for n in nodes})
        self.assert_no_orphans()

    # node recovery -------------------------------------------------------------------
    def test_kill_during_node_recovery(self):
        """BatchReplace/BatchReboot (the same recovery a health verdict starts), hpodd
        killed at every point of it: each recovery finishes once; a replaced node's
        slot, hostname and address survive under a new instance id, a rebooted one
        keeps its id; no machine is duplicated or orphaned."""
        self.sm.create_cluster(ClusterName="heal", InstanceGroups=groups_for(BASE))
        nodes = self.assert_converged("heal", BASE, "initial create")
        names = sorted(n["PrivateDnsHostname"] for n in nodes)
        workers = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "work"]
        for k, delay in enumerate((0, 40, 120, 250)):
            with self.subTest(kill_after_ms=delay):
                victims = workers[k:k + 1]
                if k % 2 == 0:
                    out = self.sm.batch_replace_cluster_nodes(ClusterName="heal", NodeIds=victims)
                else:
                    out = self.sm.batch_reboot_cluster_nodes(ClusterName="heal", NodeIds=victims)
                self.assertEqual(out.get("Failed", []), [], out)
                self.crash_and_restart(delay)
                deadline = time.time() + 30
                if k % 2 == 0:  # replaced: the old machine goes
                    while time.time() < deadline and set(victims) & set(self.d.fake_nodes()):
                        time.sleep(0.1)
                nodes = self.assert_converged("heal", BASE, "recovery, killed after %d ms"
                                              % delay)
                ids = {n["InstanceId"] for n in nodes}
                if k % 2 == 0:
                    self.assertFalse(set(victims) & ids, "replaced nodes are gone")
                else:
                    self.assertTrue(set(victims) <= ids, "a rebooted node keeps its id")
                self.assertEqual(sorted(n["PrivateDnsHostname"] for n in nodes), names,
                                 "every hostname kept")
                if k % 2 == 1:
                    machine = self.d.fake_nodes()[victims[0]]
                    self.assertEqual(machine.get("reboots"), 1, "rebooted exactly once")
        self.assert_no_orphans()

    # failure and delete ----------------------------------------------------------
    def test_kill_while_failing(self):
        for i, delay in enumerate((100, 300)):
            name = "fails-%d" % i
            with self.subTest(kill_after_ms=delay):
                self.sm.create_cluster(ClusterName=name,
                                       InstanceGroups=[group("ctl", 1), group("broken", 3)])
                cid = self.cluster_id(name)
                self.crash_and_restart(delay)
                desc = wait_cluster(self.sm, name, "Failed", timeout=45)
                self.assertIn("Lifecycle scripts did not run successfully", desc["FailureMessage"])
                deadline = time.time() + 30
                while time.time() < deadline and (
                        self.all_nodes(name) or
                        any(r["cluster_id"] == cid for r in self.d.fake_nodes().values())):
                    time.sleep(0.1)
                self.assertEqual(self.all_nodes(name), [])
                self.assertFalse([r for r in self.d.fake_nodes().values()
                                  if r["cluster_id"] == cid])
        self.assert_no_orphans()

    def test_kill_during_delete(self):
        names = ["del-%d" % i for i in range(3)]
        for name in names:
            self.sm.create_cluster(ClusterName=name, InstanceGroups=groups_for(BASE))
        cids = {}
        for name in names:
            self.assert_converged(name, BASE, "initial create")
            cids[name] = self.cluster_id(name)
        for name, delay in zip(names, (0, 5, 20)):
            with self.subTest(kill_after_ms=delay):
                self.sm.delete_cluster(ClusterName=name)
                self.crash_and_restart(delay)
                wait_cluster(self.sm, name, None, timeout=45)
                self.assertNotIn(name, [c["ClusterName"] for c in
                                        self.sm.list_clusters()["ClusterSummaries"]])
                self.assertFalse([r for r in self.d.fake_nodes().values()
                                  if r["cluster_id"] == cids[name]])
                # The name is free again.
                self.sm.create_cluster(ClusterName=name, InstanceGroups=[group("ctl", 1)])
                self.assert_converged(name, {"ctl": 1}, "re-created after delete")
        self.assertGreaterEqual(self.kills, 3)
        self.assert_no_orphans()

    # graceful stop -----------------------------------------------------------------
    def test_sigterm_exits_cleanly(self):
        # Idle.
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.d.proc.wait(timeout=20), 0)
        self.d.kill()  # only reaps and closes the pipe: it has exited
        # Busy: converging a cluster and answering requests.
        self.d.start()
        self.sm = self.d.boto3()
        self.sm.create_cluster(ClusterName="term", InstanceGroups=groups_for(BASE))
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.d.proc.wait(timeout=20), 0)
        self.d.kill()
        # A new Daemon on the same root (no second `hpodd init`) picks up where it stopped.
        again = hpodtest.Daemon(pending_ms=PENDING_MS, root=self.d.root)
        self.addCleanup(again.kill)
        self.assertFalse(hasattr(again, "init_output"), "the data dir was initialized again")
        self.d = again.start()
        self.sm = self.d.boto3()
        self.assert_converged("term", BASE, "after SIGTERM")
        self.assertEqual(self.d.stop(), 0)
        with open(os.path.join(self.d.root, "hpodd.out")) as f:
            log = f.read()
        self.assertEqual(log.count("received SIGTERM, shutting down"), 3, log[-2000:])


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()
