#!/usr/bin/env python3
"""Checkpoint write throughput: hpod's sharded writer vs dd conv=fdatasync.

Both write the same bytes to the same file system in the same run, in turn
(dd, hpod world 1, hpod world 2, dd, ...), and the medians and the median of
pairwise ratios are printed. hpod's figure is a whole save: every rank's part
written and fdatasynced in parallel, the manifest, the renames and directory
fsyncs until rank 0's commit is durable (build/src/train/ckpt/train_ckpt_bench,
ranks as threads). Two regimes:

  fresh   nothing is deleted while measuring (each save and each dd file is
          kept until the end): the write path itself;
  steady  saves back to back with --keep-last 2, and dd deleting its file of
          two rounds ago, so both pay for freeing blocks (on ext4 mounted with
          `discard`, a delete is TRIMmed at the next journal commit, which the
          next fdatasync waits for).

  bench/ckpt_bench.py [--quick] [--mb 128] [--reps 8] [--dir DIR]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BENCH = os.path.join(TOP, "build", "src", "train", "ckpt", "train_ckpt_bench")


def dd(path, mb):
    """MB/s (1e6 bytes) of one dd of `mb` MB with conv=fdatasync."""
    count = max(1, int(mb * 1e6 / (4 << 20)))
    p = subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=4M", "count=%d" % count,
                        "conv=fdatasync"], capture_output=True, text=True, check=True)
    last = p.stderr.strip().splitlines()[-1]
    nbytes = int(last.split()[0])
    secs = float(last.split("copied,")[1].split()[0])
    return nbytes / 1e6 / secs


def hpod(path, mb, world, saves=1, keep=0):
    """MB/s of each save (its write: from Save() to the durable commit, less the
    snapshot memcpy, which is the training loop's stall)."""
    p = subprocess.run([BENCH, path, str(mb), str(saves), str(world), str(keep)],
                       capture_output=True, text=True, check=True)
    out = []
    for line in p.stdout.splitlines():
        j = json.loads(line)
        if "save" in j:
            out.append(j["bytes"] / 1e6 / (j["seconds"] - j["stall_s"]))
    return out


def summary(name, xs):
    return "%-22s median %6.0f MB/s  (min %4.0f, max %4.0f, n=%d)" % (
        name, statistics.median(xs), min(xs), max(xs), len(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mb", type=float, default=128)
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--dir", default=os.path.join(TOP, "build"))
    a = ap.parse_args()
    if a.quick:
        a.reps = 3
    if not os.path.exists(BENCH):
        print("SKIP: %s not built" % BENCH)
        return 77
    d = tempfile.mkdtemp(prefix="hpod-ckpt-bench-", dir=a.dir)
    try:
        fs = subprocess.run(["stat", "-f", "-c", "%T", d], capture_output=True,
                            text=True).stdout.strip()
        mounts = subprocess.run(["findmnt", "-n", "-o", "OPTIONS", "-T", d], capture_output=True,
                                text=True).stdout.strip()
        print("file system %s (%s); %.0f MB per save, %d rounds" % (fs, mounts, a.mb, a.reps))
        res = {"dd": [], "hpod1": [], "hpod2": []}
        for i in range(a.reps):
            res["dd"].append(dd(os.path.join(d, "dd%d" % i), a.mb))
            res["hpod1"] += hpod(os.path.join(d, "w1-%d" % i), a.mb, 1)
            res["hpod2"] += hpod(os.path.join(d, "w2-%d" % i), a.mb, 2)
        print("fresh (nothing deleted while measuring):")
        print("  " + summary("dd conv=fdatasync", res["dd"]))
        for w in (1, 2):
            xs = res["hpod%d" % w]
            ratios = [x / y for x, y in zip(xs, res["dd"])]
            print("  " + summary("hpod, %d rank(s)" % w, xs) +
                  "  hpod/dd: median of pairs %.2f" % statistics.median(ratios))
        shutil.rmtree(d)
        os.makedirs(d)
        # Steady state: both delete as they go.
        steady = {"dd": [], "hpod1": [], "hpod2": []}
        for i in range(a.reps):
            steady["dd"].append(dd(os.path.join(d, "dd%d" % i), a.mb))
            if i >= 2:
                os.unlink(os.path.join(d, "dd%d" % (i - 2)))
        for w in (1, 2):
            steady["hpod%d" % w] = hpod(os.path.join(d, "s%d" % w), a.mb, w, saves=a.reps, keep=2)
        print("steady (keep the last 2, deleting as they go):")
        print("  " + summary("dd conv=fdatasync", steady["dd"]))
        for w in (1, 2):
            xs = steady["hpod%d" % w]
            print("  " + summary("hpod, %d rank(s)" % w, xs) + "  hpod/dd: medians %.2f" % (
                statistics.median(xs) / statistics.median(steady["dd"])))
        r1 = statistics.median([x / y for x, y in zip(res["hpod1"], res["dd"])])
        r2 = statistics.median([x / y for x, y in zip(res["hpod2"], res["dd"])])
        print("goal: hpod >= 0.80 x dd (fresh): 1 rank %.2f, 2 ranks %.2f" % (r1, r2))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
