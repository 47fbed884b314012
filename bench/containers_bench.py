#!/usr/bin/env python3
"""Benchmark of containers on hpod's real local nodes (issue 27), each figure
against a peer measured in the same run and printed as a ratio (never asserted):

  start: `srun -N3 true` on a 1+3 cluster, plain (the peer) and with
        `--container-image`: the image's squashfs on /fsx already unpacked in
        every worker's cache (cached), the same after `hpod-container remove
        --all` on every worker (cold, unsquashfs on each node), and the image
        pulled from the registry on first use (cold registry: skopeo, umoci).
        Wall seconds on the controller around srun; median and min..max.
  throughput: the seed's llama_tiny.sh (hpod-train, 3 ranks) inside the image
        and outside it, alternating, `--runs` each: tokens/s from hpod-train's
        summary (its timed steps). Goal: inside >= 0.98x outside.

The image is the one tests/e2e/test_containers.py builds (mmdebstrap, Debian 12
with hpod-train's libraries and hpod-train), pushed to Debian's docker-registry
on the cluster bridge and imported with `hpod-container import`. Everything it
starts is stopped and removed, also on failure and Ctrl-C. Needs root, Debian's
Slurm, squashfs-tools, skopeo, umoci, docker-registry, mmdebstrap (which fetches
Debian packages). About 6 minutes with the defaults.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import nodes_bench  # noqa: E402  (puts tests/e2e on sys.path, sets HPOD_BIN_DIR)
from nodes_bench import loadavg, ratio  # noqa: E402
from recovery import BenchDaemon, fmt, log, med, span  # noqa: E402
import nodestest  # noqa: E402
import test_containers as tc  # noqa: E402
import test_slurm  # noqa: E402

PREFIX = "cbn"
NODE_HELPER = tc.NODE_HELPER


class Rig:
    def __init__(self, d):
        self.d = d
        self.controller, self.workers, _ = nodestest.slurm_cluster(d, "cb", timeout=300)

    def sh(self, script, timeout=600):
        """bash on the controller (all its namespaces); (rc, output, seconds)."""
        t = time.time()
        p = subprocess.run(["nsenter", "-t", str(self.d.node_pid(self.controller)), "-n", "-u",
                            "-m", "-p", "--", "bash", "-c", script],
                           capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.time() - t

    def must(self, script, timeout=600):
        rc, out, s = self.sh(script, timeout)
        if rc != 0:
            raise RuntimeError("%s: rc %d: %s" % (script, rc, out[-2000:]))
        return out, s

    def clear_caches(self):
        for w in self.workers:
            self.d.in_node(w, NODE_HELPER + " remove --all >/dev/null")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of each start figure")
    ap.add_argument("--train-runs", type=int, default=3, help="runs of each throughput side")
    ap.add_argument("--steps", type=int, default=150, help="hpod-train steps per throughput run")
    args = ap.parse_args()
    nodestest.require_nodes()
    missing = [t for t in tc.TOOLS if not shutil.which(t)]
    if not nodestest.have_slurm() or missing or not os.path.exists(tc.PLUGIN):
        print("SKIP: needs Debian's Slurm, spank_hpod.so and %s" % ", ".join(tc.TOOLS))
        return 77

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    d, registry_proc = None, None
    started = time.time()
    try:
        d = BenchDaemon(PREFIX)
        d.start()
        rig = Rig(d)
        registry, registry_proc = tc.start_registry(d, rig.controller)
        log("building the image (mmdebstrap) and pushing it to %s" % registry)
        tc.build_image(tempfile.mkdtemp(dir=d.root), registry)
        # /fsx: the seed's script, hpod-train, the tokenized KJV sample.
        rig.must("mkdir -p /fsx/cb /fsx/data /fsx/bin /fsx/images && touch /fsx/cb/.here")
        fsx = os.path.dirname([r for r, _, f in os.walk(d.fsx_root) if ".here" in f][0])
        shutil.copy(os.path.join(TOP, "examples", "slurm", "llama_tiny.sh"),
                    os.path.join(fsx, "cb"))
        nodestest.training_fsx(fsx, rig.must)
        _, import_s = rig.must("ENROOT_ALLOW_HTTP=yes %s import docker://%s#hpod/train:1 -o "
                               "/fsx/images/train.sqsh" % (NODE_HELPER, registry))
        sqsh_mb = os.path.getsize(os.path.join(fsx, "images", "train.sqsh")) / 2**20
        log("imported in %.1f s (%.0f MiB squashfs); cluster up after %.0f s; load %s" % (
            import_s, sqsh_mb, time.time() - started, loadavg()))

        image = "/fsx/images/train.sqsh"
        ref = "%s#hpod/train:1" % registry
        start = {"plain": [], "cached": [], "cold": [], "cold registry": []}
        rig.must("srun -N3 true")  # Slurm's own first-step costs out of the figures
        rig.must("srun -N3 --container-image=%s true" % image)
        for i in range(args.runs):
            start["plain"].append(rig.must("srun -N3 true")[1])
            rig.clear_caches()
            start["cold registry"].append(rig.must(
                "ENROOT_ALLOW_HTTP=yes srun -N3 --container-image=%s true" % ref)[1])
            rig.clear_caches()
            start["cold"].append(rig.must("srun -N3 --container-image=%s true" % image)[1])
            start["cached"].append(rig.must("srun -N3 --container-image=%s true" % image)[1])
            log("[%d/%d] start: plain %.2f s, cached %.2f s, cold %.2f s, cold registry %.2f s"
                % (i + 1, args.runs, start["plain"][-1], start["cached"][-1], start["cold"][-1],
                   start["cold registry"][-1]))

        tput = {"outside": [], "inside": []}
        common = "MAX_STEPS=%d DATA_DIR=/fsx/data srun -N3 --ntasks-per-node=1 " % args.steps
        for i in range(args.train_runs):
            for side in ("outside", "inside"):
                run_dir = "/fsx/runs/%s-%d" % (side, i)
                if side == "outside":
                    cmd = ("cd /fsx/cb && HPOD_TRAIN=/fsx/bin/hpod-train RUN_DIR=%s " % run_dir +
                           common + "./llama_tiny.sh")
                else:
                    cmd = ("cd /fsx/cb && HPOD_TRAIN=/usr/local/bin/hpod-train RUN_DIR=%s "
                           % run_dir + common + "--container-image=%s --container-mounts=/fsx "
                           "--container-workdir=/fsx/cb ./llama_tiny.sh" % image)
                rig.must(cmd)
                with open(os.path.join(fsx, run_dir.replace("/fsx/", "", 1), "summary.json")) as f:
                    tput[side].append(json.load(f)["throughput"]["tokens_per_s"])
            log("[%d/%d] tokens/s: outside %.0f, inside %.0f" % (
                i + 1, args.train_runs, tput["outside"][-1], tput["inside"][-1]))

        print()
        print("Step start on 3 workers (`srun -N3 true`, wall s on the controller, %d runs):"
              % args.runs)
        print("| srun | median | min..max | vs plain |")
        print("|---|---:|---:|---:|")
        for k, xs in start.items():
            print("| %s | %s | %s | %s |" % (k, fmt(med(xs)), span(xs),
                                             "–" if k == "plain" else
                                             "+%.2f s" % (med(xs) - med(start["plain"]))))
        print()
        r = ratio(med(tput["inside"]), med(tput["outside"]))
        print("hpod-train, 3 ranks, %d steps (tokens/s, median of %d): outside %.0f (%s), "
              "inside the image %.0f (%s): %s" % (
                  args.steps, args.train_runs, med(tput["outside"]),
                  "%.0f..%.0f" % (min(tput["outside"]), max(tput["outside"])),
                  med(tput["inside"]), "%.0f..%.0f" % (min(tput["inside"]), max(tput["inside"])),
                  r))
        print("Goal (informational, not asserted): inside >= 0.98x outside -> %s" % (
            "MET" if med(tput["inside"]) >= 0.98 * med(tput["outside"]) else "NOT MET"))
        print("Image: %.0f MiB squashfs (zstd); import from the registry %.1f s." % (
            sqsh_mb, import_s))
        log("(took %.0f s)" % (time.time() - started))
        return 0
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    finally:
        if registry_proc:
            registry_proc.kill()
            registry_proc.wait()
        if d:
            try:
                nodes_bench.delete_cluster(d, "cb", timeout=180)
            except Exception as e:  # noqa: BLE001  (cleanup goes on)
                print("deleting the cluster: %s" % e)
            d.cleanup()


if __name__ == "__main__":
    sys.exit(main())
