"""hpod_goodput writes hpod-train's ledger format (src/base/goodput.h)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpod_goodput  # noqa: E402


class LedgerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "goodput.jsonl")
        for k in ("HPOD_GOODPUT_FILE", "RANK", "SLURM_PROCID", "SLURM_JOB_ID",
                  "HPOD_AUTO_RESUME_ATTEMPT", "WORLD_SIZE", "SLURM_NTASKS"):
            os.environ.pop(k, None)

    def lines(self):
        with open(self.path) as f:
            return [json.loads(l) for l in f.read().splitlines() if l]

    def test_events_in_hpod_trains_shape(self):
        os.environ.update({"HPOD_GOODPUT_FILE": self.path, "SLURM_PROCID": "0",
                           "SLURM_JOB_ID": "12", "HPOD_AUTO_RESUME_ATTEMPT": "1",
                           "SLURM_NTASKS": "3"})
        ledger = hpod_goodput.Ledger()
        self.assertTrue(ledger.enabled)
        ledger.start(resumed_step=40, checkpoint_load_s=0.05, rendezvous_s=0.3)
        ledger.step(41, 0.125)
        ledger.checkpoint(60, 0.02)
        ledger.end(60)
        ledger.end(60, "failed")  # once
        ev = self.lines()
        self.assertEqual([e["event"] for e in ev], ["start", "step", "checkpoint", "end"])
        s = ev[0]
        self.assertEqual((s["job_id"], s["attempt"], s["restart"], s["world_size"],
                          s["resumed_step"]), ("12", 1, 0, 3, 40))
        # The process began before the start event, and not long before this test.
        self.assertLessEqual(s["process_start"], s["time"])
        self.assertGreater(s["process_start"], time.time() - 24 * 3600)
        self.assertEqual(ev[1], {"event": "step", "time": ev[1]["time"], "step": 41,
                                 "step_s": 0.125})
        self.assertEqual(ev[3]["status"], "completed")
        for e in ev:
            self.assertIsInstance(e["time"], float)

    def test_other_ranks_and_no_path_write_nothing(self):
        os.environ["HPOD_GOODPUT_FILE"] = self.path
        os.environ["RANK"] = "2"
        ledger = hpod_goodput.Ledger()
        ledger.start()
        ledger.step(1, 0.1)
        self.assertFalse(os.path.exists(self.path))
        del os.environ["HPOD_GOODPUT_FILE"]
        os.environ["RANK"] = "0"
        self.assertFalse(hpod_goodput.Ledger().enabled)

    def test_a_torn_line_is_ended_and_a_retry_appends(self):
        with open(self.path, "w") as f:
            f.write('{"event":"start","time":1.0,"process_start":0.5}\n{"event":"st')
        ledger = hpod_goodput.Ledger(self.path, rank=0)
        ledger.start(resumed_step=20)
        with open(self.path) as f:
            text = f.read()
        self.assertEqual(text.count("\n"), 3)
        self.assertIn('{"event":"st\n{"event":"start"', text)

    def test_an_unwritable_path_is_one_warning_not_an_error(self):
        r = subprocess.run(
            [sys.executable, "-c",
             "import hpod_goodput as g; l = g.Ledger('/nonexistent/dir/g.jsonl', rank=0); "
             "l.start(); l.step(1, 0.1); print(l.enabled)"],
            capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "False")
        self.assertEqual(r.stderr.count("hpod_goodput: warning"), 1, r.stderr)


if __name__ == "__main__":
    unittest.main()
