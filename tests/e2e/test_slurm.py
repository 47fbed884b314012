"""Slurm on real nodes, end to end: hpodd creates a controller and three workers,
the agents start munged, slurmctld (controller) and configless slurmds (workers),
and a user on the controller (through `hpod start-session`) runs sinfo, srun,
sbatch and squeue as on any Slurm cluster. Then hpod keeps Slurm in step: a
killed slurmd comes back (with an event), scaling up adds idle nodes, deleting a
node drains it and takes it out of Slurm, bad role definitions are refused, and
deleting the cluster leaves no Slurm process. Needs root and Debian's slurm
packages."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402

ON_CREATE = r"""#!/bin/bash
set -euo pipefail
# HyperPod's scripts read the roles from here; hpod writes it from SlurmConfig.
python3 -c 'import json; p=json.load(open("/opt/ml/config/provisioning_parameters.json")); print("controller group:", p["controller_group"])'
echo "[INFO]: Success: All provisioning scripts completed"
"""

JOB = r"""#!/bin/bash
#SBATCH --output=/fsx/jobs/%j.out
srun hostname | sort > /fsx/jobs/$SLURM_JOB_ID.hosts
sleep 4
echo done
"""

SLURM_PROGRAMS = ("slurmctld", "slurmd", "munged", "slurmstepd")



def descendants(root_pid):
    """Host PIDs of every process below root_pid, with their command names."""
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(pid), comm))
    out, todo = [], [root_pid]
    while todo:
        for pid, comm in children.get(todo.pop(), []):
            out.append((pid, comm))
            todo.append(pid)
    return out


class SlurmTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurmctld/slurmd/munge are not installed "
                                    "(scripts/install-deps.sh installs them)")
        cls.d = nodestest.NodesDaemon("t4s")
        try:
            cls.lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(cls.lcs, "on_create.sh"), ON_CREATE)
            cls.d.start()
            cls.src = "file://" + cls.lcs + "/"
            cls.groups = [
                nodestest.lcs_group("controller-machine", 1, cls.src,
                                    SlurmConfig={"NodeType": "Controller"}),
                nodestest.lcs_group("login-group", 1, cls.src, SlurmConfig={"NodeType": "Login"}),
                nodestest.lcs_group("worker-group-1", 3, cls.src, instance_type="ml.c5.2xlarge",
                                    SlurmConfig={"NodeType": "Compute",
                                                 "PartitionNames": ["dev"]})]
            spec = os.path.join(cls.d.root, "cluster.json")
            with open(spec, "w") as f:
                json.dump(cls.groups, f)
            t0 = time.time()
            cls.d.hpod("create-cluster", "--cluster-name", "slurm", "--instance-groups",
                       "file://" + spec)
            cls.d.wait_status("slurm", "InService", timeout=240)
            cls.create_seconds = time.time() - t0
            cls.refresh_nodes()
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    @classmethod
    def refresh_nodes(cls):
        cls.nodes = cls.d.nodes("slurm")
        cls.controller = [n["InstanceId"] for n in cls.nodes
                          if n["InstanceGroupName"] == "controller-machine"][0]
        arn = cls.d.hpod_json("describe-cluster", "--cluster-name", "slurm")["ClusterArn"]
        cls.target = "sagemaker-cluster:%s_controller-machine-%s" % (arn.split("/")[-1],
                                                                     cls.controller)

    def workers(self):
        """Hostnames of the worker nodes hpod lists, sorted."""
        return sorted(n["PrivateDnsHostname"].split(".")[0] for n in self.d.nodes("slurm")
                      if n["InstanceGroupName"] == "worker-group-1")

    def on_controller(self, command, check=True):
        """Runs a command on the controller the way a user does: hpod start-session."""
        return self.d.session(self.target, command, check)

    def sinfo(self):
        """{hostname: state} from sinfo on the controller."""
        out = self.on_controller("sinfo -h -N -o '%N %P %T'")
        states = {}
        for line in out.splitlines():
            name, partition, state = line.split()
            self.assertEqual(partition, "dev*")
            states[name] = state
        return states

    def wait_sinfo(self, want, timeout=60):
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            got = self.sinfo()
            if got == want:
                return got
            time.sleep(0.5)
        self.fail("sinfo never showed %s (last %s)\n%s" % (want, got, self.d.log_tail()))

    def test_1_sinfo_shows_the_workers_idle(self):
        print("create-cluster -> InService with Slurm (1+3): %.1f s" % self.create_seconds)
        self.assertEqual(self.sinfo(), {w: "idle" for w in self.workers()})
        # The controller's hostname is Slurm's controller, and workers run configless.
        ping = self.on_controller("scontrol ping")
        self.assertIn("Slurmctld(primary) at %s is UP" % self.d.in_node(
            self.controller, "hostname").stdout.strip(), ping)
        worker = [n["InstanceId"] for n in self.nodes
                  if n["InstanceGroupName"] == "worker-group-1"][0]
        self.assertIn("slurm.conf", self.d.in_node(worker, "ls /run/slurm/conf/").stdout)
        self.assertFalse(os.path.exists(os.path.join(
            self.d.data_dir, "local", "nodes", worker, "disk", "opt", "slurm")))
        # munge: one key per cluster, 0400 munge:munge, and it authenticates across nodes.
        key = self.d.in_node(worker, "stat -c '%a %U' /var/lib/hpod-agent/munge/munge.key")
        self.assertEqual(key.stdout.split(), ["400", "munge"])
        cred = self.d.in_node(worker, "munge -n").stdout
        self.assertIn("STATUS:          Success",
                      self.on_controller("echo '%s' | unmunge" % cred.strip()))
        # The motd says what works: jobs, /fsx, training across nodes, HyperPod's
        # Action:Replace / Action:Reboot (test_recovery.py), and --auto-resume
        # (test_auto_resume.py) because the plugin is installed on every node.
        motd = self.d.in_node(worker, "cat /opt/hpod/motd").stdout
        self.assertIn("/fsx is on every node", motd)
        self.assertIn("hpod-train", motd)
        self.assertIn('state=fail reason="Action:Replace"', motd)
        self.assertIn("sbatch --nodes N --auto-resume=1", motd)
        self.assertIn("required /var/lib/hpod-agent/spank_hpod.so",
                      self.on_controller("cat /opt/slurm/etc/plugstack.conf"))
        self.assertIn("--auto-resume=N", self.on_controller("srun --help"))
        # Users' own settings live in a file hpod created and never rewrites.
        self.assertIn("Include slurm.user.conf",
                      self.on_controller("cat /opt/slurm/etc/slurm.conf"))
        self.assertIn("never rewrites", self.on_controller("cat /opt/slurm/etc/slurm.user.conf"))

    def test_1b_list_cluster_nodes_with_slurm(self):
        out = self.d.hpod_json("list-cluster-nodes", "--cluster-name", "slurm", "--with-slurm")
        self.assertTrue(out["SlurmAvailable"])
        by_group = {}
        for n in out["ClusterNodeSummaries"]:
            by_group.setdefault(n["InstanceGroupName"], []).append(n)
        for n in by_group["worker-group-1"]:
            self.assertEqual(n["Slurm"]["NodeName"], n["PrivateDnsHostname"].split(".")[0])
            self.assertEqual(n["Slurm"]["State"], "IDLE")
        for group in ("controller-machine", "login-group"):
            self.assertIsNone(by_group[group][0]["Slurm"])
        table = self.d.hpod("list-cluster-nodes", "--cluster-name", "slurm", "--with-slurm",
                            "--output", "table").stdout
        self.assertEqual(table.count("IDLE"), 3, table)

    def test_2_srun_runs_on_every_worker(self):
        out = self.on_controller("srun -N3 hostname")
        self.assertEqual(sorted(out.split()), self.workers())

    def test_2b_login_node_submits_jobs(self):
        login = [n["InstanceId"] for n in self.nodes if n["InstanceGroupName"] == "login-group"][0]
        # Login nodes are clients: not Slurm nodes, no slurmd, but srun works from them.
        self.assertNotIn(self.d.in_node(login, "hostname").stdout.strip(), self.sinfo())
        self.assertEqual(self.d.in_node(login, "pgrep -x slurmd", check=False).stdout, "")
        out = self.d.in_node(login, "srun -N3 hostname").stdout
        self.assertEqual(sorted(out.split()), self.workers())

    def test_3_sbatch_job_writes_to_fsx_and_shows_in_squeue(self):
        self.d.in_node(self.controller, "mkdir -p /fsx/jobs && cat > /fsx/jobs/job.sh <<'EOF'\n"
                       + JOB + "EOF\n")
        out = self.on_controller("sbatch --nodes 3 /fsx/jobs/job.sh")
        self.assertRegex(out, r"Submitted batch job \d+")
        job = out.split()[-1]
        seen_running = False
        deadline = time.time() + 60
        while time.time() < deadline:
            row = self.on_controller("squeue -h -j %s -o '%%T %%D'" % job).split()
            state = row[0] if row else ""
            if state == "RUNNING":
                seen_running = True
                self.assertEqual(row[1], "3", row)
            if state == "" and seen_running:
                break
            time.sleep(0.5)
        self.assertTrue(seen_running, "squeue never showed job %s RUNNING" % job)
        hosts = self.d.in_node(self.controller, "cat /fsx/jobs/%s.hosts" % job).stdout.split()
        self.assertEqual(hosts, self.workers())
        self.assertEqual(
            self.d.in_node(self.controller, "cat /fsx/jobs/%s.out" % job).stdout.strip(), "done")

    def wait_job(self, job, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.on_controller("squeue -h -j %s -o %%T" % job, check=False).strip():
                return
            time.sleep(0.5)
        self.fail("job %s still queued or running after %d s" % (job, timeout))

    def test_3b_sbatch_trains_across_three_workers(self):
        """The seed's launch: data prepared with hpod-data on the controller into
        /fsx, `sbatch --nodes 3 run.slurm ./llama_tiny.sh` trains one model on
        three workers (rank and master from Slurm), checkpoints in parts under
        /fsx, and equals the same script's 3-rank run on loopback bit for bit.
        The same command again resumes from the newest checkpoint."""
        # Nodes have their own /tmp (where a checkout may live): what the job
        # runs is put on the cluster's /fsx, found from the host by a marker.
        self.on_controller("mkdir -p /fsx/llama /fsx/data /fsx/bin && touch /fsx/llama/.here")
        fsx = [root for root, _, files in os.walk(self.d.fsx_root) if ".here" in files]
        self.assertEqual(len(fsx), 1, fsx)
        fsx = os.path.dirname(fsx[0])
        top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        bins = os.path.join(nodestest.hpodtest.BIN_DIR, "cmd")
        for name in ("run.slurm", "llama_tiny.sh"):
            shutil.copy(os.path.join(top, "examples", "slurm", name), os.path.join(fsx, "llama"))
        for tool in ("hpod-data", "hpod-train"):
            shutil.copy(os.path.join(bins, tool, tool), os.path.join(fsx, "bin"))
        shutil.copy(os.path.join(top, "src", "train", "data", "testdata", "kjv_raw_sample.txt"),
                    os.path.join(fsx, "data", "corpus.txt"))
        self.on_controller(
            "set -e; /fsx/bin/hpod-data train-tokenizer --vocab-size 512 --input "
            "/fsx/data/corpus.txt --output /fsx/data/tok512 && /fsx/bin/hpod-data tokenize "
            "--tokenizer /fsx/data/tok512.model --input /fsx/data/corpus.txt "
            "--output /fsx/data/train512.bin")
        submit = ("cd /fsx/llama && HPOD_TRAIN=/fsx/bin/hpod-train MAX_STEPS=%d sbatch --nodes 3 "
                  "run.slurm ./llama_tiny.sh --lr-decay-steps 80")
        out = self.on_controller(submit % 60)
        self.assertRegex(out, r"Submitted batch job \d+")
        job = out.split()[-1]
        self.wait_job(job)
        log = self.on_controller("cat /fsx/llama/slurm-%s.out" % job)
        self.assertIn("hpod-train: 3 ranks (slurm job %s step 0)" % job, log)
        final = [l for l in log.splitlines() if "60/60" in l]
        self.assertTrue(final, log)
        for key in ("loss=", "gradient_norm=", "global_step=60.0", "consumed_samples=1440.0"):
            self.assertIn(key, final[-1])
        parts = self.on_controller("ls /fsx/runs/llama_tiny/checkpoints/step_000000060").split()
        self.assertEqual(parts, ["manifest.json", "part-00000-of-00003.bin",
                                 "part-00001-of-00003.bin", "part-00002-of-00003.bin"])
        on_slurm = json.loads(self.on_controller("cat /fsx/runs/llama_tiny/summary.json"))
        self.assertEqual(on_slurm["world_size"], 3)
        self.assertEqual(on_slurm["end_step"], 60)

        # The same script, three ranks on loopback, on the same files.
        run_dir = os.path.join(self.d.root, "loopback")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        procs = [subprocess.Popen(
            [os.path.join(top, "examples", "slurm", "llama_tiny.sh"), "--lr-decay-steps", "80",
             "--rank", str(r), "--world-size", "3", "--master-addr", "127.0.0.1",
             "--master-port", str(port)],
            env=dict(os.environ, HPOD_TRAIN=os.path.join(bins, "hpod-train", "hpod-train"),
                     DATA_DIR=os.path.join(fsx, "data"), RUN_DIR=run_dir, MAX_STEPS="60"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for r in range(3)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, err)
        with open(os.path.join(run_dir, "summary.json")) as f:
            loopback = json.load(f)
        self.assertEqual(on_slurm["final_loss"], loopback["final_loss"])

        # Again, further: the same command resumes from step 60.
        out = self.on_controller(submit % 80)
        job2 = out.split()[-1]
        self.wait_job(job2)
        log2 = self.on_controller("cat /fsx/llama/slurm-%s.out" % job2)
        self.assertIn("resumed from /fsx/runs/llama_tiny/checkpoints/step_000000060", log2)
        self.assertNotIn("warning", log2)
        self.assertEqual(
            json.loads(self.on_controller("cat /fsx/runs/llama_tiny/summary.json"))["end_step"], 80)

    def test_4_killed_slurmd_is_restarted_with_an_event(self):
        victim = [n for n in self.nodes if n["InstanceGroupName"] == "worker-group-1"][1]
        name = victim["PrivateDnsHostname"].split(".")[0]
        before = self.d.in_node(victim["InstanceId"], "pgrep -x slurmd").stdout.split()
        self.assertEqual(len(before), 1)
        self.d.in_node(victim["InstanceId"], "pkill -9 -x slurmd")
        deadline = time.time() + 30
        events = []
        while time.time() < deadline:
            events = [e["Description"] for e in self.d.hpod_json(
                "list-cluster-events", "--cluster-name", "slurm", "--node-id",
                victim["InstanceId"])["Events"]]
            if any("running again" in e for e in events):
                break
            time.sleep(0.5)
        self.assertTrue(any("slurmd was killed by signal 9" in e for e in events), events)
        self.assertTrue(any("running again" in e for e in events), events)
        after = self.d.in_node(victim["InstanceId"], "pgrep -x slurmd").stdout.split()
        self.assertEqual(len(after), 1)
        self.assertNotEqual(after, before)
        self.wait_sinfo({w: "idle" for w in self.workers()})
        self.assertIn(name, self.on_controller("srun -N3 hostname").split())

    def test_5_scale_up_adds_an_idle_node(self):
        groups = json.loads(json.dumps(self.groups))
        groups[2]["InstanceCount"] = 4
        spec = os.path.join(self.d.root, "up.json")
        with open(spec, "w") as f:
            json.dump(groups, f)
        self.d.hpod("update-cluster", "--cluster-name", "slurm", "--instance-groups",
                    "file://" + spec)
        self.d.wait_status("slurm", "InService", timeout=120)
        self.assertEqual(len(self.workers()), 4)
        self.wait_sinfo({w: "idle" for w in self.workers()})
        self.assertEqual(sorted(self.on_controller("srun -N4 hostname").split()), self.workers())

    def test_6_deleted_node_leaves_slurm_and_the_cluster(self):
        victim = [n for n in self.d.nodes("slurm") if n["InstanceGroupName"] == "worker-group-1"][0]
        name = victim["PrivateDnsHostname"].split(".")[0]
        out = self.d.hpod_json("batch-delete-cluster-nodes", "--cluster-name", "slurm",
                               "--node-ids", victim["InstanceId"])
        self.assertEqual(out["Successful"], [victim["InstanceId"]])
        deadline = time.time() + 60
        while time.time() < deadline:
            ids = [n["InstanceId"] for n in self.d.nodes("slurm")]
            if victim["InstanceId"] not in ids:
                break
            time.sleep(0.5)
        self.assertNotIn(victim["InstanceId"], [n["InstanceId"] for n in self.d.nodes("slurm")])
        states = self.wait_sinfo({w: "idle" for w in self.workers()})
        self.assertNotIn(name, states)
        self.assertEqual(len(states), 3)
        # It was drained before it left (slurmctld's own log says so).
        log = self.on_controller("cat /var/log/slurm/slurmctld.log")
        self.assertIn("update_node: node %s reason set to: hpod: removing the node" % name, log)
        # The controller group cannot be deleted, as on HyperPod.
        p = self.d.hpod("batch-delete-cluster-nodes", "--cluster-name", "slurm", "--node-ids",
                        self.controller, "--output", "json", check=False)
        self.assertIn("controller group", p.stdout + p.stderr)

    def test_7_bad_role_definitions_are_refused(self):
        two = [nodestest.lcs_group("ctl-a", 1, self.src, SlurmConfig={"NodeType": "Controller"}),
               nodestest.lcs_group("ctl-b", 1, self.src, SlurmConfig={"NodeType": "Controller"})]
        none = [nodestest.lcs_group("w", 1, self.src, SlurmConfig={"NodeType": "Compute"})]
        for groups, words in ((two, ["ctl-a", "ctl-b", "Controller"]),
                              (none, ["Controller", "exactly one controller group"])):
            p = self.d.hpod("create-cluster", "--cluster-name", "bad", "--instance-groups",
                            nodestest.cluster_json(groups), check=False)
            self.assertEqual(p.returncode, 254, p.stdout)
            self.assertIn("ValidationException", p.stderr)
            for w in words:
                self.assertIn(w, p.stderr)
        # The classic file form: provisioning_parameters.json names a group that does not
        # exist. The cluster fails the HyperPod way, naming the group.
        lcs = os.path.join(self.d.root, "lcs-bad")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
        with open(os.path.join(lcs, "provisioning_parameters.json"), "w") as f:
            json.dump({"version": "1.0.0", "workload_manager": "slurm",
                       "controller_group": "controller-machine",
                       "worker_groups": [{"instance_group_name": "no-such-group",
                                          "partition_name": "dev"}]}, f)
        groups = [nodestest.lcs_group("controller-machine", 1, "file://" + lcs + "/"),
                  nodestest.lcs_group("workers", 1, "file://" + lcs + "/")]
        self.d.hpod("create-cluster", "--cluster-name", "badfile", "--instance-groups",
                    nodestest.cluster_json(groups))
        out = self.d.wait_status("badfile", "Failed", timeout=120)
        self.assertIn("no-such-group", out["FailureMessage"])
        self.assertIn("failed to provision", out["FailureMessage"])
        self.d.hpod("delete-cluster", "--cluster-name", "badfile")
        self.d.wait_status("badfile", None, timeout=60)

    def test_7b_gpu_instance_types_get_gres(self):
        # A GPU instance type declares its GPUs to Slurm (gres.conf, stand-in devices on
        # this GPU-less host), so --gpus-per-node works as on AWS.
        groups = [nodestest.lcs_group("controller-machine", 1, self.src,
                                      SlurmConfig={"NodeType": "Controller"}),
                  nodestest.lcs_group("gpu", 1, self.src, instance_type="ml.g5.xlarge",
                                      SlurmConfig={"NodeType": "Compute",
                                                   "PartitionNames": ["gpu"]})]
        self.d.hpod("create-cluster", "--cluster-name", "gpus", "--instance-groups",
                    nodestest.cluster_json(groups))
        self.d.wait_status("gpus", "InService", timeout=120)
        ctl = [n["InstanceId"] for n in self.d.nodes("gpus")
               if n["InstanceGroupName"] == "controller-machine"][0]
        out = self.d.in_node(ctl, "sinfo -h -N -o '%P %G %c %T'").stdout.split()
        self.assertEqual(out, ["gpu*", "gpu:a10g:1", "4", "idle"])
        env = self.d.in_node(ctl, "srun -N1 --gpus-per-node=1 printenv CUDA_VISIBLE_DEVICES")
        self.assertEqual(env.stdout.strip(), "0")
        self.d.hpod("delete-cluster", "--cluster-name", "gpus")
        self.d.wait_status("gpus", None, timeout=60)

    def test_8_delete_leaves_no_slurm_process(self):
        daemons = []
        for n in self.d.nodes("slurm"):
            daemons += [(pid, comm) for pid, comm in
                        descendants(self.d.node_pid(n["InstanceId"])) if comm in SLURM_PROGRAMS]
        comms = sorted({c for _, c in daemons})
        self.assertEqual(comms, ["munged", "slurmctld", "slurmd"], daemons)
        self.d.hpod("delete-cluster", "--cluster-name", "slurm")
        self.d.wait_status("slurm", None, timeout=120)
        alive = [(pid, comm) for pid, comm in daemons if os.path.exists("/proc/%d" % pid)]
        self.assertEqual(alive, [])
        self.assertEqual(self.d.leftovers(), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
