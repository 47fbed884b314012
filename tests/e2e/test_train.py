"""End-to-end: hpod-data and hpod-train as a user runs them.

Covers what only whole runs can show: exact resume after kill -9 (also
mid-save), the clean stop on SIGTERM, the fallback from a corrupt newest
checkpoint, the loss on a real corpus dropping well below the unigram
baseline, --dry-run / --help / bad-config errors, the summary JSON, the
TensorBoard file, and HF export → init.

The models are the 0.14M-parameter "ci" preset, so every run takes seconds.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BIN_DIR = os.environ.get(
    "HPOD_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
TRAIN = os.path.join(BIN_DIR, "cmd", "hpod-train", "hpod-train")
DATA = os.path.join(BIN_DIR, "cmd", "hpod-data", "hpod-data")
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TEXT = os.path.join(SRC, "src", "train", "data", "testdata")

# One configuration for every run that is compared step by step.
BASE = ["--model", "ci", "--seq-len", "32", "--batch-size", "4", "--seed", "7",
        "--lr", "3e-3", "--warmup-steps", "5", "--lr-decay-steps", "40", "--threads", "1",
        "--progress", "lines"]


def run(args, check=True, timeout=300, **kw):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def load_json(path):
    with open(path) as f:
        return json.load(f)


def ledger(path):
    """The goodput ledger's events, in order (every line must be whole)."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def losses(path):
    """step -> loss as written (JSON text), so equality is bit-for-bit."""
    out = {}
    with open(path) as f:
        for line in f:
            raw = json.loads(line, parse_float=str)
            out[int(raw["step"])] = raw["loss"]
    return out


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in (TRAIN, DATA):
            if not os.path.exists(b):
                raise unittest.SkipTest(f"{b} not built")
        cls.tmp = tempfile.mkdtemp(prefix="hpod-train-e2e-")
        texts = sorted(glob.glob(os.path.join(TEXT, "*.txt")))
        assert texts, f"no test text in {TEXT}"
        prefix = os.path.join(cls.tmp, "tok")
        run([DATA, "train-tokenizer", "--vocab-size", "400", "--output", prefix]
            + sum((["--input", t] for t in texts), []))
        cls.tokenizer = prefix + ".model"
        cls.shard = os.path.join(cls.tmp, "data.bin")
        run([DATA, "tokenize", "--tokenizer", cls.tokenizer, "--output", cls.shard]
            + sum((["--input", t] for t in texts), []))
        # The uninterrupted reference run every resumed run is compared with.
        cls.ref = cls.train_args(cls, "ref", 40)
        run([TRAIN] + cls.ref)
        cls.ref_losses = losses(os.path.join(cls.tmp, "ref.jsonl"))
        assert len(cls.ref_losses) == 40, cls.ref_losses

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def train_args(self, name, steps, *extra):
        return BASE + ["--data", self.shard, "--tokenizer", self.tokenizer,
                       "--max-steps", str(steps),
                       "--metrics-jsonl", os.path.join(self.tmp, name + ".jsonl")] + list(extra)

    def wait_for_step(self, proc, jsonl, step, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(jsonl) and max(losses(jsonl), default=0) >= step:
                return
            if proc.poll() is not None:
                self.fail(f"hpod-train exited {proc.returncode} before step {step}")
            time.sleep(0.01)
        self.fail(f"step {step} not reached in {timeout} s")

    def assert_matches_reference(self, got):
        for step, loss in got.items():
            self.assertEqual(loss, self.ref_losses[step], f"step {step}")

    def test_exact_resume_after_kill_9(self):
        """kill -9 at three points (saving every step, so mid-save too), resume
        each time: every step's loss equals the uninterrupted run's, bit for bit."""
        ckpt = os.path.join(self.tmp, "kill-ckpt")
        jsonl = os.path.join(self.tmp, "kill.jsonl")
        args = self.train_args("kill", 40, "--checkpoint-dir", ckpt, "--save-interval", "1",
                               "--keep-last", "2")
        for kill_at in (7, 19, 31):
            proc = subprocess.Popen([TRAIN] + args, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            self.wait_for_step(proc, jsonl, kill_at)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        summary = os.path.join(self.tmp, "kill-summary.json")
        p = run([TRAIN] + args + ["--summary-json", summary])
        self.assertIn("resumed from", p.stderr)
        # Steps after a kill were run twice (once lost); the last write wins and
        # every write must equal the reference.
        seen = {}
        with open(jsonl) as f:
            for line in f:
                raw = json.loads(line, parse_float=str)
                step = int(raw["step"])
                self.assertEqual(raw["loss"], self.ref_losses[step], f"step {step}")
                seen[step] = raw["loss"]
        self.assertEqual(sorted(seen), list(range(1, 41)))
        # The goodput ledger: one attempt per process, each step logged once per
        # run of it, and the steps re-run after each kill exactly those the
        # next attempt resumed before.
        events = ledger(os.path.join(ckpt, "goodput.jsonl"))
        attempts = []
        for e in events:
            if e["event"] == "start":
                attempts.append({"resumed": e["resumed_step"], "steps": []})
            elif e["event"] == "step":
                attempts[-1]["steps"].append(e["step"])
        self.assertEqual(len(attempts), 4)
        self.assertEqual(attempts[0]["resumed"], 0)
        for a, kill_at in zip(attempts, (7, 19, 31, 40)):
            self.assertEqual(a["steps"], list(range(a["resumed"] + 1, a["steps"][-1] + 1)))
            self.assertGreaterEqual(a["steps"][-1], kill_at)
        self.assertEqual([e["status"] for e in events if e["event"] == "end"], ["completed"])
        rerun = sum(max(0, a["steps"][-1] - b["resumed"]) for a, b in zip(attempts, attempts[1:]))
        g = load_json(summary)["goodput"]
        self.assertEqual(g["steps_rerun"], rerun)
        self.assertEqual([x["steps_rerun"] for x in g["gaps"]],
                         [max(0, a["steps"][-1] - b["resumed"])
                          for a, b in zip(attempts, attempts[1:])])
        self.assertEqual(g["useful_steps"], 40)
        self.assertEqual(g["final_step"], 40)
        self.assertEqual([x["status"] for x in g["attempts"]], [None, None, None, "completed"])
        # keep_last 2: only two complete checkpoints remain, the newest at 40.
        done = sorted(d for d in os.listdir(ckpt) if d.startswith("step_") and ".tmp" not in d)
        self.assertEqual(len(done), 2, done)
        self.assertTrue(done[-1].endswith("40"), done)

    def test_exact_resume_with_two_threads_and_accumulation(self):
        """The same with 2 threads and 2 micro-batches per step: compared with an
        uninterrupted run of that configuration (results depend on the thread
        count, by design, not on interruptions)."""
        extra = ["--threads", "2", "--grad-accum", "2"]
        run([TRAIN] + self.train_args("ref2", 20, *extra))
        ref2 = losses(os.path.join(self.tmp, "ref2.jsonl"))
        ckpt = os.path.join(self.tmp, "kill2-ckpt")
        jsonl = os.path.join(self.tmp, "kill2.jsonl")
        args = self.train_args("kill2", 20, *extra, "--checkpoint-dir", ckpt,
                               "--save-interval", "1")
        proc = subprocess.Popen([TRAIN] + args, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        self.wait_for_step(proc, jsonl, 9)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        run([TRAIN] + args)
        with open(jsonl) as f:
            for line in f:
                raw = json.loads(line, parse_float=str)
                self.assertEqual(raw["loss"], ref2[int(raw["step"])], raw["step"])
        self.assertEqual(max(losses(jsonl)), 20)

    def test_resume_refuses_what_would_not_continue_the_run(self):
        ckpt = os.path.join(self.tmp, "guard-ckpt")
        run([TRAIN] + self.train_args("guard", 5, "--checkpoint-dir", ckpt))
        # Other data: consumed_samples would point into a different stream.
        p = run([TRAIN] + BASE + ["--data", "synthetic", "--max-steps", "10",
                                  "--checkpoint-dir", ckpt], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("other data", p.stderr)
        # A fresh run among an old run's checkpoints.
        p = run([TRAIN] + self.train_args("guard2", 5, "--checkpoint-dir", ckpt, "--no-resume"),
                check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("already holds checkpoints", p.stderr)
        # A changed schedule resumes, and says so.
        p = run([TRAIN] + self.train_args("guard3", 8, "--checkpoint-dir", ckpt, "--lr", "1e-3"))
        self.assertIn("changed schedule: lr was 0.003", p.stderr)

    def test_sigterm_saves_and_resumes(self):
        ckpt = os.path.join(self.tmp, "term-ckpt")
        jsonl = os.path.join(self.tmp, "term.jsonl")
        summary = os.path.join(self.tmp, "term-summary.json")
        args = self.train_args("term", 40, "--checkpoint-dir", ckpt,
                               "--summary-json", summary)
        proc = subprocess.Popen([TRAIN] + args, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        self.wait_for_step(proc, jsonl, 12)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("stopped by signal 15", err)
        s = load_json(summary)
        self.assertEqual(s["stopped_by_signal"], 15)
        stopped = s["end_step"]
        self.assertGreaterEqual(stopped, 12)
        self.assertEqual(len(s["checkpoint"]["saves"]), 1)
        self.assertEqual(s["checkpoint"]["saves"][0]["step"], stopped)
        # The goodput ledger (default: in the checkpoint directory).
        events = ledger(os.path.join(ckpt, "goodput.jsonl"))
        self.assertEqual(events[0]["event"], "start")
        self.assertEqual(events[0]["resumed_step"], 0)
        self.assertLessEqual(events[0]["process_start"], events[0]["time"])
        self.assertEqual([e["step"] for e in events if e["event"] == "step"],
                         list(range(1, stopped + 1)))
        self.assertEqual([e["step"] for e in events if e["event"] == "checkpoint"], [stopped])
        self.assertEqual(events[-1], {**events[-1], "event": "end", "step": stopped,
                                      "status": "interrupted"})
        self.assertEqual(s["goodput"]["final_step"], stopped)
        run([TRAIN] + args)
        s = load_json(summary)
        self.assertEqual(s["resumed_from_step"], stopped)
        self.assertEqual(s["end_step"], 40)
        self.assertEqual(s["steps_run"], 40 - stopped)
        # Two attempts; the stop saved its last step, so nothing was re-run.
        g = s["goodput"]
        self.assertEqual(len(g["attempts"]), 2)
        self.assertEqual(g["attempts"][1]["resumed_step"], stopped)
        self.assertEqual(g["steps_rerun"], 0)
        self.assertEqual(g["gaps"][0]["steps_rerun"], 0)
        self.assertEqual(g["useful_steps"], 40)
        self.assertEqual(g["final_step"], 40)
        self.assertGreater(g["goodput"], 0)
        self.assertLessEqual(g["goodput"], 1)
        self.assert_matches_reference(losses(jsonl))

    def test_corrupt_newest_checkpoint_falls_back(self):
        ckpt = os.path.join(self.tmp, "corrupt-ckpt")
        args = self.train_args("corrupt", 20, "--checkpoint-dir", ckpt,
                               "--save-interval", "5", "--keep-last", "3")
        run([TRAIN] + args)
        newest = os.path.join(ckpt, "step_000000020")
        self.assertTrue(os.path.isdir(newest), os.listdir(ckpt))
        with open(os.path.join(newest, "part-00000-of-00001.bin"), "r+b") as f:
            f.seek(4096)
            b = f.read(1)
            f.seek(4096)
            f.write(bytes([b[0] ^ 0x40]))
        jsonl = os.path.join(self.tmp, "corrupt2.jsonl")
        args2 = self.train_args("corrupt2", 25, "--checkpoint-dir", ckpt)
        p = run([TRAIN] + args2)
        self.assertIn("step_000000020", p.stderr)
        self.assertIn("warning", p.stderr)
        self.assertIn("step 15", p.stderr)
        got = losses(jsonl)
        self.assertEqual(sorted(got), list(range(16, 26)))
        self.assert_matches_reference(got)
        # The corrupt one was set aside, not left to be tried again.
        self.assertTrue(os.path.isdir(newest + ".corrupt"))
        self.assertIn("set aside", p.stderr)

    def test_summary_and_tensorboard(self):
        tb = os.path.join(self.tmp, "tb")
        summary = os.path.join(self.tmp, "summary.json")
        p = run([TRAIN] + self.train_args("tb", 6, "--tensorboard-dir", tb,
                                          "--summary-json", summary))
        files = glob.glob(os.path.join(tb, "events.out.tfevents.*"))
        self.assertEqual(len(files), 1, files)
        self.assertGreater(os.path.getsize(files[0]), 6 * 9 * 20)
        s = load_json(summary)
        self.assertEqual(s["steps_run"], 6)
        self.assertEqual(s["tokens"], 6 * 4 * 32)
        self.assertEqual(s["warmup"]["steps"], 2)
        self.assertEqual(s["throughput"]["steps"], 4)
        self.assertGreater(s["throughput"]["tokens_per_s"], 0)
        self.assertEqual(s["final_loss"], float(self.ref_losses[6]))
        # The progress line of the seed, one line per update in a job log.
        last = [l for l in p.stderr.replace("\r", "\n").splitlines() if "global_step" in l][-1]
        self.assertRegex(last, r"^Epoch \d+: 100%\|█+\| 6/6 \[\d\d:\d\d<00:00, +[0-9.]+(it/s|s/it), "
                               r"loss=[0-9.e+-]+, reduced_train_loss=[0-9.]+, gradient_norm=[0-9.e+-]+, "
                               r"parameter_norm=[0-9.]+, global_step=6\.000, consumed_samples=24\.00, "
                               r"iteration_time=[0-9.]+\]$")

    def test_dry_run_help_and_errors(self):
        p = run([TRAIN, "--model", "15m", "--data", "synthetic", "--dry-run"])
        self.assertIn("7.16M", p.stdout)
        self.assertIn("45.6 MFLOP/token", p.stdout)
        p = run([TRAIN, "--help"])
        for flag in ("--save-interval", "--keep-last", "--summary-json", "--init-from-hf",
                     "--export-hf", "--dry-run", "--matmul", "--grad-accum"):
            self.assertIn(flag, p.stdout)
        cases = [
            ([TRAIN, "--data", "synthetic", "--seq-len", "0"], "--seq-len"),
            ([TRAIN, "--data", "synthetic", "--matmul", "mkl"], "--matmul"),
            ([TRAIN, "--model", "ci", "--data", "synthetic", "--seq-len", "9999"], "max_seq_len"),
            ([TRAIN, "--model", "nope", "--data", "synthetic"], "preset"),
            ([TRAIN, "--model", "ci"], "--data"),
            ([TRAIN, "--model", "ci", "--data", "/nonexistent/x.bin"], "/nonexistent/x.bin"),
        ]
        cfg = os.path.join(self.tmp, "bad.json")
        with open(cfg, "w") as f:
            json.dump({"model": {"dim": 64, "n_heads": 5}, "data": "synthetic"}, f)
        cases.append(([TRAIN, "--config", cfg], "n_heads"))
        cfg2 = os.path.join(self.tmp, "bad2.json")
        with open(cfg2, "w") as f:
            json.dump({"save_intervall": 5}, f)
        cases.append(([TRAIN, "--config", cfg2], "save_intervall"))
        cfg3 = os.path.join(self.tmp, "bad3.json")
        with open(cfg3, "w") as f:
            json.dump({"max_steps": "ten"}, f)
        cases.append(([TRAIN, "--config", cfg3], "max_steps"))
        for args, needle in cases:
            p = run(args, check=False)
            self.assertNotEqual(p.returncode, 0, args)
            lines = p.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, (args, p.stderr))
            self.assertIn(needle, lines[0], args)

    def test_hf_export_then_init(self):
        out = os.path.join(self.tmp, "hf")
        run([TRAIN] + self.train_args("hf1", 30, "--export-hf", out))
        for name in ("config.json", "model.safetensors", "tokenizer.model"):
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        cfg = load_json(os.path.join(out, "config.json"))
        self.assertEqual(cfg["model_type"], "llama")
        self.assertEqual(cfg["hidden_size"], 64)
        # A run initialised from the export starts where the first ended: its
        # first loss is far below a fresh model's (about ln 512 = 6.2).
        jsonl = os.path.join(self.tmp, "hf2.jsonl")
        run([TRAIN, "--init-from-hf", out, "--data", self.shard,
             "--seq-len", "32", "--batch-size", "4", "--max-steps", "1",
             "--metrics-jsonl", jsonl, "--progress", "none"])
        first = float(losses(jsonl)[1])
        self.assertLess(first, float(self.ref_losses[1]) - 0.5)


@unittest.skipUnless(shutil.which("bible"), "bible-kjv not installed (scripts/install-deps.sh)")
class RealCorpusTest(unittest.TestCase):
    def test_loss_drops_below_unigram_baseline(self):
        tmp = tempfile.mkdtemp(prefix="hpod-corpus-e2e-")
        try:
            run([DATA, "corpus", "--output", tmp, "--no-austen"])
            kjv = os.path.join(tmp, "kjv.txt")
            self.assertGreater(os.path.getsize(kjv), 4_000_000)
            run([DATA, "train-tokenizer", "--input", kjv, "--vocab-size", "512",
                 "--output", os.path.join(tmp, "tok")])
            shard = os.path.join(tmp, "kjv.bin")
            run([DATA, "tokenize", "--tokenizer", os.path.join(tmp, "tok.model"),
                 "--input", kjv, "--output", shard])
            info = json.loads(run([DATA, "info", shard, "--output", "json"]).stdout)
            unigram = info["unigram_entropy_nats"]
            jsonl = os.path.join(tmp, "m.jsonl")
            run([TRAIN, "--model", "ci", "--data", shard, "--seq-len", "64", "--batch-size", "8",
                 "--max-steps", "300", "--lr", "1e-3", "--warmup-steps", "10",
                 "--metrics-jsonl", jsonl, "--progress", "none"])
            got = losses(jsonl)
            last = sum(float(got[s]) for s in range(281, 301)) / 20
            print(f"unigram entropy {unigram:.3f} nats; loss {float(got[1]):.3f} -> {last:.3f}",
                  file=sys.stderr)
            self.assertLess(last, unigram - 0.5)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
