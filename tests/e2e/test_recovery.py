"""Node recovery on real nodes, end to end: a Slurm cluster (1 controller + 3
workers) on namespaced nodes, one fault after another injected with
`hpod inject-fault`, each detected by the signal it should be, marked in Slurm as
HyperPod does, and recovered: a replaced node has a new instance id, the same
hostname and IP, re-ran its lifecycle script and is schedulable again; a rebooted
node keeps its instance id and disk. slurmctld is never restarted. Then a user's
own `scontrol update … reason="Action:Replace"` waits for a running job first,
the Batch APIs work, NodeRecovery=None only marks, and nothing is left behind
after the cluster is deleted. Needs root and Debian's slurm packages."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402
import test_slurm  # noqa: E402

ON_CREATE = r"""#!/bin/bash
set -euo pipefail
mkdir -p /fsx/runs
# One line per run of this script on a hostname: a replacement re-runs it.
echo run >> /fsx/runs/$(hostname)
touch /var/lib/hpod-agent/disk-marker
"""


class RecoveryTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurm packages are not installed")
        cls.d = nodestest.NodesDaemon("t5r", extra_args=["--node-disk-mb", "64"])
        try:
            cls.lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(cls.lcs, "on_create.sh"), ON_CREATE)
            cls.d.start()
            src = "file://" + cls.lcs + "/"
            groups = [
                nodestest.lcs_group("controller-machine", 1, src,
                                    SlurmConfig={"NodeType": "Controller"}),
                nodestest.lcs_group("workers", 3, src, SlurmConfig={"NodeType": "Compute"})]
            spec = os.path.join(cls.d.root, "cluster.json")
            with open(spec, "w") as f:
                json.dump(groups, f)
            cls.d.hpod("create-cluster", "--cluster-name", "rec", "--instance-groups",
                       "file://" + spec)
            cls.d.wait_status("rec", "InService", timeout=240)
            nodes = cls.d.nodes("rec")
            cls.controller = [n["InstanceId"] for n in nodes
                              if n["InstanceGroupName"] == "controller-machine"][0]
            arn = cls.d.hpod_json("describe-cluster", "--cluster-name", "rec")["ClusterArn"]
            cls.cluster_id = arn.split("/")[-1]
            cls.target = "sagemaker-cluster:%s_controller-machine-%s" % (cls.cluster_id,
                                                                         cls.controller)
            cls.slurmctld_pid = cls.ctld_pid()
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    # ---- helpers ----

    @classmethod
    def ctld_pid(cls):
        for pid, comm in test_slurm.descendants(cls.d.node_pid(cls.controller)):
            if comm == "slurmctld":
                return pid
        return None

    def on_controller(self, command, check=True):
        return self.d.session(self.target, command, check)

    def workers(self):
        """{instance id: node summary} of the worker group."""
        return {n["InstanceId"]: n for n in self.d.nodes("rec")
                if n["InstanceGroupName"] == "workers"}

    def recoveries(self, node_id=None):
        args = ["hpod-list-recoveries", "--cluster-name", "rec"]
        if node_id:
            args += ["--node-id", node_id]
        return self.d.hpod_json(*args)["Recoveries"]

    def before_fault(self):
        """What a fault's checks compare with: the recoveries that were already
        there, and each node's NodeLogicalId (a replacement keeps it)."""
        self.seen = {r["RecoveryId"] for r in self.recoveries()}
        self.logical_ids = {n["InstanceId"]: n["NodeLogicalId"] for n in self.d.hpod_json(
            "list-cluster-nodes", "--cluster-name", "rec", "--include-node-logical-ids")
            ["ClusterNodeSummaries"]}

    def inject(self, node_id, kind, *extra):
        # Recoveries from before the fault are not this fault's (a rebooted node
        # keeps its id).
        self.before_fault()
        t0 = time.time()
        self.d.hpod("inject-fault", "--cluster-name", "rec", "--node-id", node_id, "--kind",
                    kind, *extra)
        return t0

    def wait_recovery(self, node_id, timeout=120):
        """The one recovery of node_id as the failed node, once it finished."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            found = [r for r in self.recoveries(node_id)
                     if r["NodeId"] == node_id and r["RecoveryId"] not in self.seen]
            if found:
                last = found[-1]
                if last["Status"] != "InProgress":
                    self.assertEqual(last["Status"], "Succeeded", json.dumps(last, indent=1))
                    return last
            time.sleep(0.5)
        self.fail("no finished recovery of %s in %d s (last %s)\n%s" % (
            node_id, timeout, json.dumps(last, indent=1), self.d.log_tail()))

    def wait_all_running(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            nodes = self.d.nodes("rec")
            if len(nodes) == 4 and all(n["InstanceStatus"]["Status"] == "Running" for n in nodes):
                return {n["InstanceId"]: n for n in nodes}
            time.sleep(0.5)
        self.fail("the cluster's nodes never all ran again: %s" % self.d.nodes("rec"))

    def srun_works(self):
        out = self.on_controller("srun -N3 hostname")
        names = sorted(n["PrivateDnsHostname"].split(".")[0] for n in self.workers().values())
        self.assertEqual(sorted(out.split()), names)

    def ip_of(self, node_id):
        return self.d.hpod_json("describe-cluster-node", "--cluster-name", "rec", "--node-id",
                                node_id)["NodeDetails"]["PrivatePrimaryIp"]

    def runs_of(self, hostname):
        with open(os.path.join(self.d.fsx_root, self.cluster_id, "runs", hostname)) as f:
            return len(f.read().splitlines())

    def check_replaced(self, victim, rec, source):
        """The recovery replaced `victim` as HyperPod does, keeping name and address."""
        mine = [r for r in self.recoveries(victim["InstanceId"])
                if r["NodeId"] == victim["InstanceId"] and r["RecoveryId"] not in self.seen]
        self.assertEqual(len(mine), 1, json.dumps(mine, indent=1))  # recovered once
        self.assertEqual(rec["Action"], "Replace", json.dumps(rec, indent=1))
        self.assertEqual(rec["Source"], source, rec)
        steps = [s["Step"] for s in rec["Timeline"]]
        for step in ("Detected", "Marked", "Terminated", "Launched", "LifecycleDone",
                     "SlurmdRegistered", "Resumed"):
            self.assertIn(step, steps, rec)
        nodes = self.wait_all_running()
        self.assertNotIn(victim["InstanceId"], nodes)
        self.assertIn(rec["ReplacementNodeId"], nodes, json.dumps(rec, indent=1))
        new = nodes[rec["ReplacementNodeId"]]
        self.assertEqual(new["PrivateDnsHostname"], victim["PrivateDnsHostname"])
        self.assertEqual(self.ip_of(new["InstanceId"]), rec["PrivateIpAddress"])
        hostname = victim["PrivateDnsHostname"].split(".")[0]
        self.assertEqual(self.d.in_node(new["InstanceId"], "hostname").stdout.strip(), hostname)
        # The logical node survives its replacement (a new InstanceId, the same
        # NodeLogicalId), as on HyperPod.
        details = self.d.hpod_json("describe-cluster-node", "--cluster-name", "rec", "--node-id",
                                   new["InstanceId"])["NodeDetails"]
        self.assertEqual(details["NodeLogicalId"], self.logical_ids[victim["InstanceId"]])
        if os.environ.get("HPOD_E2E_AGENT_TRANSPORT") == "tls":
            self.check_host_retired(victim["InstanceId"], new["InstanceId"])
        self.assertGreaterEqual(self.runs_of(hostname), 2)  # the lifecycle script re-ran
        self.srun_works()
        self.assertEqual(self.ctld_pid(), self.slurmctld_pid)  # slurmctld never restarted
        table = self.d.hpod("describe-recovery", "--cluster-name", "rec", "--recovery-id",
                            rec["RecoveryId"], "--output", "table").stdout
        self.assertIn("SlurmdRegistered", table)
        print("\n" + table)
        return new

    def check_host_retired(self, old_id, new_id):
        """A local node over TLS joined as a host for its launch only: the host of
        the replaced instance is Retired with the reason, the replacement's serves."""
        hosts = self.d.hpod_json("list-hosts", "--pool", "nodes")["Hosts"]
        serving = [h for h in hosts if h.get("InstanceId") == new_id]
        self.assertEqual(len(serving), 1, json.dumps(hosts, indent=1))
        self.assertEqual(serving[0]["Status"], "Assigned")
        self.assertEqual(serving[0]["ClusterName"], "rec")
        gone = [h for h in hosts if h["Status"] == "Retired" and old_id in h.get("StatusReason", "")]
        self.assertEqual(len(gone), 1, json.dumps(hosts, indent=1))
        history = self.d.hpod_json("describe-host", "--host-id", gone[0]["HostId"])["History"]
        self.assertEqual(history[-1]["From"], "Assigned")
        self.assertEqual(history[-1]["InstanceId"], old_id)

    # ---- faults, one after another on a live cluster ----

    def test_1_kill_node_is_replaced_with_the_same_hostname(self):
        victim = list(self.workers().values())[0]
        t0 = self.inject(victim["InstanceId"], "kill-node")
        rec = self.wait_recovery(victim["InstanceId"])
        print("kill-node: recovered in %.1f s" % (time.time() - t0))
        self.check_replaced(victim, rec, "Instance")
        events = self.d.hpod_json("list-cluster-events", "--cluster-name", "rec",
                                  "--max-results", "100")["Events"]
        text = " ".join(e.get("Description", "") for e in events)
        self.assertIn("Fault injected", text)
        self.assertIn(rec["RecoveryId"], text)

    def test_2_hang_is_caught_by_heartbeats(self):
        victim = list(self.workers().values())[1]
        self.inject(victim["InstanceId"], "hang")
        rec = self.wait_recovery(victim["InstanceId"])
        self.check_replaced(victim, rec, "Heartbeat")

    def test_3_flag_file_means_replace(self):
        victim = list(self.workers().values())[2]
        self.inject(victim["InstanceId"], "flag-file")
        rec = self.wait_recovery(victim["InstanceId"])
        self.assertEqual(rec["Check"], "flag_file", json.dumps(rec, indent=1))
        self.check_replaced(victim, rec, "HealthCheck")

    def test_4_disk_full_means_replace_with_a_clean_disk(self):
        victim = list(self.workers().values())[0]
        self.inject(victim["InstanceId"], "disk-full")
        rec = self.wait_recovery(victim["InstanceId"])
        self.assertTrue(rec["Check"].startswith("disk:"), rec)
        new = self.check_replaced(victim, rec, "HealthCheck")
        df = self.d.in_node(new["InstanceId"], "df -k --output=avail /var/lib/hpod-agent | tail -1")
        self.assertGreater(int(df.stdout.split()[0]), 32 * 1024)  # a clean disk

    def test_5_gpu_xid_73_reboots_in_place(self):
        victim = list(self.workers().values())[1]
        self.inject(victim["InstanceId"], "gpu-xid", "--xid-code", "73")
        rec = self.wait_recovery(victim["InstanceId"])
        self.assertEqual(rec["Action"], "Reboot", json.dumps(rec, indent=1))
        self.assertEqual(rec["Check"], "kernel_log", rec)
        self.assertNotIn("ReplacementNodeId", rec)
        nodes = self.wait_all_running()
        self.assertIn(victim["InstanceId"], nodes)  # same instance id
        # The node's disk was kept.
        self.d.in_node(victim["InstanceId"], "test -e /var/lib/hpod-agent/disk-marker")
        self.srun_works()
        self.assertEqual(self.ctld_pid(), self.slurmctld_pid)

    def test_6_partition_is_replaced(self):
        victim = list(self.workers().values())[2]
        self.inject(victim["InstanceId"], "partition", "--seconds", "30")
        rec = self.wait_recovery(victim["InstanceId"])
        # Over the Unix socket the agent still reports, and its network check finds
        # the cut; an agent on the network (HPOD_E2E_AGENT_TRANSPORT=tls) goes
        # silent with the link, as a real machine's does.
        self.check_replaced(victim, rec, "Heartbeat" if self.d.agent_url else "HealthCheck")

    def test_7_kill_slurmd_is_restarted_in_place(self):
        victim = list(self.workers().values())[0]
        before = self.recoveries(victim["InstanceId"])
        slurmd = [p for p, c in test_slurm.descendants(self.d.node_pid(victim["InstanceId"]))
                  if c == "slurmd"]
        self.inject(victim["InstanceId"], "kill-slurmd")
        # The agent starts a new slurmd, which registers again: srun works again.
        deadline = time.time() + 60
        while True:
            again = [p for p, c in test_slurm.descendants(self.d.node_pid(victim["InstanceId"]))
                     if c == "slurmd"]
            out = self.on_controller("srun -N3 --immediate=5 hostname", check=False)
            if again and again != slurmd and len(out.split()) == 3:
                break
            self.assertLess(time.time(), deadline, "srun never worked again: %s" % out)
            time.sleep(1)
        self.srun_works()
        self.assertEqual(self.recoveries(victim["InstanceId"]), before)  # no recovery
        self.assertIn(victim["InstanceId"], self.workers())

    def test_8_user_action_replace_waits_for_the_running_job(self):
        victim = list(self.workers().values())[1]
        name = victim["PrivateDnsHostname"].split(".")[0]
        job = self.on_controller("sbatch --parsable -w %s --wrap 'sleep 8'" % name).strip()
        deadline = time.time() + 30
        while "RUNNING" not in self.on_controller("squeue -h -j %s -o %%T" % job):
            self.assertLess(time.time(), deadline, "the job never started")
            time.sleep(0.5)
        self.before_fault()
        self.on_controller("scontrol update node=%s state=fail reason=\"Action:Replace\"" % name)
        time.sleep(3)
        # The job keeps running on it; nothing was terminated yet.
        self.assertIn(victim["InstanceId"], self.workers())
        self.assertIn("RUNNING", self.on_controller("squeue -h -j %s -o %%T" % job))
        rec = self.wait_recovery(victim["InstanceId"])
        self.assertEqual(rec["Source"], "Slurm", rec)
        terminated = [s for s in rec["Timeline"] if s["Step"] == "Terminated"][0]["Time"]
        drained = [s for s in rec["Timeline"] if s["Step"] == "Drained"][0]
        self.assertIn("no jobs left", drained["Detail"])
        self.assertGreaterEqual(terminated, drained["Time"])
        # The job ended by itself before the node went: it was never killed.
        self.assertIn("JobState=COMPLETED", self.on_controller("scontrol show job %s" % job))
        self.check_replaced(victim, rec, "Slurm")

    def test_9_batch_apis_reboot_and_replace(self):
        workers = list(self.workers().values())
        self.seen = {r["RecoveryId"] for r in self.recoveries()}
        out = self.d.hpod_json("batch-reboot-cluster-nodes", "--cluster-name", "rec",
                               "--node-ids", workers[2]["InstanceId"])
        self.assertEqual(out.get("Failed", []), [], out)
        rec = self.wait_recovery(workers[2]["InstanceId"])
        self.assertEqual(rec["Action"], "Reboot")
        self.wait_all_running()
        refused = self.d.hpod_json("batch-replace-cluster-nodes", "--cluster-name", "rec",
                                   "--node-ids", self.controller)
        self.assertEqual(len(refused.get("Failed", [])), 1, refused)
        self.srun_works()

    def test_z_dead_controller_is_rebooted_keeping_its_state(self):
        """The controller cannot mark itself and is never replaced: it is rebooted
        with its disk (slurmctld's StateSaveLocation) and the cluster's munge key,
        so a job queued before the fault is still queued after it, and the workers,
        which all lose it at once, are not blamed."""
        job = self.on_controller("sbatch --parsable --begin=now+1hour --wrap 'true'").strip()
        submitted = time.time()
        # slurmctld saves its state in the background; what it had not saved when the
        # node died is lost, as with any kill -9 of slurmctld. Wait until a save that
        # began after the submission finished: job_state's mtime (whole seconds) past
        # submitted + 1 is one, as a save takes milliseconds. (Waiting only for an mtime
        # past the submission's second raced a save that began before it: the job was
        # then lost by slurmctld, not by hpod.) Changing the job makes slurmctld save
        # again after that second.
        time.sleep(1.2)
        self.on_controller("scontrol update jobid=%s comment=hpod-state-saved" % job)
        deadline = time.time() + 30
        while int(self.d.in_node(self.controller, "stat -c %Y /var/spool/slurmctld/job_state"
                                 ).stdout.strip() or 0) <= int(submitted) + 1:
            self.assertLess(time.time(), deadline, "slurmctld never saved its job state")
            time.sleep(0.5)
        key = self.d.in_node(self.controller, "md5sum /var/lib/hpod-agent/munge/munge.key")
        before = set(self.workers())
        self.inject(self.controller, "kill-node")
        rec = self.wait_recovery(self.controller)
        self.assertEqual(rec["Action"], "Reboot", json.dumps(rec, indent=1))
        self.assertNotIn("ReplacementNodeId", rec)
        self.wait_all_running()
        self.assertEqual(set(self.workers()), before)  # no worker was recovered
        self.assertEqual(self.d.in_node(self.controller,
                                        "md5sum /var/lib/hpod-agent/munge/munge.key").stdout,
                         key.stdout)
        deadline = time.time() + 60
        while True:
            p = self.d.hpod("start-session", "--target", self.target, "--command",
                            "squeue -h -j %s -o %%T" % job, check=False)
            if p.returncode == 0 and "PENDING" in p.stdout:
                break
            self.assertLess(time.time(), deadline, "slurmctld lost job %s: %s %s" % (
                job, p.stdout, p.stderr))
            time.sleep(1)
        # The workers' slurmds answer the restarted slurmctld's first ping.
        t0 = time.time()
        while True:
            states = self.on_controller("sinfo -h -N -o %T").split()
            if states and all(st == "idle" for st in states):
                break
            self.assertLess(time.time(), t0 + 90, "workers never idle again: %s" % states)
            time.sleep(1)
        print("controller reboot: workers idle again %.1f s after its slurmctld answered"
              % (time.time() - t0))
        self.srun_works()
        self.on_controller("scancel %s" % job)
        type(self).slurmctld_pid = self.ctld_pid()


class RecoveryGpuTest(unittest.TestCase):
    """A GPU node's faults through hpod's fake NVML (chosen by hpodd
    --fake-nvml-library): an uncorrected ECC error seen by the agent's NVML check
    replaces the node; an Xid injected through both paths does too."""

    def test_fake_nvml_faults_replace_the_gpu_node(self):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurm packages are not installed")
        lib = os.path.join(nodestest.hpodtest.BIN_DIR, "src", "agent", "libhpod_fake_nvml.so")
        if not os.path.exists(lib):
            raise unittest.SkipTest("%s not built" % lib)
        d = nodestest.NodesDaemon("t5g", extra_args=["--fake-nvml-library", lib])
        self.addCleanup(d.cleanup)
        lcs = os.path.join(d.root, "lcs")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
        d.start()
        src = "file://" + lcs + "/"
        spec = os.path.join(d.root, "c.json")
        with open(spec, "w") as f:
            json.dump([nodestest.lcs_group("ctl", 1, src, SlurmConfig={"NodeType": "Controller"}),
                       nodestest.lcs_group("gpu", 1, src, instance_type="ml.g5.xlarge",
                                           SlurmConfig={"NodeType": "Compute"})], f)
        d.hpod("create-cluster", "--cluster-name", "g", "--instance-groups", "file://" + spec)
        d.wait_status("g", "InService", timeout=240)

        def gpu_node():
            return [n for n in d.nodes("g") if n["InstanceGroupName"] == "gpu"][0]

        def wait(node_id):
            deadline = time.time() + 90
            while time.time() < deadline:
                found = [r for r in d.hpod_json("hpod-list-recoveries", "--cluster-name", "g")
                         ["Recoveries"] if r["NodeId"] == node_id]
                if found and found[-1]["Status"] != "InProgress":
                    return found[-1]
                time.sleep(0.5)
            self.fail("no recovery of %s\n%s" % (node_id, d.log_tail()))

        # An uncorrected ECC error on GPU 0, written into the fake's script (which it
        # re-reads on every call): only the NVML path sees it.
        victim = gpu_node()["InstanceId"]
        script = os.path.join(d.data_dir, "local", "nodes", victim, "disk", "state",
                              "fake-nvml.json")
        with open(script + ".new", "w") as f:
            json.dump({"devices": 1, "ecc_uncorrected": {"0": 2}}, f)
        os.rename(script + ".new", script)
        rec = wait(victim)
        self.assertEqual((rec["Status"], rec["Action"], rec["Check"]),
                         ("Succeeded", "Replace", "gpu"), json.dumps(rec, indent=1))
        # The replacement starts with healthy GPUs; an Xid 79 (fallen off the bus),
        # injected in its kernel log and its NVML, replaces it again.
        deadline = time.time() + 60
        while gpu_node()["InstanceId"] == victim or \
                gpu_node()["InstanceStatus"]["Status"] != "Running":
            self.assertLess(time.time(), deadline, d.nodes("g"))
            time.sleep(0.5)
        second = gpu_node()["InstanceId"]
        d.hpod("inject-fault", "--cluster-name", "g", "--node-id", second, "--kind", "gpu-xid",
               "--xid-code", "79")
        rec = wait(second)
        self.assertEqual((rec["Status"], rec["Action"]), ("Succeeded", "Replace"), rec)
        self.assertIn(rec["Check"], ("gpu", "kernel_log"), rec)
        self.assertIn("79", rec["Reason"])


class RecoveryNoneTest(unittest.TestCase):
    def test_node_recovery_none_only_marks_and_delete_leaves_nothing(self):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurm packages are not installed")
        d = nodestest.NodesDaemon("t5n")
        self.addCleanup(d.cleanup)
        lcs = os.path.join(d.root, "lcs")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
        d.start()
        src = "file://" + lcs + "/"
        spec = os.path.join(d.root, "c.json")
        with open(spec, "w") as f:
            json.dump([nodestest.lcs_group("ctl", 1, src, SlurmConfig={"NodeType": "Controller"}),
                       nodestest.lcs_group("w", 2, src, SlurmConfig={"NodeType": "Compute"})], f)
        d.hpod("create-cluster", "--cluster-name", "none", "--instance-groups", "file://" + spec,
               "--node-recovery", "None")
        d.wait_status("none", "InService", timeout=240)
        victim = [n for n in d.nodes("none") if n["InstanceGroupName"] == "w"][0]
        d.hpod("inject-fault", "--cluster-name", "none", "--node-id", victim["InstanceId"],
               "--kind", "kill-node")
        deadline = time.time() + 60
        rec = None
        while time.time() < deadline:
            found = d.hpod_json("hpod-list-recoveries", "--cluster-name", "none")["Recoveries"]
            if found and found[0]["Status"] != "InProgress":
                rec = found[0]
                break
            time.sleep(0.5)
        self.assertIsNotNone(rec, d.log_tail())
        self.assertEqual(rec["Status"], "Reported", rec)
        self.assertFalse(rec["Automatic"])
        time.sleep(3)
        ids = [n["InstanceId"] for n in d.nodes("none")]
        self.assertIn(victim["InstanceId"], ids)  # not replaced
        status = {n["InstanceId"]: n["InstanceStatus"]["Status"] for n in d.nodes("none")}
        self.assertEqual(status[victim["InstanceId"]], "Failure")
        d.hpod("delete-cluster", "--cluster-name", "none")
        d.wait_status("none", None, timeout=120)
        self.assertEqual(d.leftovers(), [])


if __name__ == "__main__":
    unittest.main()
