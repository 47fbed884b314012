"""`make quickstart` end to end, as a newcomer runs it, without a terminal
(HPOD_QUICKSTART_NONINTERACTIVE=1): scripts/quickstart.py installs hpod into a
prefix, starts hpodd, creates the seed's cluster (examples/demo-cluster.json:
controller-group x1 + worker-group x4, lifecycle scripts from base-config), trains
the tokenizer and tokenizes the KJV on the controller, runs the seed's
`sbatch --nodes 4 --auto-resume=1 run.slurm ./llama_tiny.sh`, kills a worker midway
and follows hpod's recovery, and the job resumes from its checkpoint to the end.

Asserted, each from its own source: every phase's outcome in the output (InService,
the progress line, the [Auto Resume] retry, the recovery timeline, the summary);
the cluster through the installed `hpod` with no flags (the profile `hpodd init`
wrote); the killed node replaced under the same hostname; the job COMPLETED with
the final loss of an undisturbed 4-rank run of the same script on this host, bit
for bit; a second run reuses hpodd, the cluster and the data; `quickstart down`
leaves no process, namespace, link, route or mount. Everything lives under one
directory in /var/tmp with its own HOME, port, node block and link prefix, so a
user's own hpodd or quickstart is never touched. Needs root and Debian's Slurm."""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import quickstart_lib  # noqa: E402
BIN = nodestest.hpodtest.BIN_DIR
STEPS = 300
PREFIX = "tqs"
PROGRESS = re.compile(r"Epoch \d+: .*loss=[0-9.]+, .*gradient_norm=[0-9.]+, .*"
                      r"global_step=([0-9.]+), consumed_samples=[0-9.]+")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QuickstartTest(unittest.TestCase):
    root = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurm packages are not installed")
        for built in (os.path.join(BIN, "src", "slurm", "spank", "spank_hpod.so"),
                      os.path.join(BIN, "cmd", "hpod-train", "hpod-train")):
            if not os.path.exists(built):
                raise unittest.SkipTest("%s is not built" % built)
        # A run killed by ctest's timeout cannot clean up: its successor does.
        for old in glob.glob("/var/tmp/hpod-e2e-quickstart-*/state"):
            subprocess.run([sys.executable, os.path.join(TOP, "scripts", "quickstart.py"), "down"],
                           env=dict(os.environ, HPOD_QUICKSTART_DIR=old), capture_output=True,
                           timeout=300)
            shutil.rmtree(os.path.dirname(old), ignore_errors=True)
        cls.root = tempfile.mkdtemp(prefix="hpod-e2e-quickstart-", dir="/var/tmp")
        cls.state = os.path.join(cls.root, "state")
        cls.prefix = os.path.join(cls.root, "prefix")
        cls.block = nodestest.free_block()
        cls.port = free_port()
        os.makedirs(os.path.join(cls.root, "home"))
        cls.env = dict(os.environ, HOME=os.path.join(cls.root, "home"), BUILD=BIN,
                       HPOD_QUICKSTART_DIR=cls.state, HPOD_PREFIX=cls.prefix,
                       HPOD_PORT=str(cls.port), HPOD_NODE_BLOCK=cls.block,
                       HPOD_LINK_PREFIX=PREFIX, HPOD_QUICKSTART_NONINTERACTIVE="1",
                       HPOD_QUICKSTART_STEPS=str(STEPS), HPOD_QUICKSTART_TRAIN_TIMEOUT="300")
        for k in quickstart_lib.AWS_OVERRIDES + ("HPOD_S3_ENDPOINT",):
            cls.env.pop(k, None)
        # The test's own hpod calls: a clean environment. The quickstart's: a shell
        # set up for a real AWS account, whose settings must not reach hpodd.
        cls.user_env = dict(cls.env, AWS_REGION="eu-central-1", AWS_PROFILE="work",
                            AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE",
                            AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                            AWS_ENDPOINT_URL="http://127.0.0.1:9")
        try:
            cls.first = cls.quickstart("up")
        except BaseException:
            cls.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cleanup()

    @classmethod
    def cleanup(cls):
        if not cls.root:
            return
        if os.path.isdir(cls.state):
            cls.quickstart("down", check=False)
        # The net under the net: nothing of ours may outlive the test.
        for n in nodestest.run("ip", "netns", "list", check=False).stdout.split():
            if n.startswith(PREFIX + "n"):
                nodestest.run("ip", "netns", "del", n, check=False)
        nodestest.run("ip", "route", "del", "unreachable", cls.block, check=False)
        shutil.rmtree(cls.root, ignore_errors=True)
        cls.root = None

    @classmethod
    def quickstart(cls, cmd, check=True, env=None, timeout=400):
        t = time.time()
        p = subprocess.run([sys.executable, os.path.join(TOP, "scripts", "quickstart.py"), cmd],
                           env=env or cls.user_env, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        print("---- quickstart %s (%.0f s, exit %d) ----\n%s%s" % (
            cmd, time.time() - t, p.returncode, p.stdout, p.stderr), flush=True)
        if check and p.returncode != 0:
            log = os.path.join(cls.state, "data", "hpodd.log")
            tail = open(log).read()[-4000:] if os.path.exists(log) else ""
            raise AssertionError("quickstart %s failed (%d)\n%s\n--- hpodd.log ---\n%s" % (
                cmd, p.returncode, p.stderr, tail))
        return p.stdout

    def hpod(self, *args):
        """The installed CLI with no flags: the 'hpod' profile hpodd init wrote."""
        p = subprocess.run([os.path.join(self.prefix, "bin", "hpod")] + list(args),
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout) if "--output" not in args else p.stdout

    def result(self):
        with open(os.path.join(self.state, "quickstart-result.json")) as f:
            return json.load(f)

    def fsx(self, path):
        cid = self.hpod("describe-cluster", "--cluster-name", "demo")["ClusterArn"].split("/")[-1]
        return os.path.join(self.state, "data", "local", "fsx", cid, path)

    # ---- tests, in order ----

    def test_1_phases_and_cluster(self):
        out = self.first
        for n in range(1, 7):
            self.assertIn("== %d/6" % n, out)
        self.assertIn("hpodd ready on http://127.0.0.1:%d" % self.port, out)
        self.assertIn("$ hpod create-cluster --cluster-name demo", out)
        # The installed CLI answers with no --profile, --region or --endpoint-url.
        d = self.hpod("describe-cluster", "--cluster-name", "demo")
        self.assertEqual(d["ClusterStatus"], "InService")
        self.assertEqual(sorted((g["InstanceGroupName"], g["CurrentCount"])
                                for g in d["InstanceGroups"]),
                         [("controller-group", 1), ("worker-group", 4)])
        self.assertTrue(d["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"].startswith(
            "file://" + self.prefix + "/share/hpod/examples/lifecycle/base-config"))
        self.assertIn("InService", self.hpod("list-clusters", "--output", "text"))
        # Slurm from base-config's provisioning_parameters.json (no SlurmConfig in the JSON).
        self.assertRegex(out, r"Slurm: 4 worker\(s\) idle")
        # The data was made on the cluster from the KJV.
        self.assertIn("hpod-data train-tokenizer --vocab-size 512", out)
        self.assertTrue(os.path.getsize(self.fsx("data/train512.bin")) > 1000000)

    def test_2_training_progress_and_recovery(self):
        out, r = self.first, self.result()
        before, after = out.split("== 5/6", 1)
        steps = [float(m.group(1)) for m in PROGRESS.finditer(before)]
        self.assertTrue(steps and steps[-1] < STEPS, "the progress line before the fault")
        steps = [float(m.group(1)) for m in PROGRESS.finditer(after)]
        self.assertEqual(steps[-1], STEPS, "... and after it, to the end")
        self.assertRegex(out, r"Submitted batch job \d+")
        self.assertRegex(out, r"\[Auto Resume\] Info: JobID: %s StepID: \d+ Retrying step\. "
                              r"Attempt number: 1" % r["job"])
        # hpod's recovery as it happened, one timeline line per step, in order.
        seen = [m.group(1) for m in re.finditer(r"\n  \+\s*[\d.]+ s  (\S.*?)\s{2,}", after)]
        for words in ("detected", "marked in Slurm", "replacement launched",
                      "node resumed in Slurm", "training restarted",
                      "first training step after the fault"):
            self.assertIn(words, seen)
        self.assertLess(seen.index("detected"), seen.index("node resumed in Slurm"))
        self.assertEqual(r["recovery_status"], "Succeeded")
        # The killed worker was replaced: a new instance with the same hostname.
        workers = {n["InstanceId"]: n["PrivateDnsHostname"].split(".")[0]
                   for n in self.hpod("list-cluster-nodes", "--cluster-name",
                                      "demo")["ClusterNodeSummaries"]
                   if n["InstanceGroupName"] == "worker-group"}
        self.assertNotIn(r["killed_node"], workers)
        self.assertIn(r["killed_host"], workers.values())
        rec = self.hpod("describe-recovery", "--cluster-name", "demo", "--node-id",
                        r["killed_node"])["Recovery"]
        self.assertEqual((rec["Hostname"], rec["Action"], rec["Status"]),
                         (r["killed_host"], "Replace", "Succeeded"))
        # hpod-train's own ledger: the retry resumed from a checkpoint before the fault.
        ledger = [json.loads(l) for l in open(self.fsx(
            "quickstart/.hpod/goodput-%s.jsonl" % r["job"])) if l.strip().endswith("}")]
        starts = [e for e in ledger if e["event"] == "start"]
        self.assertEqual([e.get("attempt") for e in starts], [0, 1])
        self.assertEqual(starts[1]["resumed_step"] % 20, 0)
        self.assertGreater(starts[1]["resumed_step"], 0)
        first_attempt = [e["step"] for e in ledger if e["event"] == "step"
                         and e["time"] < starts[1]["time"]]
        self.assertLessEqual(starts[1]["resumed_step"], max(first_attempt))
        self.assertEqual(r["steps_rerun"], max(first_attempt) - starts[1]["resumed_step"])

    def test_3_resumed_to_the_end_with_the_undisturbed_loss(self):
        r = self.result()
        self.assertEqual(r["job_state"], "COMPLETED")
        self.assertEqual(r["steps"], STEPS)
        self.assertEqual(r["attempts"], 2)
        self.assertGreater(r["goodput"], 0.3)
        summary = json.load(open(self.fsx(r["run_dir"][len("/fsx/"):] + "/summary.json")))
        self.assertEqual(summary["end_step"], STEPS)
        self.assertEqual(r["final_loss"], self.undisturbed_loss())
        for k in ("Training", "Goodput", "TensorBoard", "Console", "Shell", "Tear down"):
            self.assertIn(k, self.first)
        self.assertIn("http://127.0.0.1:%d/" % self.port, self.first)

    def undisturbed_loss(self):
        """The same llama_tiny.sh, 4 ranks over loopback on this host, never interrupted."""
        run = os.path.join(self.root, "reference")
        port = free_port()
        env = dict(self.env, HPOD_TRAIN=os.path.join(BIN, "cmd", "hpod-train", "hpod-train"),
                   DATA_DIR=self.fsx("data"), RUN_DIR=run, MAX_STEPS=str(STEPS))
        for k in [k for k in env if k.startswith("SLURM_")]:
            del env[k]
        procs = [subprocess.Popen(
            [os.path.join(TOP, "examples", "slurm", "llama_tiny.sh"), "--rank", str(r),
             "--world-size", "4", "--master-addr", "127.0.0.1", "--master-port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for r in range(4)]
        errs = [p.communicate(timeout=600)[1] for p in procs]
        self.assertEqual([p.returncode for p in procs], [0] * 4, "\n".join(errs))
        return json.load(open(os.path.join(run, "summary.json")))["final_loss"]

    def test_4_a_second_run_reuses_what_is_there(self):
        out = self.quickstart("up", env=dict(self.user_env, HPOD_QUICKSTART_STEPS="200"))
        self.assertIn("hpodd is already running", out)
        self.assertIn("cluster demo exists (InService): reusing it", out)
        self.assertIn("data: /fsx/data already holds", out)
        self.assertEqual(self.result()["job_state"], "COMPLETED")

    def test_5_down_leaves_nothing(self):
        pid = int(open(os.path.join(self.state, "data", "hpodd.lock")).read())
        out = self.quickstart("down")
        self.assertIn("hpod delete-cluster --cluster-name demo", out)
        self.assertFalse(quickstart_lib.alive(pid), "hpodd stopped")
        self.assertIn("nothing left", out)
        left = []
        left += [n for n in nodestest.run("ip", "netns", "list").stdout.split()
                 if n.startswith(PREFIX + "n")]
        for line in nodestest.run("ip", "-o", "link", "show").stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith((PREFIX + "br", PREFIX + "v")):
                left.append(name)
        if self.block in nodestest.run("ip", "route", "show", "table", "all").stdout:
            left.append("route " + self.block)
        with open("/proc/self/mountinfo") as f:
            left += [l.split()[4] for l in f if self.root in l]
        left += [cmd for _, cmd in nodestest.processes_naming(self.state)]
        self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main()
