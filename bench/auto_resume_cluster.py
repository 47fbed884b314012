"""The pieces of auto_resume.py that hold a cluster: hpod-train's goodput ledger as
it grows on /fsx (Ledger) and a 1+N Slurm cluster prepared for the seed's training
job or the PyTorch example (Cluster). Imported by auto_resume.py only."""
import json
import os
import re
import shutil
import time

# auto_resume.py imports nodes_bench first: it puts tests/e2e on sys.path and
# sets HPOD_BIN_DIR, which hpodtest reads.
from recovery import clear_live, live, run_in_node, sinfo_states  # noqa: E402
from slurm_bench import event_time  # noqa: E402
import hpodtest  # noqa: E402
import nodestest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
NOOP = "#!/bin/bash\ntrue\n"
BIN = os.path.join(hpodtest.BIN_DIR, "cmd")
PLUGIN = os.path.join(hpodtest.BIN_DIR, "src", "slurm", "spank", "spank_hpod.so")
SAVE_INTERVAL = 20
MAX_STEPS = 100000                  # never ends by itself: cancelled once measured


class Ledger:
    """hpod-train's goodput ledger, read from the host's side of /fsx as it grows."""

    def __init__(self, path):
        self.path, self.off, self.events, self.part = path, 0, [], ""

    def read(self):
        try:
            with open(self.path) as f:
                f.seek(self.off)
                text = f.read()
                self.off = f.tell()
        except OSError:
            return self.events
        text, self.part = (self.part + text), ""
        lines = text.split("\n")
        self.part = lines.pop()        # a line not yet complete
        for line in lines:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass
        return self.events

    def starts(self):
        return [i for i, e in enumerate(self.read()) if e.get("event") == "start"]

    def last_step(self):
        steps = [e for e in self.read() if e.get("event") == "step"]
        return steps[-1] if steps else None

    def first_step_after(self, index):
        for e in self.events[index + 1:]:
            if e.get("event") == "step":
                return e
        return None


class Cluster:
    """A 1+N Slurm cluster of `d` with /fsx prepared for the seed's training job:
    Slurm through nsenter into the controller node (sbatch through start-session, as
    a user would)."""

    def __init__(self, d, name, workers, recovery, data_dir, workload="hpod-train"):
        self.d, self.name, self.n_workers, self.data_dir = d, name, workers, data_dir
        self.workload = workload   # --workload: "hpod-train" or "pytorch"
        src = "file://" + os.path.join(d.root, "lcs") + "/"
        spec = os.path.join(d.root, name + ".json")
        with open(spec, "w") as f:
            json.dump([nodestest.lcs_group("controller-machine", 1, src,
                                           SlurmConfig={"NodeType": "Controller"}),
                       nodestest.lcs_group("workers", workers, src,
                                           SlurmConfig={"NodeType": "Compute"})], f)
        d.hpod("create-cluster", "--cluster-name", name, "--instance-groups", "file://" + spec,
               "--node-recovery", recovery)

    def wait_created(self):
        self.d.wait_status(self.name, "InService", timeout=300)
        self.controller = [n["InstanceId"] for n in self.d.nodes(self.name)
                           if n["InstanceGroupName"] == "controller-machine"][0]
        cid = self.d.hpod_json("describe-cluster", "--cluster-name", self.name)["ClusterArn"]
        self.target = "sagemaker-cluster:%s_controller-machine-%s" % (cid.split("/")[-1],
                                                                       self.controller)
        # The seed's scripts, hpod-train and the tokenized KJV sample on /fsx.
        mark = ".bench-" + self.name
        self.d.in_node(self.controller, "mkdir -p /fsx/bench /fsx/data /fsx/bin && "
                                        "touch /fsx/bench/" + mark)
        found = [r for r, _, files in os.walk(self.d.fsx_root) if mark in files]
        self.fsx = os.path.dirname(found[0])
        for name in ("run.slurm", "llama_tiny.sh"):
            shutil.copy(os.path.join(TOP, "examples", "slurm", name),
                        os.path.join(self.fsx, "bench"))
        shutil.copy(os.path.join(BIN, "hpod-train", "hpod-train"), os.path.join(self.fsx, "bin"))
        for name in ("tok512.model", "train512.bin"):
            shutil.copy(os.path.join(self.data_dir, name), os.path.join(self.fsx, "data"))
        if self.workload == "pytorch":
            for name in ("train_ddp.py", "run.sbatch"):
                shutil.copy(os.path.join(TOP, "examples", "pytorch", name),
                            os.path.join(self.fsx, "bench"))
            shutil.copy(os.path.join(TOP, "python", "hpod_goodput.py"),
                        os.path.join(self.fsx, "bench"))
            shutil.copy(os.path.join(TOP, "src", "train", "data", "testdata",
                                     "kjv_raw_sample.txt"),
                        os.path.join(self.fsx, "data", "corpus.txt"))

    def host_path(self, path):
        return os.path.join(self.fsx, path.replace("/fsx/", "", 1))

    def read(self, path):
        try:
            with open(self.host_path(path)) as f:
                return f.read()
        except OSError:
            return ""

    def on_controller(self, *argv, timeout=15):
        return run_in_node(self.d, self.controller, *argv, timeout=timeout)

    def sinfo(self):
        return sinfo_states(self.d, self.controller)

    def job_state(self, job):
        """squeue's state of the job; '' once it left the queue."""
        rc, out = self.on_controller("squeue", "-h", "-j", job, "-o", "%T")
        return out.strip() if rc == 0 else ""

    def final_state(self, job):
        """scontrol's JobState[/Reason][, requeued N] of the job."""
        _, out = self.on_controller("scontrol", "show", "job", job)
        f = dict(re.findall(r"(JobState|Reason|Restarts)=(\S+)", out))
        if "JobState" not in f:
            return "gone"
        return f["JobState"] + ("/" + f["Reason"] if f.get("Reason", "None") != "None" else "") + \
            (", requeued %s" % f["Restarts"] if f.get("Restarts", "0") != "0" else "")

    def batch_host(self, job):
        _, out = self.on_controller("scontrol", "show", "job", job)
        m = re.search(r"BatchHost=(\S+)", out)
        return m.group(1) if m else ""

    def workers(self):
        return sorted((n["PrivateDnsHostname"].split(".")[0], n["InstanceId"])
                      for n in self.d.nodes(self.name) if n["InstanceGroupName"] == "workers")

    def recoveries(self, node_id=None):
        args = ["hpod-list-recoveries", "--cluster-name", self.name]
        if node_id:
            args += ["--node-id", node_id]
        p = self.d.hpod(*args, "--output", "json", check=False, timeout=30)
        return json.loads(p.stdout)["Recoveries"] if p.returncode == 0 else None

    def wait_ready(self, timeout=240):
        """Until every node is Running, no recovery is in progress and sinfo shows
        every worker idle (no job left); returns the workers [(hostname, id)]."""
        deadline, why = time.time() + timeout, "?"
        while time.time() < deadline:
            nodes = self.d.nodes(self.name)
            workers = self.workers()
            recs = self.recoveries() or []
            states = self.sinfo()
            if len(nodes) != self.n_workers + 1 or \
                    any(n["InstanceStatus"]["Status"] != "Running" for n in nodes):
                why = "nodes %s" % [n["InstanceStatus"]["Status"] for n in nodes]
            elif any(r["Status"] == "InProgress" for r in recs):
                why = "a recovery in progress"
            elif sorted(states) != [h for h, _ in workers] or \
                    any(s != "idle" for s in states.values()):
                why = "sinfo %s" % states
            else:
                clear_live()
                return workers
            live("%s: waiting until ready (%s)" % (self.name, why))
            time.sleep(0.5)
        clear_live()
        raise RuntimeError("cluster %s not ready after %d s: %s" % (self.name, timeout, why))

    def submit(self, name, nodes, auto_resume):
        """The seed's sbatch (through start-session, as a user); returns the job id.
        --workload pytorch: examples/pytorch's run.sbatch (DDP over gloo, the
        Debian python3 with python3-torch, hpod_goodput's ledger)."""
        ar = "--auto-resume=%d " % auto_resume if auto_resume else ""
        if self.workload == "pytorch":
            cmd = ("cd /fsx/bench && PYTHON=/usr/bin/python3 STEPS=%d CKPT_DIR=/fsx/runs/%s/checkpoints "
                   "sbatch --nodes %d %s--output=/fsx/bench/%s.out run.sbatch --data "
                   "/fsx/data/corpus.txt --save-interval %d --log-interval 1000000" % (
                       MAX_STEPS, name, nodes, ar, name, SAVE_INTERVAL))
        else:
            cmd = ("cd /fsx/bench && HPOD_TRAIN=/fsx/bin/hpod-train MAX_STEPS=%d "
                   "RUN_DIR=/fsx/runs/%s sbatch --nodes %d %s--output=/fsx/bench/%s.out "
                   "run.slurm ./llama_tiny.sh --save-interval %d" % (
                       MAX_STEPS, name, nodes, ar, name, SAVE_INTERVAL))
        p = self.d.hpod("start-session", "--target", self.target, "--command", cmd, timeout=120)
        m = re.search(r"Submitted batch job (\d+)", p.stdout)
        if not m:
            raise RuntimeError("sbatch: %s %s" % (p.stdout, p.stderr))
        return m.group(1)

    def ledger(self, job=None, name=None):
        return Ledger(self.host_path("/fsx/bench/.hpod/goodput-%s.jsonl" % job) if job else
                      self.host_path("/fsx/runs/%s/checkpoints/goodput.jsonl" % name))

    def wait_training(self, job, ledger, step, timeout=180):
        """Until the ledger shows the step-20 checkpoint and `step`."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            ev = ledger.read()
            last = ledger.last_step()
            if last and last["step"] >= step and any(
                    e.get("event") == "checkpoint" and e["step"] >= SAVE_INTERVAL for e in ev):
                return
            if time.time() > deadline - timeout + 20 and not self.job_state(job):
                break
            time.sleep(0.2)
        raise RuntimeError("job %s never reached step %d (state %s)" % (
            job, step, self.final_state(job)))

    def inject(self, node_id, kind, extra):
        t0 = time.time()   # right before the call
        out = self.d.hpod("inject-fault", "--cluster-name", self.name, "--node-id", node_id,
                          "--kind", kind, *extra, "--output", "json").stdout
        return t0, time.time() - t0, event_time(json.loads(out)["InjectedTime"]) - t0

    def cancel(self, job, timeout=120):
        self.on_controller("scancel", job)
        deadline = time.time() + timeout
        while self.job_state(job) and time.time() < deadline:
            time.sleep(0.5)

    def goodput(self, job, output="json"):
        p = self.d.hpod("describe-job-goodput", "--cluster-name", self.name, "--job-id", job,
                        "--output", output, check=False)
        if p.returncode != 0:
            return None if output == "json" else p.stderr.strip()
        return json.loads(p.stdout) if output == "json" else p.stdout
