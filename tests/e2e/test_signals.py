"""End-to-end: signals never interrupt library code, and stops are clean.

Debian 12's oneDNN 2.6.3 JIT GEMM points rsp at a malloc'd workspace; a
signal handler run on such a thread writes its frame into the heap and glibc
aborts later (uxlfoundation/oneDNN#4845; src/base/signals.h). hpod processes
therefore block the signals they act on in every thread and read them in one
watcher thread. This test holds every hpod binary to that:

  - hpod-train (--matmul onednn, 2 threads, gradient accumulation) under a
    storm of the signals it acts on without stopping (SIGUSR1: checkpoint
    now) and of default-ignored ones, stopped by SIGTERM/SIGINT at chosen
    moments: mid-step, during an async save, right after a resume, at start.
    Every run exits 128+signal with a verified final checkpoint; the next
    resumes from it; the losses equal an uninterrupted run's, bit for bit.
  - every thread of hpod-train, hpod-data, hpodd and hpod-agent blocks the
    signals the program acts on, and no asynchronous signal has a handler
    (read from /proc while each one works under a storm).
  - hpodd and hpod-agent survive the storm and stop once, cleanly, on a
    storm of SIGTERMs.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
import sigstate  # noqa: E402

BIN_DIR = hpodtest.BIN_DIR
TRAIN = os.path.join(BIN_DIR, "cmd", "hpod-train", "hpod-train")
DATA = os.path.join(BIN_DIR, "cmd", "hpod-data", "hpod-data")
AGENT = os.path.join(BIN_DIR, "cmd", "hpod-agent", "hpod-agent")
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TEXT = os.path.join(SRC, "src", "train", "data", "testdata")

# Weight-gradient GEMMs with K = batch x seq = 512: large enough for oneDNN's
# JIT kernels to take their heap "stack" (the K that triggers it is ~84 on
# AVX-512 builds of the kernel).
TRAIN_ARGS = ["--model", "ci", "--data", "synthetic", "--seq-len", "64", "--batch-size", "8",
              "--grad-accum", "2", "--threads", "2", "--matmul", "onednn", "--seed", "11",
              "--lr", "3e-3", "--warmup-steps", "5", "--progress", "none"]
STEPS = 1000000  # never reached by an interrupted attempt
REF_STEPS = 300  # the uninterrupted run the attempts add up to
# What hpod-train acts on (stop, stop, checkpoint now) and what it must shrug off.
TRAIN_SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1]
STORM = [signal.SIGUSR1, signal.SIGWINCH, signal.SIGCHLD, signal.SIGURG, signal.SIGCONT]
HEAP_DAMAGE = re.compile(r"corrupted|free\(\)|malloc|munmap_chunk|double free|Aborted|core dumped")


def losses(path):
    """[(step, loss as written)] in file order; the text, so equal is bit for bit."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                raw = json.loads(line, parse_float=str)
                out.append((int(raw["step"]), raw["loss"]))
    return out


def load_json(path):
    with open(path) as f:
        return json.load(f)


def complete_checkpoints(ckpt):
    """Step numbers of the committed checkpoints (a manifest, no .tmp/.corrupt)."""
    steps = []
    for d in os.listdir(ckpt) if os.path.isdir(ckpt) else []:
        m = re.fullmatch(r"step_(\d+)", d)
        if m and os.path.exists(os.path.join(ckpt, d, "manifest.json")):
            steps.append(int(m.group(1)))
    return sorted(steps)


def http_post(endpoint, target, body):
    """(status, body) of an unsigned AWS JSON 1.1 request."""
    req = urllib.request.Request(endpoint + "/", data=body.encode(), method="POST", headers={
        "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Lines:
    """Collects a pipe's lines on a thread, so a test can wait for one."""

    def __init__(self, pipe):
        self.lines = []
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe):
        with pipe:
            for line in pipe:
                with self._cv:
                    self.lines.append(line)
                    self._cv.notify_all()

    def wait_for(self, needle, timeout):
        with self._cv:
            return self._cv.wait_for(lambda: any(needle in l for l in self.lines), timeout)

    def text(self):
        """Everything, once the pipe has closed (the process has exited)."""
        self._thread.join(timeout=30)
        return "".join(self.lines)


class TrainSignalsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in (TRAIN, DATA, AGENT, hpodtest.HPODD_FAKE):
            if not os.path.exists(b):
                raise unittest.SkipTest(f"{b} not built")
        cls.tmp = tempfile.mkdtemp(prefix="hpod-signals-e2e-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, argv):
        """Popen with stderr collected; killed by PID at the end of the test."""
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)

        def reap():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.addCleanup(reap)
        return proc, Lines(proc.stderr)

    def assert_invariant(self, pid, acted_on, what):
        found = sigstate.problems(pid, acted_on)
        self.assertEqual(found, [], f"{what}: a signal can interrupt library code")

    def test_train_storm_and_stops_at_chosen_moments(self):
        ref_jsonl = os.path.join(self.tmp, "ref.jsonl")
        subprocess.run([TRAIN] + TRAIN_ARGS + ["--max-steps", str(REF_STEPS),
                                               "--metrics-jsonl", ref_jsonl],
                       check=True, capture_output=True, timeout=300)
        ref = dict(losses(ref_jsonl))
        self.assertEqual(len(ref), REF_STEPS)

        ckpt = os.path.join(self.tmp, "storm-ckpt")
        jsonl = os.path.join(self.tmp, "storm.jsonl")
        summary = os.path.join(self.tmp, "storm-summary.json")
        args = TRAIN_ARGS + ["--max-steps", str(STEPS), "--lr-decay-steps", str(REF_STEPS),
                             "--checkpoint-dir", ckpt, "--save-interval", "4", "--keep-last", "3",
                             "--metrics-jsonl", jsonl, "--summary-json", summary]
        seed = int(os.environ.get("HPOD_TEST_SEED", time.time_ns() % 100000))
        rng = random.Random(seed)
        moments = ["mid-step", "during-save", "after-resume", "mid-step", "during-save",
                   "at-start", "mid-step", "after-resume"]
        stopped_at = None
        checked_threads = False
        for i, moment in enumerate(moments):
            sig = signal.SIGTERM if i % 2 == 0 else signal.SIGINT
            where = f"attempt {i} ({moment}, {sig.name}, seed {seed})"
            before = len(losses(jsonl))
            proc, err = self.start([TRAIN] + args)
            self.assertTrue(sigstate.wait_blocked(proc.pid, TRAIN_SIGNALS), where)
            with sigstate.Storm(proc.pid, STORM, interval=0.0005) as storm:
                if moment == "at-start":
                    time.sleep(rng.uniform(0, 0.05))
                elif moment == "after-resume":
                    self.assertTrue(err.wait_for("resumed from", 60), where)
                elif moment == "during-save":
                    self.wait_for_save_in_flight(proc, ckpt, where)
                else:
                    self.wait_for_steps(proc, jsonl, before + rng.randint(3, 12), where)
                    time.sleep(rng.uniform(0, 0.06))  # somewhere inside a step
                if not checked_threads and proc.poll() is None:
                    self.assert_invariant(proc.pid, TRAIN_SIGNALS, "hpod-train")
                    checked_threads = True
                proc.send_signal(sig)
                rc = proc.wait(timeout=120)
            text = err.text()
            self.assertGreater(storm.sent, 0, where)
            self.assertIsNone(HEAP_DAMAGE.search(text), f"{where}: {text}")
            self.assertEqual(rc, 128 + sig, f"{where}: {text}")
            self.assertIn(f"stopped by signal {int(sig)}", text, where)
            self.assertNotIn("warning", text, where)  # no fallback, no failed save
            if stopped_at is not None:
                self.assertIn(f"step_{stopped_at:09d} (step {stopped_at},", text, where)
            s = load_json(summary)
            self.assertEqual(s["stopped_by_signal"], int(sig), where)
            # The final checkpoint is committed and is the newest one: the next
            # run resumes exactly there (and LoadLatest verifies every CRC).
            self.assertEqual(complete_checkpoints(ckpt)[-1], s["end_step"], where)
            self.assertLess(s["end_step"], REF_STEPS - 10, where)
            stopped_at = s["end_step"]
            print(f"{where}: stopped at step {stopped_at} under {storm.sent} storm signals",
                  file=sys.stderr)
        self.assertTrue(checked_threads)

        # The last run goes to the end, still under the storm.
        args[args.index("--max-steps") + 1] = str(REF_STEPS)
        proc, err = self.start([TRAIN] + args)
        self.assertTrue(sigstate.wait_blocked(proc.pid, TRAIN_SIGNALS))
        with sigstate.Storm(proc.pid, STORM, interval=0.0005):
            rc = proc.wait(timeout=300)
        text = err.text()
        self.assertEqual(rc, 0, text)
        self.assertIn(f"(step {stopped_at},", text)
        s = load_json(summary)
        self.assertEqual(s["end_step"], REF_STEPS)
        # SIGUSR1 asked for checkpoints between the interval ones.
        self.assertGreater(len(s["checkpoint"]["saves"]), 1 + (REF_STEPS - stopped_at) // 4)

        # Every step ran once (a stop between micro-batches drops the partial
        # step and logs nothing) and equals the uninterrupted run's loss.
        got = losses(jsonl)
        self.assertEqual([step for step, _ in got], list(range(1, REF_STEPS + 1)))
        for step, loss in got:
            self.assertEqual(loss, ref[step], f"step {step} (seed {seed})")

    def wait_for_steps(self, proc, jsonl, n, where, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(losses(jsonl)) >= n:
                return
            self.assertIsNone(proc.poll(), f"{where}: hpod-train exited early")
            time.sleep(0.005)
        self.fail(f"{where}: {n} steps not logged in {timeout} s")

    def wait_for_save_in_flight(self, proc, ckpt, where, timeout=120):
        """Returns while the async writer has a step_N.tmp-* directory open."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if any(".tmp" in d for d in os.listdir(ckpt)):
                    return
            except FileNotFoundError:
                pass
            self.assertIsNone(proc.poll(), f"{where}: hpod-train exited early")
            time.sleep(0.0005)  # a save of this model takes a few ms
        self.fail(f"{where}: no save seen in flight in {timeout} s")

    def test_train_usr1_saves_a_checkpoint_and_goes_on(self):
        ckpt = os.path.join(self.tmp, "usr1-ckpt")
        jsonl = os.path.join(self.tmp, "usr1.jsonl")
        summary = os.path.join(self.tmp, "usr1-summary.json")
        proc, err = self.start(
            [TRAIN] + TRAIN_ARGS + ["--max-steps", str(STEPS), "--checkpoint-dir", ckpt,
                                    "--metrics-jsonl", jsonl, "--summary-json", summary])
        self.wait_for_steps(proc, jsonl, 3, "usr1")
        proc.send_signal(signal.SIGUSR1)
        deadline = time.time() + 60
        while not complete_checkpoints(ckpt) and time.time() < deadline:
            if proc.poll() is not None:
                self.fail(f"hpod-train exited {proc.returncode}: {err.text()}")
            time.sleep(0.01)
        saved = complete_checkpoints(ckpt)
        self.assertEqual(len(saved), 1, f"SIGUSR1 made no checkpoint: {saved} {err.lines}")
        self.wait_for_steps(proc, jsonl, saved[0] + 3, "usr1")  # and training went on
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=60), 128 + signal.SIGTERM)
        s = load_json(summary)
        steps = [save["step"] for save in s["checkpoint"]["saves"]]
        self.assertEqual(steps, [saved[0], s["end_step"]])
        self.assertIn("checkpoint requested by SIGUSR1", err.text())

    def test_data_threads_have_no_handlers_and_outputs_survive_a_storm(self):
        texts = sorted(os.path.join(TEXT, t) for t in os.listdir(TEXT) if t.endswith(".txt"))
        inputs = sum((["--input", t] for t in texts * 40), [])
        tok = os.path.join(self.tmp, "tok")
        subprocess.run([DATA, "train-tokenizer", "--vocab-size", "400", "--output", tok]
                       + sum((["--input", t] for t in texts), []),
                       check=True, capture_output=True, timeout=300)
        quiet = os.path.join(self.tmp, "quiet.bin")
        subprocess.run([DATA, "tokenize", "--tokenizer", tok + ".model", "--output", quiet,
                        "--threads", "2"] + inputs, check=True, capture_output=True, timeout=300)
        stormy = os.path.join(self.tmp, "stormy.bin")
        proc = subprocess.Popen([DATA, "tokenize", "--tokenizer", tok + ".model", "--output",
                                 stormy, "--threads", "2"] + inputs,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # hpod-data acts on no signal: SIGTERM/SIGINT end it by their default
        # action, and its outputs are written atomically.
        with sigstate.Storm(proc.pid, STORM[1:], interval=0.0005):
            time.sleep(0.05)
            if proc.poll() is None:
                self.assert_invariant(proc.pid, [], "hpod-data")
            _, err = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, err)
        with open(quiet, "rb") as a, open(stormy, "rb") as b:
            self.assertEqual(a.read(), b.read(), "the storm changed the shard")

    def test_hpodd_survives_a_storm_and_stops_once(self):
        d = hpodtest.Daemon(pending_ms=50)
        try:
            d.start()
            with sigstate.Storm(d.proc.pid, STORM[1:] + [signal.SIGPIPE], interval=0.0005):
                self.assert_invariant(d.proc.pid, [signal.SIGTERM, signal.SIGINT], "hpodd")
                for i in range(30):
                    # An unsigned request: hpodd answers it with the AWS error
                    # shape, through the same HTTP threads a signed one takes.
                    code, body = http_post(d.endpoint, "SageMaker.ListClusters", "{}")
                    self.assertEqual(code, 403, body)
                    self.assertIn("MissingAuthenticationToken", body)
                self.assertIsNone(d.proc.poll(), "hpodd died in the storm")
            with sigstate.Storm(d.proc.pid, [signal.SIGTERM, signal.SIGINT], interval=0.0005):
                rc = d.proc.wait(timeout=60)
            self.assertEqual(rc, 0)
            with open(os.path.join(d.root, "hpodd.out")) as f:
                log = f.read()
            self.assertEqual(len(re.findall(r"received SIG\w+, shutting down", log)), 1, log)
        finally:
            d.cleanup()

    def test_agent_survives_a_storm_and_stops_once(self):
        root = os.path.join(self.tmp, "agent")
        os.makedirs(root)
        config = os.path.join(root, "agent.json")
        with open(config, "w") as f:
            # No hpodd listens there: the agent retries its connection, as it
            # does while hpodd restarts.
            json.dump({"instance_id": "i-0123456789abcdef0",
                       "endpoint": "unix://" + os.path.join(root, "none.sock"),
                       "state_dir": os.path.join(root, "state"), "bootstrap_token": "bt-0"}, f)
        proc, err = self.start([AGENT, "--config", config])
        self.assertTrue(err.wait_for("starting", 30), "the agent did not start")
        with sigstate.Storm(proc.pid, STORM[1:] + [signal.SIGPIPE], interval=0.0005):
            time.sleep(0.5)
            self.assertIsNone(proc.poll(), "hpod-agent died in the storm")
            self.assert_invariant(proc.pid, [signal.SIGTERM, signal.SIGINT], "hpod-agent")
        with sigstate.Storm(proc.pid, [signal.SIGTERM, signal.SIGINT], interval=0.0005):
            rc = proc.wait(timeout=60)
        text = err.text()
        self.assertEqual(rc, 0, text)
        self.assertEqual(len(re.findall(r"received SIG\w+, stopping", text)), 1, text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
