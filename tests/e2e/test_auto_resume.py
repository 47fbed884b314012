"""Auto-resume end to end: the seed's `sbatch --nodes 3 --auto-resume=1 run.slurm
./llama_tiny.sh` on a namespaced Slurm cluster (1 controller + 3 workers) trains
hpod-train across the workers; a fault in the middle of the run (kill-node, hang,
partition, a user's `scontrol update ... reason=Action:Replace`, the batch host
killed) is recovered by hpod, the step re-runs in the same allocation (or, for the
batch host, Slurm requeues the job), hpod-train resumes from its newest checkpoint
and the job ends with the same final loss as an undisturbed run, bit for bit. The
same job without --auto-resume fails. Needs root and Debian's slurm packages."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402

# Long enough that a fault injected just after step SAVE_INTERVAL + 5 lands before
# the job ends: at 120 steps a run at 30-35 it/s (an idle 2-core machine) ended
# 3 s after that step, before a Replace had terminated the node, and the test
# failed for the race, not for hpod. 360 steps leave 10 s or more.
STEPS = 360
SAVE_INTERVAL = 20
# test_4's attempt 0 stops at this checkpoint and waits for the test (GATED_TRAIN).
GATE_STEP = 2 * SAVE_INTERVAL
GATED_TRAIN = """#!/bin/bash
# Attempt 0 of the job's first run trains to step %d (a checkpoint), says so,
# and waits while the gate (/fsx/ar/$GATE.gate, default user) exists; any later
# attempt, or the job requeued, trains on from its checkpoint as usual.
set -euo pipefail
gate=/fsx/ar/${GATE:-user}
if [ "${HPOD_AUTO_RESUME_ATTEMPT:-0}" = 0 ] && [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = --max-steps ]; then args+=(--max-steps %d); shift 2; else args+=("$1"); shift; fi
  done
  /fsx/bin/hpod-train "${args[@]}"
  touch "$gate.at-gate.$SLURM_PROCID"
  while [ -e "$gate.gate" ]; do sleep 0.2; done
  exit 0
fi
exec /fsx/bin/hpod-train "$@"
""" % (GATE_STEP, GATE_STEP)
# test_9's Python: attempt 0 trains to GATE_STEP (a snapshot) and waits while the
# gate exists; a retry trains on from the snapshot.
GATED_PYTHON = """#!/bin/bash
set -euo pipefail
if [ "${HPOD_AUTO_RESUME_ATTEMPT:-0}" = 0 ]; then
  /usr/bin/python3 "$@" --steps %d
  touch "/fsx/pt/at-gate.$SLURM_PROCID"
  while [ -e /fsx/pt/gate ]; do sleep 0.2; done
  exit 0
fi
exec /usr/bin/python3 "$@"
""" % GATE_STEP
PLUGIN = os.path.join(nodestest.hpodtest.BIN_DIR, "src", "slurm", "spank", "spank_hpod.so")


class AutoResumeTest(unittest.TestCase):
    d = None
    # test_nodes_tls.py runs some of these tests again with the agents on TLS.
    PREFIX = "t5a"
    HPODD_ARGS = ()
    WORKER_GROUPS = (("workers", 3),)  # (group, count): the jobs' 3 workers
    EXTRA_GROUPS = ()  # (group, count, SlurmConfig) the jobs do not use

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurm packages are not installed")
        if not os.path.exists(PLUGIN):
            raise unittest.SkipTest("spank_hpod.so is not built")
        cls.d = nodestest.NodesDaemon(cls.PREFIX, extra_args=cls.HPODD_ARGS)
        try:
            # Where test_8 stages a new release (hpodd --node-software): a copy of
            # the build's hpod-agent the nodes get until then.
            cls.software = os.path.join(cls.d.root, "software")
            os.makedirs(cls.software)
            shutil.copy(os.path.join(nodestest.hpodtest.BIN_DIR, "cmd", "hpod-agent",
                                     "hpod-agent"), cls.software)
            cls.d.extra_args += ["--node-software", cls.software]
            lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
            cls.d.start()
            src = "file://" + lcs + "/"
            spec = os.path.join(cls.d.root, "cluster.json")
            with open(spec, "w") as f:
                json.dump([nodestest.lcs_group("controller-machine", 1, src,
                                               SlurmConfig={"NodeType": "Controller"})] +
                          [nodestest.lcs_group(g, count, src, SlurmConfig={"NodeType": "Compute"})
                           for g, count in cls.WORKER_GROUPS] +
                          [nodestest.lcs_group(g, count, src, SlurmConfig=slurm)
                           for g, count, slurm in cls.EXTRA_GROUPS], f)
            cls.d.hpod("create-cluster", "--cluster-name", "ar", "--instance-groups",
                       "file://" + spec)
            cls.d.wait_status("ar", "InService", timeout=240)
            nodes = cls.d.nodes("ar")
            cls.controller = [n["InstanceId"] for n in nodes
                              if n["InstanceGroupName"] == "controller-machine"][0]
            cid = cls.d.hpod_json("describe-cluster", "--cluster-name", "ar")["ClusterArn"]
            cls.target = "sagemaker-cluster:%s_controller-machine-%s" % (
                cid.split("/")[-1], cls.controller)
            cls.prepare_fsx()
            cls.reference = None
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    # ---- helpers ----

    @classmethod
    def on_controller(cls, command, check=True):
        return cls.d.session(cls.target, command, check)

    @classmethod
    def prepare_fsx(cls):
        """The example scripts, hpod-train and the tokenized KJV sample on /fsx."""
        cls.on_controller("mkdir -p /fsx/ar /fsx/data /fsx/bin && touch /fsx/ar/.here")
        fsx = [root for root, _, files in os.walk(cls.d.fsx_root) if ".here" in files]
        cls.fsx = os.path.dirname(fsx[0])
        top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        for name in ("run.slurm", "llama_tiny.sh"):
            shutil.copy(os.path.join(top, "examples", "slurm", name), os.path.join(cls.fsx, "ar"))
        nodestest.write_script(os.path.join(cls.fsx, "ar", "gated.sh"), GATED_TRAIN)
        nodestest.training_fsx(cls.fsx, cls.on_controller)

    def submit(self, name, auto_resume=True, steps=STEPS, train="/fsx/bin/hpod-train", env=""):
        """sbatch of the seed's form (--auto-resume=1, or N); returns the job id."""
        out = self.on_controller(
            "cd /fsx/ar && " + env + "HPOD_TRAIN=" + train + " MAX_STEPS=%d "
            "RUN_DIR=/fsx/runs/%s sbatch --nodes 3 %s--output=/fsx/ar/%s.out run.slurm "
            "./llama_tiny.sh --save-interval %d --lr-decay-steps %d" % (
                steps, name, "--auto-resume=%d " % auto_resume if auto_resume else "", name,
                SAVE_INTERVAL, steps))
        self.assertRegex(out, r"Submitted batch job \d+")
        return out.split()[-1]

    def host_file(self, path):
        return os.path.join(self.fsx, path.replace("/fsx/", "", 1))

    def read(self, path):
        try:
            with open(self.host_file(path)) as f:
                return f.read()
        except OSError:
            return ""

    def ledger(self, job, name=None):
        """hpod-train's goodput ledger: the job's own under --auto-resume (the
        supervisor names it), else the one in the run's checkpoint directory."""
        text = self.read("/fsx/ar/.hpod/goodput-%s.jsonl" % job)
        if not text and name:
            text = self.read("/fsx/runs/%s/checkpoints/goodput.jsonl" % name)
        return [json.loads(l) for l in text.splitlines() if l.strip().endswith("}")]

    def wait_step(self, job, step, name=None, timeout=120):
        """Until the job's ledger shows `step` (training is under way past a checkpoint)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            steps = [e["step"] for e in self.ledger(job, name) if e.get("event") == "step"]
            if steps and steps[-1] >= step:
                return
            time.sleep(0.2)
        self.fail("job %s never reached step %d\n%s" % (job, step, self.d.log_tail()))

    def wait_done(self, job, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.on_controller("squeue -h -j %s -o %%T" % job, check=False).strip():
                return
            time.sleep(0.5)
        self.fail("job %s still queued or running after %d s\n%s" % (
            job, timeout, self.read("/fsx/ar/%s.out" % job)))

    def job_state(self, job):
        out = self.on_controller("scontrol show job %s" % job, check=False)
        m = re.search(r"JobState=(\S+)", out)
        return m.group(1) if m else out

    def workers(self):
        return {n["InstanceId"]: n for n in self.d.nodes("ar")
                if n["InstanceGroupName"] in dict(self.WORKER_GROUPS)}

    def batch_host(self, job):
        out = self.on_controller("scontrol show job %s" % job)
        return re.search(r"BatchHost=(\S+)", out).group(1)

    def victim(self, job, batch=False):
        """(instance id, hostname) of a worker of the job: its batch host or another."""
        host = self.batch_host(job)
        for iid in sorted(self.workers()):
            name = self.hostname(iid)
            if (name == host) == batch:
                return iid, name
        self.fail("no victim among %s" % self.workers())

    def hostname(self, iid):
        return self.d.in_node(iid, "hostname").stdout.strip()

    def summary(self, name):
        return json.loads(self.read("/fsx/runs/%s/summary.json" % name) or "{}")

    def reference_loss(self):
        if type(self).reference is None:
            job = self.submit("reference")
            type(self).reference_job = job
            self.wait_done(job)
            log = self.read("/fsx/ar/reference.out")
            self.assertEqual(self.job_state(job), "COMPLETED", log)
            self.assertNotIn("Retrying step", log)
            type(self).reference = self.summary("reference")["final_loss"]
        return type(self).reference

    def assert_resumed(self, name, job, host, fault_kind):
        """The job completed after one retry on the replaced node and ends where an
        undisturbed run ends."""
        self.wait_done(job)
        log = self.read("/fsx/ar/%s.out" % name)
        self.assertEqual(self.job_state(job), "COMPLETED", log + self.d.log_tail())
        self.assertRegex(log, r"\[Auto Resume\] Info: JobID: %s StepID: \d+ Retrying step\. "
                              r"Attempt number: 1" % job, log)
        self.assertIn("ResumeAction=RETRYSTEP", log)
        starts = [e for e in self.ledger(job) if e["event"] == "start"]
        self.assertGreaterEqual(len(starts), 2, starts)
        self.assertGreaterEqual(starts[-1]["resumed_step"], SAVE_INTERVAL, starts)
        self.assertEqual(starts[-1]["attempt"], 1, "HPOD_AUTO_RESUME_ATTEMPT reached the ranks")
        self.assertEqual(self.summary(name)["final_loss"], self.reference_loss(),
                         "%s: the resumed run must end where an undisturbed one ends" % fault_kind)
        self.assertIn(host, self.on_controller("sinfo -h -N -o '%N %T'"))
        return log

    # ---- tests ----

    def test_1_undisturbed_job_is_supervised_and_not_retried(self):
        self.reference_loss()
        log = self.read("/fsx/ar/reference.out")
        self.assertIn("process_task_init", log)  # slurmstepd loaded the plugin
        # ... and srun on the batch host (a configless worker) became the supervisor.
        self.assertIn("Response from cluster agent: JobId=%s, ResumeAction=NONE" %
                      self.reference_job, log)
        self.assertIn("hpod-train: 3 ranks", log)

    def test_2_kill_node_replaces_it_and_the_step_resumes(self):
        self.reference_loss()
        job = self.submit("kill")
        self.wait_step(job, SAVE_INTERVAL + 5)
        iid, host = self.victim(job)
        self.d.hpod("inject-fault", "--cluster-name", "ar", "--node-id", iid, "--kind",
                    "kill-node")
        log = self.assert_resumed("kill", job, host, "kill-node")
        self.assertNotIn(iid, self.workers(), "the killed node was replaced")
        self.assertIn(host, [self.hostname(i) for i in self.workers()])
        # hpodd's record of the job joins the recovery.
        g = self.d.hpod_json("describe-job-goodput", "--cluster-name", "ar", "--job-id", job)
        print("\n" + self.d.hpod("describe-job-goodput", "--cluster-name", "ar", "--job-id", job,
                                 "--output", "table").stdout)
        self.assertEqual(len(g["Failures"]), 1, g)
        self.assertEqual(g["Failures"][0]["Hostname"], host)
        self.assertEqual(g["Failures"][0]["Status"], "Succeeded")
        self.assertEqual(len(g["Goodput"]["attempts"]), 2, g)
        self.assertGreaterEqual(g["Failures"][0]["StepsRerun"], 0)
        self.assertGreater(g["Goodput"]["goodput"], 0)
        self.assertEqual(g["Goodput"]["final_step"], STEPS)
        del log

    def test_3_hang_and_partition_are_recovered_the_same_way(self):
        self.reference_loss()
        for kind, extra in (("hang", []), ("partition", ["--seconds", "60"])):
            job = self.submit(kind)
            self.wait_step(job, SAVE_INTERVAL + 5)
            iid, host = self.victim(job)
            self.d.hpod("inject-fault", "--cluster-name", "ar", "--node-id", iid, "--kind", kind,
                        *extra)
            self.assert_resumed(kind, job, host, kind)

    def test_4_a_users_action_replace_during_the_job(self):
        """The user's mark lands while the step provably runs: attempt 0 trains to
        GATE_STEP (a checkpoint), then every rank waits while the gate file exists.
        Only the retry (attempt 1) trains on, so the job cannot end before the mark,
        however fast it trains; the gate is lifted only once the retry is in the
        job's log, or after a deadline so a missing retry fails by assertion."""
        self.reference_loss()
        gate = "/fsx/ar/user.gate"
        with open(self.host_file(gate), "w"):
            pass
        job = self.submit("user", train="/fsx/ar/gated.sh")
        try:
            nodestest.wait_for_files(self.host_file("/fsx/ar"), "user.at-gate.", 3)
            self.assertEqual(self.job_state(job), "RUNNING", self.read("/fsx/ar/user.out"))
            iid, host = self.victim(job)
            self.on_controller(
                'scontrol update nodename=%s state=fail reason="Action:Replace"' % host)
            deadline = time.time() + 120
            while time.time() < deadline and "Attempt number: 1" not in self.read(
                    "/fsx/ar/user.out"):
                time.sleep(0.5)
        finally:
            os.unlink(self.host_file(gate))
        log = self.assert_resumed("user", job, host, "Action:Replace")
        self.assertNotIn(iid, self.workers())
        starts = [e for e in self.ledger(job) if e["event"] == "start"]
        self.assertEqual(starts[-1]["resumed_step"], GATE_STEP, starts)
        del log

    def test_5_batch_host_killed_requeues_and_resumes(self):
        self.reference_loss()
        job = self.submit("batch")
        self.wait_step(job, SAVE_INTERVAL + 5)
        iid, host = self.victim(job, batch=True)
        self.d.hpod("inject-fault", "--cluster-name", "ar", "--node-id", iid, "--kind",
                    "kill-node")
        self.wait_done(job, timeout=400)
        log = self.read("/fsx/ar/batch.out")
        self.assertEqual(self.job_state(job), "COMPLETED", log + self.d.log_tail())
        self.assertIn("(restart 1)", log, "Slurm requeued the job")
        starts = [e for e in self.ledger(job) if e["event"] == "start"]
        self.assertEqual(starts[-1]["restart"], 1, starts)
        self.assertGreaterEqual(starts[-1]["resumed_step"], SAVE_INTERVAL, starts)
        self.assertEqual(self.summary("batch")["final_loss"], self.reference_loss())

    def test_6_without_auto_resume_the_job_fails(self):
        job = self.submit("plain", auto_resume=False)
        self.wait_step(job, SAVE_INTERVAL + 5, name="plain")
        iid, host = self.victim(job)
        self.d.hpod("inject-fault", "--cluster-name", "ar", "--node-id", iid, "--kind",
                    "kill-node")
        self.wait_done(job)
        log = self.read("/fsx/ar/plain.out")
        self.assertIn(self.job_state(job), ("FAILED", "CANCELLED", "NODE_FAIL"), log)
        self.assertNotIn("Retrying step", log)
        self.assertNotIn("process_task_init", log)

    def test_8_a_rolling_software_update_keeps_the_job_running(self):
        """UpdateClusterSoftware with the aws CLI, one worker per batch, while a
        3-node --auto-resume job runs: attempt 0 holds at its step-40 checkpoint
        (test_4's gate) until the first batch's replacement made it retry, so the
        update provably lands in the job; every worker comes back under its
        hostname running the new hpod-agent, and the job ends with the loss of an
        undisturbed run. Later batches may land in the job or after it: either
        way it completes (--auto-resume=3 covers one retry per worker)."""
        self.reference_loss()
        view = self.d.hpod_json("describe-cluster", "--cluster-name", "ar")
        groups = {g["InstanceGroupName"]: g for g in view["InstanceGroups"]}
        old_image = groups["workers"]["CurrentImageId"]
        self.assertEqual(groups["workers"]["ImageVersionStatus"], "UpToDate")
        hostnames = sorted(self.hostname(i) for i in self.workers())
        # A new release staged beside hpodd: the agent with bytes appended (an ELF
        # runs as before), renamed into place as an upgrade does.
        agent = os.path.join(self.software, "hpod-agent")
        with open(agent, "rb") as f:
            release = f.read() + b"\0hpod e2e release 2\n"
        with open(agent + ".new", "wb") as f:
            f.write(release)
        os.chmod(agent + ".new", 0o755)
        os.rename(agent + ".new", agent)
        digest = hashlib.sha256(release).hexdigest()
        view = self.d.hpod_json("describe-cluster", "--cluster-name", "ar")
        self.assertEqual({g["InstanceGroupName"]: g["ImageVersionStatus"]
                          for g in view["InstanceGroups"]
                          if g["InstanceGroupName"] in ("controller-machine", "workers")},
                         {"controller-machine": "UpdateAvailable", "workers": "UpdateAvailable"})

        gate = self.host_file("/fsx/ar/update.gate")
        open(gate, "w").close()
        job = self.submit("update", auto_resume=3, train="/fsx/ar/gated.sh", env="GATE=update ")
        try:
            nodestest.wait_for_files(self.host_file("/fsx/ar"), "update.at-gate.", 3)
            self.assertEqual(self.job_state(job), "RUNNING", self.read("/fsx/ar/update.out"))
            p = subprocess.run(
                ["aws", "--endpoint-url", self.d.endpoint, "--region", nodestest.hpodtest.REGION,
                 "sagemaker", "update-cluster-software", "--cluster-name", "ar",
                 "--instance-groups", "InstanceGroupName=workers",
                 "--deployment-config", json.dumps({"RollingUpdatePolicy": {
                     "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1}}})],
                capture_output=True, text=True, env=self.d.env(), timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout)["ClusterArn"], view["ClusterArn"])
            self.assertEqual(self.d.hpod_json("describe-cluster", "--cluster-name", "ar")[
                "ClusterStatus"], "SystemUpdating")
            # The first batch's node ends attempt 0: a step retry, or a requeue
            # when it was the batch host (as a killed batch host does, test_5).
            deadline = time.time() + 120
            while time.time() < deadline and not re.search(
                    r"Attempt number: 1|Job failed - replacing nodes",
                    self.read("/fsx/ar/update.out")):
                time.sleep(0.5)
        finally:
            os.unlink(gate)
        self.wait_done(job, timeout=400)
        deadline = time.time() + 300
        while time.time() < deadline:
            view = self.d.hpod_json("describe-cluster", "--cluster-name", "ar")
            if view["HpodSoftwareUpdate"]["Status"] != "InProgress":
                break
            time.sleep(1)
        update = view["HpodSoftwareUpdate"]
        print("\nsoftware update %s, %s to %s: %s" % (
            update["Status"], update["StartTime"], update.get("EndTime"), update["Message"]))
        self.assertEqual(update["Status"], "Succeeded", json.dumps(update) + self.d.log_tail())
        self.assertEqual(update["Batches"], 3)
        self.assertEqual(view["ClusterStatus"], "InService")
        log = self.read("/fsx/ar/update.out")
        self.assertEqual(self.job_state(job), "COMPLETED", log + self.d.log_tail())
        self.assertRegex(log, r"Retrying step\. Attempt number: 1|\(restart 1\)",
                         "the update ended attempt 0 at its gate")
        starts = [e for e in self.ledger(job) if e["event"] == "start"]
        self.assertGreaterEqual(len(starts), 2, starts)
        self.assertGreaterEqual(starts[-1]["resumed_step"], GATE_STEP, starts)
        self.assertEqual(self.summary("update")["final_loss"], self.reference_loss(),
                         "the job under the update must end where an undisturbed one ends")
        groups = {g["InstanceGroupName"]: g for g in view["InstanceGroups"]}
        new_image = groups["workers"]["CurrentImageId"]
        self.assertNotEqual(new_image, old_image)
        self.assertEqual(groups["workers"]["ImageVersionStatus"], "UpToDate")
        self.assertEqual(groups["workers"]["SoftwareUpdateStatus"], "Succeeded")
        self.assertEqual(groups["controller-machine"]["CurrentImageId"], old_image,
                         "the controller was not in InstanceGroups")
        self.assertEqual(sorted(self.hostname(i) for i in self.workers()), hostnames)
        # Then the rest, with hpod's CLI: only the controller is behind, and it is
        # rebooted into the new software (never replaced), keeping its instance.
        self.d.hpod("update-cluster-software", "--cluster-name", "ar")
        self.d.hpod("wait", "cluster-in-service", "--cluster-name", "ar", "--timeout", "300")
        view = self.d.hpod_json("describe-cluster", "--cluster-name", "ar")
        self.assertEqual(view["HpodSoftwareUpdate"]["Status"], "Succeeded",
                         json.dumps(view["HpodSoftwareUpdate"]) + self.d.log_tail())
        self.assertEqual(view["HpodSoftwareUpdate"]["Batches"], 1)
        self.assertEqual({g["InstanceGroupName"]: g["CurrentImageId"]
                          for g in view["InstanceGroups"]
                          if g["InstanceGroupName"] in ("controller-machine", "workers")},
                         {"controller-machine": new_image, "workers": new_image})
        self.assertIn(self.controller, [n["InstanceId"] for n in self.d.nodes("ar")])
        for iid in list(self.workers()) + [self.controller]:
            node = self.d.hpod_json("describe-cluster-node", "--cluster-name", "ar",
                                    "--node-id", iid)["NodeDetails"]
            self.assertEqual(node["HpodSoftware"]["hpod-agent"], digest,
                             "the agent on %s runs the new release" % iid)
            self.assertEqual(node["CurrentImageId"], new_image)
            self.assertEqual(node["ImageVersionStatus"], "UpToDate")
            self.assertIn("LastSoftwareUpdateTime", node)
            self.assertEqual(node["InstanceStatus"]["Status"], "Running")
        self.wait_for_sinfo(hostnames)
        self.assertIn("ok", self.on_controller("srun -N3 echo ok"))

    def wait_for_sinfo(self, hostnames, timeout=90):
        """Until every one of `hostnames` is idle in Slurm and answers slurmctld
        (%t marks a node it has not heard from since it started with `*`): after
        the controller's reboot, its slurmctld pings the workers first."""
        deadline = time.time() + timeout
        while True:
            sinfo = self.on_controller("sinfo -h -N -o '%N %t'", check=False)
            if all(re.search(re.escape(h) + r" idle$", sinfo, re.M) for h in hostnames):
                return
            if time.time() > deadline:
                self.fail("not all of %s serve in Slurm:\n%s" % (hostnames, sinfo))
            time.sleep(1)

    def test_9_a_pytorch_ddp_job_resumes_from_its_snapshot(self):
        """examples/pytorch as users bring it: DDP over gloo on the three workers,
        killed mid-run (after its step-40 snapshot, held there by a gate as in
        test_4), resumed by --auto-resume from the snapshot to the loss of an
        undisturbed run; its hpod_goodput ledger feeds describe-job-goodput."""
        torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True)
        if torch.returncode != 0:
            self.skipTest("python3-torch is not installed (scripts/install-deps.sh --bench)")
        top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        pt = os.path.join(self.fsx, "pt")
        os.makedirs(pt, exist_ok=True)
        for f in ("train_ddp.py", "run.sbatch"):
            shutil.copy(os.path.join(top, "examples", "pytorch", f), pt)
        shutil.copy(os.path.join(top, "python", "hpod_goodput.py"), pt)
        nodestest.write_script(os.path.join(pt, "gated-python.sh"), GATED_PYTHON)

        def submit(name, python):
            out = self.on_controller(
                "cd /fsx/pt && PYTHON=%s STEPS=120 CKPT_DIR=/fsx/pt/%s sbatch --nodes 3 "
                "--auto-resume=1 --output=/fsx/pt/%s.out run.sbatch --data "
                "/fsx/data/corpus.txt" % (python, name, name))
            return out.split()[-1]

        def final_loss(name):
            m = re.search(r"final_loss=(\S+) step=120", self.read("/fsx/pt/%s.out" % name))
            self.assertIsNotNone(m, self.read("/fsx/pt/%s.out" % name))
            return m.group(1)

        ref = submit("ref", "/usr/bin/python3")
        self.wait_done(ref)
        self.assertEqual(self.job_state(ref), "COMPLETED", self.read("/fsx/pt/ref.out"))
        gate = os.path.join(pt, "gate")
        open(gate, "w").close()
        job = submit("kill", "/fsx/pt/gated-python.sh")
        try:
            nodestest.wait_for_files(pt, "at-gate.", 3, timeout=180)
            self.assertEqual(self.job_state(job), "RUNNING", self.read("/fsx/pt/kill.out"))
            iid, host = self.victim(job)
            self.d.hpod("inject-fault", "--cluster-name", "ar", "--node-id", iid, "--kind",
                        "kill-node")
            deadline = time.time() + 120
            while time.time() < deadline and "Attempt number: 1" not in self.read(
                    "/fsx/pt/kill.out"):
                time.sleep(0.5)
        finally:
            os.unlink(gate)
        self.wait_done(job)
        log = self.read("/fsx/pt/kill.out")
        self.assertEqual(self.job_state(job), "COMPLETED", log + self.d.log_tail())
        self.assertIn("Retrying step. Attempt number: 1", log)
        self.assertIn("resumed from step-40.pt", log)
        self.assertEqual(final_loss("kill"), final_loss("ref"),
                         "the resumed DDP run must end where an undisturbed one ends")
        g = self.d.hpod_json("describe-job-goodput", "--cluster-name", "ar", "--job-id", job)
        self.assertEqual(g["Goodput"]["final_step"], 120, g)
        self.assertEqual(len(g["Failures"]), 1, g)
        self.assertEqual(g["Failures"][0]["Hostname"], host)
        self.assertGreater(g["Failures"][0]["RestartSeconds"], 0, g)
        self.assertEqual(g["Failures"][0]["StepsRerun"], 0, g)

    def test_7_bad_option_values_are_one_line_errors(self):
        for bad in ("abc", "-1"):
            p = self.d.hpod("start-session", "--target", self.target, "--command",
                            "srun --auto-resume=%s -N1 true" % bad, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("[Auto Resume] Error: --auto-resume=%s" % bad, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
