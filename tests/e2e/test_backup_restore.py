"""End-to-end: scheduled backups and the restore drill of docs/operations.md.

hpodd-fake serves with `--backup-interval 2s --backup-keep 2 --backup-dir DIR`
(DIR outside the data dir, as the docs advise) while two clusters run. The
drill then loses the whole data dir: hpodd is stopped (SIGTERM), the data dir
is moved away, `hpodd restore` puts the newest scheduled backup into a fresh
data dir, and hpodd starts there with the same fake provider (its nodes are
files in HPOD_FAKE_STATE_DIR that outlive the daemon, as machines do). Every
node must be re-adopted, not relaunched: the same instance ids and launch
times through the API, and the provider's node files unchanged (no node
launched, terminated or rebooted). Deleting the clusters afterwards terminates
exactly the original machines: the restored hpodd owns them.

Also: bad --backup-interval / --backup-keep values stop hpodd with one line,
and restore refuses a data dir that has a store, one an hpodd serves, and a
file that is not an hpod store.
"""
import calendar
import json
import os
import re
import stat
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, wait_cluster  # noqa: E402

INTERVAL_S = 2
KEEP = 2
BACKUP_NAME = re.compile(r"^hpodd-(\d{8}T\d{6}Z)\.db$")
CLUSTERS = {"drill-a": {"ctl": 1, "work": 3}, "drill-b": {"work": 2}}


def scheduled_backups(backup_dir):
    """The scheduled backups' names in backup_dir, oldest first."""
    try:
        return sorted(n for n in os.listdir(backup_dir) if BACKUP_NAME.match(n))
    except FileNotFoundError:
        return []


def stamp_epoch(name):
    return calendar.timegm(time.strptime(BACKUP_NAME.match(name).group(1), "%Y%m%dT%H%M%SZ"))


def read(path):
    with open(path) as f:
        return f.read()


def machine_state(d):
    """What must not change across the drill: each machine's launch, termination
    and reboots, from the fake provider's files (live or not)."""
    return {i: (r["cluster_id"], r["group"], r["launched_at"], r["terminated_at"],
                r.get("reboots", 0))
            for i, r in d.fake_nodes(live_only=False).items()}


class BackupRestoreTest(unittest.TestCase):
    def setUp(self):
        self.d = hpodtest.Daemon(pending_ms=100)
        self.addCleanup(self.d.cleanup)
        self.backup_dir = os.path.join(self.d.root, "backups")

    def hpodd(self, *args):
        return subprocess.run([hpodtest.HPODD_FAKE] + list(args), capture_output=True, text=True,
                              timeout=30)

    def nodes(self, sm, name):
        pages = sm.get_paginator("list_cluster_nodes").paginate(ClusterName=name)
        return {n["InstanceId"]: (n["InstanceGroupName"], n["LaunchTime"],
                                  n["InstanceStatus"]["Status"])
                for p in pages for n in p["ClusterNodeSummaries"]}

    def test_bad_flags_stop_hpodd_with_one_line(self):
        for flag, value, want in (
                ("--backup-keep", "0", '--backup-keep: "0" must be a whole number of at least 1'),
                ("--backup-interval", "abc",
                 '--backup-interval: "abc" is not a duration; use e.g. 90s, 30m, 1h or 7d')):
            with self.subTest(flag=flag):
                p = self.hpodd("--data-dir", self.d.data_dir, "--listen", "127.0.0.1:0",
                               flag, value)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(p.stderr, "hpodd: error: %s\n" % want)
                self.assertEqual(p.stdout, "")

    def test_restore_drill_readopts_every_node(self):
        hpodtest.require_aws_clients()
        started = time.time()
        self.d.extra_args = ["--backup-interval", "%ds" % INTERVAL_S, "--backup-keep", str(KEEP),
                             "--backup-dir", self.backup_dir]
        self.d.start()
        # The real aws CLI creates the clusters; boto3 polls (no CLI start-up per poll).
        hpodtest.parallel(*[
            (lambda n=n, c=c: self.d.aws(
                "create-cluster", "--cluster-name", n, "--instance-groups",
                json.dumps([group(g, k) for g, k in c.items()])))
            for n, c in CLUSTERS.items()])
        sm = self.d.boto3()
        for name in CLUSTERS:
            wait_cluster(sm, name, "InService", timeout=30)
        in_service = time.time()
        before = {name: self.nodes(sm, name) for name in CLUSTERS}
        for name, counts in CLUSTERS.items():
            self.assertEqual(len(before[name]), sum(counts.values()), name)
            self.assertTrue(all(s == "Running" for _, _, s in before[name].values()), before[name])

        # A backup begun after every node ran (its name is its start, in UTC
        # seconds), and enough backups for --backup-keep to have pruned one.
        def newer_backup():
            names = scheduled_backups(self.backup_dir)
            return names and stamp_epoch(names[-1]) > in_service and names

        hpodtest.wait_for(self, "a backup taken after the clusters were InService",
                          newer_backup, timeout=4 * INTERVAL_S,
                          detail=lambda: " (backups: %s)" % scheduled_backups(self.backup_dir))
        log = os.path.join(self.d.data_dir, "hpodd.log")
        hpodtest.wait_for(self, "a third backup",
                          lambda: read(log).count("backup: wrote") >= KEEP + 1,
                          timeout=4 * INTERVAL_S)

        # Also refused while hpodd serves: restoring over its data dir.
        p = self.hpodd("--data-dir", self.d.data_dir, "restore",
                       os.path.join(self.backup_dir, scheduled_backups(self.backup_dir)[-1]))
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"^hpodd: error: another hpodd \(pid \d+\) serves data dir ")

        # 1. Stop hpodd. The machines keep running.
        machines = machine_state(self.d)
        self.assertEqual(self.d.stop(), 0)
        self.assertEqual(machine_state(self.d), machines)
        names = scheduled_backups(self.backup_dir)
        self.assertEqual(len(names), KEEP, names)
        self.assertEqual(sorted(os.listdir(self.backup_dir)), names, "a .partial was left")
        for n in names:
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.backup_dir, n)).st_mode),
                             0o600, n)
        self.assertEqual(stat.S_IMODE(os.stat(self.backup_dir).st_mode), 0o700)
        text = read(log)
        self.assertRegex(text, r"backup: wrote %s/hpodd-\d{8}T\d{6}Z\.db \(\d+ bytes, \d+ ms\); "
                         r"deleted 1 older" % re.escape(self.backup_dir))
        self.assertNotIn("backup into", text)  # no failed run

        # 2. The data dir is lost; the newest backup goes into a fresh one.
        os.rename(self.d.data_dir, self.d.data_dir + ".lost")
        newest = os.path.join(self.backup_dir, names[-1])
        p = self.hpodd("--data-dir", self.d.data_dir, "restore", newest)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^Restored %s to %s/state\.db \(\d+ bytes, schema version \d+\)"
                         % (re.escape(newest), re.escape(self.d.data_dir)))
        self.assertEqual(
            stat.S_IMODE(os.stat(os.path.join(self.d.data_dir, "state.db")).st_mode), 0o600)
        # Nothing is overwritten, and only hpod stores are taken.
        p = self.hpodd("--data-dir", self.d.data_dir, "restore", newest)
        self.assertEqual(p.returncode, 1)
        self.assertIn("state.db exists; move the old store", p.stderr)
        other = os.path.join(self.d.root, "other")
        p = self.hpodd("--data-dir", other, "restore", newest + ".x")
        self.assertEqual(p.returncode, 1)
        self.assertIn("no backup at %s.x" % newest, p.stderr)
        self.assertFalse(os.path.exists(other), "a mistyped backup made a data dir")
        p = self.hpodd("--data-dir", other, "restore", os.path.join(self.d.data_dir + ".lost", "hpodd.log"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not an hpod store", p.stderr)

        # 3. Start hpodd on it: the same clusters, on the same machines.
        self.d.start()
        sm = self.d.boto3()
        for name in CLUSTERS:
            wait_cluster(sm, name, "InService", timeout=15)
        # The first reconcile of every cluster runs at start; a relaunch (100 ms
        # pending) would show within this wait.
        time.sleep(1.5)
        for name in CLUSTERS:
            self.assertEqual(self.nodes(sm, name), before[name], name)
        self.assertEqual(machine_state(self.d), machines, "a machine was launched or changed")

        # The restored hpodd owns them: deleting terminates exactly those.
        for name in CLUSTERS:
            sm.delete_cluster(ClusterName=name)
        for name in CLUSTERS:
            wait_cluster(sm, name, None, timeout=15)
        # (A terminated machine's file goes once hpodd has seen it gone.)
        after = machine_state(self.d)
        self.assertLessEqual(set(after), set(machines), "a machine was launched")
        self.assertTrue(all(a[3] >= 0 for a in after.values()), "a machine was not terminated")
        self.assertEqual(self.d.fake_nodes(), {})
        self.assertEqual(self.d.stop(), 0)
        print("drill took %.1f s" % (time.time() - started))


if __name__ == "__main__":
    hpodtest.main()
