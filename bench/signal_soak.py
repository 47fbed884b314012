#!/usr/bin/env python3
"""Soak: hpod-train stopped by SIGTERM at random moments under a signal storm,
against the same binary with one signal handler added (the hazard it avoids).

Every run trains the ci model (weight-gradient GEMMs with K = batch x seq =
512, 2 threads, gradient accumulation), resuming from the previous run's
checkpoint, while a thread sends about 1,000 signals a second; after a random
0.2-1.5 s it gets SIGTERM. A clean run exits 143 with its final checkpoint
saved. Two sides, measured in the same run on the same machine:

  hpod      the storm hpod-train acts on or must shrug off (SIGUSR1 = save a
            checkpoint now, SIGWINCH, SIGCHLD, SIGURG): hpod-train reads them
            on its watcher thread, no thread is ever interrupted.
  handler   an LD_PRELOADed no-op SIGUSR2 handler (built here with cc) and a
            SIGUSR2 storm: what any sigaction() in the process would do. With
            --matmul onednn it aborts ("corrupted size vs. prev_size",
            "malloc(): unaligned tcache chunk"): uxlfoundation/oneDNN#4845.

  bench/signal_soak.py [--quick] [--runs N] [--matmul onednn|openblas]
                       [--binary build/cmd/hpod-train/hpod-train]

Exit status 0 when every hpod run was clean (the handler side is the peer: its
failures are the point). 77 (skipped) without the binary or cc.
"""
import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import sigstate  # noqa: E402

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ARGS = ["--model", "ci", "--data", "synthetic", "--seq-len", "64", "--batch-size", "8",
        "--grad-accum", "2", "--threads", "2", "--seed", "11", "--progress", "none",
        "--max-steps", "100000000", "--save-interval", "7"]
ACTED_ON = [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1]
STORM = [signal.SIGUSR1, signal.SIGWINCH, signal.SIGCHLD, signal.SIGURG]
NOOP_HANDLER = r"""
#include <signal.h>
static void noop(int s) { (void)s; }
__attribute__((constructor)) static void init(void) {
  struct sigaction sa = {0};
  sa.sa_handler = noop;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, 0);
}
"""


def soak(binary, matmul, runs, rng, tmp, preload=None):
    """Returns (Counter of outcomes, signals sent, first failure lines)."""
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = preload
    storm = [signal.SIGUSR2] if preload else STORM
    outcomes, sent, failures = collections.Counter(), 0, []
    ckpt = os.path.join(tmp, "ckpt-handler" if preload else "ckpt-hpod")
    for i in range(runs):
        p = subprocess.Popen([binary] + ARGS + ["--matmul", matmul, "--checkpoint-dir", ckpt],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        # Until the process blocks its signals a signal takes its default
        # action: the dynamic loader's window, which no program can close.
        if not preload:
            sigstate.wait_blocked(p.pid, ACTED_ON)
        else:
            time.sleep(0.1)
        with sigstate.Storm(p.pid, storm, interval=0.0005) as st:
            time.sleep(rng.uniform(0.2, 1.5))
            p.send_signal(signal.SIGTERM)
            try:
                _, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                err += "\n(hung: killed after 120 s)"
        sent += st.sent
        if p.returncode == 143 and "checkpoint saved" in err:
            outcomes["clean"] += 1
            continue
        outcomes[f"rc {p.returncode}"] += 1
        last = [line for line in err.splitlines() if line.strip()][-1:] or ["(no output)"]
        failures.append(f"run {i}: rc {p.returncode}: {last[0]}")
        shutil.rmtree(ckpt, ignore_errors=True)  # the next run starts clean
    return outcomes, sent, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10 runs a side instead of 40")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--binary", default=os.path.join(TOP, "build/cmd/hpod-train/hpod-train"))
    ap.add_argument("--matmul", default="onednn", choices=["onednn", "openblas"])
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args()
    runs = a.runs or (10 if a.quick else 40)
    if not os.path.exists(a.binary) or not shutil.which("cc"):
        print(f"SKIP: needs {a.binary} and cc")
        return 77
    tmp = tempfile.mkdtemp(prefix="hpod-signal-soak-")
    try:
        src = os.path.join(tmp, "noop.c")
        with open(src, "w") as f:
            f.write(NOOP_HANDLER)
        so = os.path.join(tmp, "noop.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", src, "-o", so], check=True)
        rows = []
        for side, preload in (("hpod", None), ("handler", so)):
            t0 = time.time()
            outcomes, sent, failures = soak(a.binary, a.matmul, runs, random.Random(a.seed), tmp,
                                            preload)
            for line in failures[:5]:
                print(f"  {side} {line}")
            rows.append((side, outcomes, sent, time.time() - t0))
        print(f"\nhpod-train --matmul {a.matmul}, {runs} runs a side, seed {a.seed}:")
        print(f"{'side':<8} {'clean':>6} {'failed':>6} {'signals':>8} {'time':>7}  outcomes")
        for side, outcomes, sent, secs in rows:
            failed = runs - outcomes["clean"]
            detail = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            print(f"{side:<8} {outcomes['clean']:>6} {failed:>6} {sent:>8} {secs:>6.0f}s  {detail}")
        hpod_clean = rows[0][1]["clean"]
        handler_clean = rows[1][1]["clean"]
        print(f"clean runs, hpod / handler: {hpod_clean}/{handler_clean}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if hpod_clean == runs else 1


if __name__ == "__main__":
    sys.exit(main())
