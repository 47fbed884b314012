#!/usr/bin/env python3
"""Benchmark of Slurm auto-resume (`sbatch --auto-resume=N`, hpod's SPANK plugin) on
hpod's real local nodes (hpodd as root, local provider, Debian's Slurm 22.05), against
a peer measured in the same run and printed as a ratio (never asserted):

  faults: a 1+3 cluster (NodeRecovery Automatic) runs `sbatch --nodes 3
        --auto-resume=1 run.slurm ./llama_tiny.sh` (hpod-train, 3 ranks, one per
        worker, a checkpoint every 20 steps, 100,000 steps so it never ends by
        itself); once step 25 is logged (after the step-20 checkpoint), `hpod
        inject-fault` on a worker that is not the batch host (kill-node, hang,
        partition --seconds 60). Seconds from just before inject-fault to the
        first training step of the resumed attempt (the goodput ledger), broken
        down into detection, mark, replacement, re-launch, rendezvous, checkpoint
        load and first step; then the job is cancelled. One job per run.
  peer: plain Slurm without hpod's recovery, the same job without --auto-resume
        on a 1+3 cluster created with `--node-recovery None` (hpod only marks and
        reports there), the same fault: when `sinfo` shows the node not responding
        (`*`, SlurmdTimeout=30), when the job ends and in what state, and whether it
        ever trains again. The failed node is replaced by hand between peer runs.
  goodput: a 1+4 cluster, `sbatch --nodes 4 --auto-resume=N` for --goodput-minutes
        with kill-node of a random worker that is not the batch host every
        --kill-every seconds, then cancelled: the ledger's useful step time over its
        wall time (`hpod describe-job-goodput`), against the same job before its
        first fault.

Full run: 5 runs per fault kind (peer: 1 per kind, --peer-runs), goodput 10 minutes
killing every 120 s; --quick: 3 runs, goodput 3 minutes every 60 s. Everything it
starts is stopped by PID and every netns, link, route and directory it made is
removed, also on failure and Ctrl-C. Needs root, Debian's Slurm and spank_hpod.so.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import nodes_bench  # noqa: E402  (puts tests/e2e on sys.path, sets HPOD_BIN_DIR)
from nodes_bench import loadavg  # noqa: E402
from recovery import BenchDaemon, clear_live, fmt, live, log, nan  # noqa: E402
from slurm_bench import event_time, have_slurm  # noqa: E402
from auto_resume_report import COLS, FAULTS, report_faults, report_goodput  # noqa: E402
from auto_resume_cluster import BIN, NOOP, PLUGIN, SAVE_INTERVAL, Cluster  # noqa: E402
import nodestest  # noqa: E402

PREFIX = "arb"           # hpodd's link/netns prefix
FAULT_AT_STEP = SAVE_INTERVAL + 5   # the fault lands after the step-20 checkpoint
RESUME_TIMEOUT_S = 300
PEER_WAIT_S = 135                   # > hpod-train's 120 s collective timeout
POLL_S = 0.2


SAVE_DIR = None
WORKLOAD = "hpod-train"   # --workload


def save(name, **what):
    """With --save DIR: the run's job output, ledger, recovery and goodput as JSON."""
    if SAVE_DIR:
        with open(os.path.join(SAVE_DIR, name + ".json"), "w") as f:
            json.dump(what, f, indent=1, default=str)


def new_recovery(c, node_id, seen):
    mine = [r for r in c.recoveries(node_id) or []
            if r["NodeId"] == node_id and r["RecoveryId"] not in seen]
    return mine[-1] if mine else None


def step_at(rec, name):
    t = [s["Time"] for s in rec.get("Timeline", []) if s["Step"] == name]
    return event_time(t[0]) if t else float("nan")


# ---------------------------------------------------------------- faults

def fault_run(c, label, kind, extra, n, prog):
    """One auto-resume job, one fault on a non-batch worker: the breakdown (s)."""
    name = "ar-%d" % n
    job = c.submit(name, c.n_workers, 1)
    led = c.ledger(job)
    c.wait_training(job, led, FAULT_AT_STEP)
    batch = c.batch_host(job)
    cands = [w for w in c.workers() if w[0] != batch]
    hostname, victim = cands[n % len(cands)]
    seen = {r["RecoveryId"] for r in c.recoveries() or []}
    t0, call_s, injected = c.inject(victim, kind, extra)
    r = {"victim": hostname, "job": job, "call_s": call_s, "injected": injected}
    first = start = None
    while time.time() < t0 + RESUME_TIMEOUT_S:
        starts = led.starts()
        if len(starts) >= 2:
            start = led.events[starts[-1]]
            first = led.first_step_after(starts[-1])
            if first:
                break
        live("%s %s on %s: %5.1f s, %s" % (prog, label, hostname, time.time() - t0,
                                           "attempt %d started" % start.get("attempt", 0)
                                           if start else "waiting for the retry"))
        time.sleep(POLL_S)
    r["seen"] = time.time() - t0
    clear_live()
    rec = None
    for _ in range(50):   # the recovery may still be finishing its last steps
        rec = new_recovery(c, victim, seen)
        if rec and rec["Status"] != "InProgress":
            break
        time.sleep(0.2)
    c.cancel(job)
    r["describe"] = c.goodput(job)
    save(name, job_out=c.read("/fsx/bench/%s.out" % name), ledger=led.events, recovery=rec,
         describe=r["describe"])
    if rec is None:
        r["error"] = "no recovery of %s" % victim
        return r
    r.update(recovery_id=rec["RecoveryId"], status=rec["Status"], action=rec.get("Action"))
    created = event_time(rec["CreatedTime"])
    r["steps"] = [(s["Step"], event_time(s["Time"]) - t0) for s in rec.get("Timeline", [])]
    r["detect"] = created - t0
    r["detected_step"] = step_at(rec, "Detected") - t0
    r["mark"] = step_at(rec, "Marked") - created
    r["replace"] = step_at(rec, "Resumed") - step_at(rec, "Marked")
    if not first:
        r["error"] = "no step of a resumed attempt within %d s (recovery %s %s; ledger starts " \
                     "%d; job %s)" % (RESUME_TIMEOUT_S, rec["RecoveryId"], rec["Status"],
                                      len(led.starts()), c.final_state(job))
        return r
    r["relaunch"] = start["process_start"] - step_at(rec, "Resumed")
    # Inside re-launch, from the supervisor's events: the failed step's srun returns,
    # the supervisor retries, srun starts the new step's processes.
    evs = {(e.get("Event"), e.get("Attempt")): event_time(e["Time"])
           for e in reversed((r["describe"] or {}).get("Events", []))}
    ended, retry = evs.get(("ended", 0), float("nan")), evs.get(("started", 1), float("nan"))
    r["step_end"] = ended - step_at(rec, "Resumed")
    r["retry"] = retry - ended
    r["launch"] = start["process_start"] - retry
    r["rendezvous"] = start.get("rendezvous_s", float("nan"))
    r["ckpt_load"] = start.get("checkpoint_load_s", float("nan"))
    r["startup_other"] = start["time"] - start["process_start"] - r["rendezvous"] - r["ckpt_load"]
    r["first_step"] = first["time"] - start["time"]
    r["total"] = first["time"] - t0
    r["attempt"] = start.get("attempt")
    r["resumed_step"] = start.get("resumed_step")
    # The failed attempt's last logged step, less the checkpoint the new one resumed from.
    done = [e["step"] for e in led.events[:led.starts()[-1]] if e.get("event") == "step"]
    r["steps_rerun"] = max(0, done[-1] - start.get("resumed_step", 0)) if done else 0
    fails = (r["describe"] or {}).get("Failures", [])
    for key, field in (("hpod_f2fs", "FaultToFirstStepSeconds"),
                       ("hpod_replace", "ReplacementSeconds"), ("hpod_restart", "RestartSeconds")):
        r[key] = fails[0].get(field, float("nan")) if fails else float("nan")
    return r


def peer_run(c, label, kind, extra, n, watch_end, prog):
    """The same job and fault under plain Slurm (a None cluster, no --auto-resume)."""
    name = "plain-%d" % n
    job = c.submit(name, c.n_workers, 0)
    led = c.ledger(name=name)
    c.wait_training(job, led, FAULT_AT_STEP)
    batch = c.batch_host(job)
    hostname, victim = [w for w in c.workers() if w[0] != batch][n % 2]
    t0, _, _ = c.inject(victim, kind, extra)
    r = {"victim": hostname, "star": float("nan"), "ended": float("nan"), "job_states": [],
         "trained_again": float("nan"), "states": []}
    while time.time() < t0 + PEER_WAIT_S:
        now = time.time() - t0
        st = c.sinfo().get(hostname, "?")
        if not r["states"] or r["states"][-1][1] != st:
            r["states"].append((now, st))
        if st.endswith("*") and nan(r["star"]):
            r["star"] = now
        js = c.job_state(job)
        if js != "RUNNING" and nan(r["ended"]):
            r["ended"] = now
        if not nan(r["ended"]):   # what Slurm does with the job next (requeue?)
            fs = c.final_state(job)
            if not r["job_states"] or r["job_states"][-1][1] != fs:
                r["job_states"].append((now, fs))
        # Training went on after the fault: a step logged after a stall of >= 3 s.
        ev = [e for e in led.read() if e.get("event") == "step"]
        for a, b in zip(ev, ev[1:]):
            if b["time"] > t0 and b["time"] - max(a["time"], t0) >= 3 and nan(r["trained_again"]):
                r["trained_again"] = b["time"] - t0
        settled = not nan(r["ended"]) and now >= r["ended"] + 15
        if not nan(r["star"]) and (not watch_end or settled or not nan(r["trained_again"])):
            break
        live("%s %s (peer, plain Slurm): %5.1f s, %s %s, job %s" % (prog, label, now, hostname,
                                                                    st, js or "gone"))
        time.sleep(POLL_S)
    clear_live()
    r["state"] = " -> ".join(x[1] for x in r["job_states"]) if r["job_states"] else \
        "still %s at %.0f s" % (c.job_state(job) or "?", time.time() - t0)
    c.cancel(job, timeout=30)
    save(name, job_out=c.read("/fsx/bench/%s.out" % name), ledger=led.read(), peer=r)
    # Back to a clean cluster for the next peer run: the failed node replaced by hand.
    c.d.hpod("batch-replace-cluster-nodes", "--cluster-name", c.name, "--node-ids", victim,
             check=False)
    return r


# ---------------------------------------------------------------- goodput

def goodput_run(c, minutes, kill_every, rng):
    """One long auto-resume job on all workers, kill-node every kill_every s."""
    kills_planned = int((minutes * 60 - 1) // kill_every)
    job = c.submit("goodput", c.n_workers, min(100, kills_planned + 2))
    led = c.ledger(job)
    c.wait_training(job, led, 1)
    batch = c.batch_host(job)
    t_start = led.events[led.starts()[0]]["process_start"]
    end_at = t_start + minutes * 60
    next_kill = t_start + kill_every
    kills = []
    log("goodput: job %s on %d workers (batch host %s), started %.1f s ago; kill-node every "
        "%d s, %d kills planned, cancelled at %.0f min" % (
            job, c.n_workers, batch, time.time() - t_start, kill_every, kills_planned, minutes))
    while time.time() < end_at:
        now = time.time()
        if now >= next_kill and next_kill < end_at:
            starts = led.starts()
            if led.first_step_after(starts[-1]) is None:
                live("goodput: kill due, the last attempt has not stepped yet")
                time.sleep(POLL_S)
                continue
            hostname, victim = rng.choice([w for w in c.workers() if w[0] != batch])
            t0, _, _ = c.inject(victim, "kill-node", [])
            kills.append({"t": t0, "host": hostname, "late": t0 - next_kill,
                          "starts_before": len(starts)})
            log("goodput: kill-node %s at %.0f s%s" % (
                hostname, t0 - t_start, " (%.1f s late)" % (t0 - next_kill)
                if t0 - next_kill > 1 else ""))
            next_kill += kill_every
        last = led.last_step()
        live("goodput: %5.0f/%d s, step %s, %d attempts, %d kills" % (
            now - t_start, minutes * 60, last["step"] if last else "-", len(led.starts()),
            len(kills)))
        time.sleep(0.5)
    clear_live()
    c.cancel(job)
    time.sleep(2)   # the supervisor's finished event carries the summary
    g = c.goodput(job)
    table = c.goodput(job, "table")
    if g is not None and not g.get("Goodput"):
        # The supervisor's finished event did not bring the summary: hpod-train's own
        # (--summary-json, written at its end) of the same ledger.
        try:
            with open(c.host_path("/fsx/runs/goodput/summary.json")) as f:
                g["Goodput"] = json.load(f)["goodput"]
            g["GoodputFrom"] = "summary.json"
        except (OSError, ValueError, KeyError):
            pass
    ev = led.read()
    starts = led.starts()
    save("goodput", job_out=c.read("/fsx/bench/goodput.out"), ledger=ev, describe=g, kills=kills,
         recoveries=c.recoveries())
    for k in kills:   # fault -> first step of the next attempt, from the ledger
        nxt = [i for i in starts[k["starts_before"]:]]
        first = led.first_step_after(nxt[0]) if nxt else None
        k["to_first_step"] = first["time"] - k["t"] if first else float("nan")
    steps = [e for e in ev[:starts[1] if len(starts) > 1 else len(ev)]
             if e.get("event") == "step"]
    first_start = ev[starts[0]]
    base_wall = (steps[-1]["time"] - first_start["process_start"]) if steps else 0
    baseline = sum(e["step_s"] for e in steps) / base_wall if base_wall else float("nan")
    return {"job": job, "kills": kills, "describe": g, "table": table, "baseline": baseline,
            "baseline_wall": base_wall, "attempts": len(starts),
            "last_step": (led.last_step() or {}).get("step")}


# ---------------------------------------------------------------- report

# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="3 runs per fault, goodput 3 min killing every 60 s")
    ap.add_argument("--runs", type=int, default=0, help="runs per fault kind (default 5)")
    ap.add_argument("--peer-runs", type=int, default=1, help="peer runs per fault kind")
    ap.add_argument("--kinds", default="", help="comma-separated: %s" %
                    ",".join(f[0] for f in FAULTS))
    ap.add_argument("--parts", default="faults,peer,goodput",
                    help="comma-separated parts to run (faults, peer, goodput)")
    ap.add_argument("--goodput-minutes", type=float, default=0, help="default 10 (--quick 3)")
    ap.add_argument("--kill-every", type=int, default=0, help="seconds (default 120, --quick 60)")
    ap.add_argument("--seed", type=int, default=1, help="picks the goodput run's victims")
    ap.add_argument("--save", default="", help="a directory for each run's job output, ledger, "
                    "recovery and describe-job-goodput (JSON)")
    ap.add_argument("--workload", choices=("hpod-train", "pytorch"), default="hpod-train",
                    help="the seed's hpod-train job, or examples/pytorch (needs python3-torch)")
    args = ap.parse_args()
    global SAVE_DIR, WORKLOAD
    WORKLOAD = args.workload
    if WORKLOAD == "pytorch" and subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                                capture_output=True).returncode != 0:
        print("SKIP: python3-torch is not installed (scripts/install-deps.sh --bench)")
        return 77
    if args.save:
        os.makedirs(args.save, exist_ok=True)
        SAVE_DIR = args.save
    nodestest.require_nodes()
    if not have_slurm() or not os.path.exists(PLUGIN):
        print("SKIP: Debian's Slurm packages or %s are missing" % PLUGIN)
        return 77
    runs = args.runs or (3 if args.quick else 5)
    minutes = args.goodput_minutes or (3 if args.quick else 10)
    kill_every = args.kill_every or (60 if args.quick else 120)
    parts = set(p.strip() for p in args.parts.split(","))
    faults = [f for f in FAULTS if not args.kinds or f[0] in args.kinds.split(",")]

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    results, peers, gp = {}, {}, None
    d = None
    started = time.time()
    try:
        d = BenchDaemon(PREFIX)
        nodestest.write_script(os.path.join(d.root, "lcs", "on_create.sh"), NOOP)
        data = os.path.join(d.root, "tokdata")
        os.makedirs(data)
        corpus = os.path.join(TOP, "src", "train", "data", "testdata", "kjv_raw_sample.txt")
        hpd = os.path.join(BIN, "hpod-data", "hpod-data")
        nodestest.run(hpd, "train-tokenizer", "--vocab-size", "512", "--input", corpus,
                      "--output", os.path.join(data, "tok512"))
        nodestest.run(hpd, "tokenize", "--tokenizer", os.path.join(data, "tok512.model"),
                      "--input", corpus, "--output", os.path.join(data, "train512.bin"))
        d.start()
        log("hpodd pid %d, block %s, prefix %s, heartbeats at hpodd's defaults; load %s" % (
            d.proc.pid, d.block, PREFIX, loadavg()))
        if "faults" in parts:
            c = Cluster(d, "resume", 3, "Automatic", data, WORKLOAD)
            c.wait_created()
            log("cluster resume (1+3, Automatic) InService after %.0f s" % (time.time() - started))
            n = 0
            for i in range(runs):
                for label, kind, extra in faults:
                    n += 1
                    prog = "[%d/%d]" % (n, runs * len(faults))
                    c.wait_ready()
                    try:
                        r = fault_run(c, label, kind, extra, n, prog)
                    except RuntimeError as e:
                        r = {"victim": "?", "job": "?", "error": str(e)}
                        c.on_controller("scancel", "-u", "root")
                    results.setdefault(label, []).append(r)
                    log("%s %s on %s (job %s): %s; load %s" % (
                        prog, label, r["victim"], r["job"], r.get("error") or
                        "first step %.2f s (%s), resumed from step %s, %d steps re-run" % (
                            r["total"], ", ".join("%s %.2f" % (k, r[k]) for k, _ in COLS),
                            r["resumed_step"], r["steps_rerun"]), loadavg()))
            nodes_bench.delete_cluster(d, "resume", timeout=180)
        if "peer" in parts:
            c = Cluster(d, "plain", 3, "None", data, WORKLOAD)
            c.wait_created()
            log("cluster plain (1+3, NodeRecovery None) InService")
            n = 0
            for i in range(args.peer_runs):
                for label, kind, extra in faults:
                    n += 1
                    prog = "[peer %d/%d]" % (n, args.peer_runs * len(faults))
                    c.wait_ready()
                    try:
                        p = peer_run(c, label, kind, extra, n, i == 0, prog)
                    except RuntimeError as e:
                        log("%s %s: peer run failed: %s" % (prog, label, e))
                        c.on_controller("scancel", "-u", "root")
                        continue
                    peers.setdefault(label, []).append(p)
                    log("%s %s on %s: Slurm * at %s; job %s at %s; trained again %s; sinfo %s" % (
                        prog, label, p["victim"], fmt(p["star"]), p["state"], fmt(p["ended"]),
                        fmt(p["trained_again"]), ", ".join("%.1f %s" % s for s in p["states"])))
            nodes_bench.delete_cluster(d, "plain", timeout=180)
        if "goodput" in parts:
            c = Cluster(d, "gp", 4, "Automatic", data, WORKLOAD)
            c.wait_created()
            c.wait_ready()
            log("cluster gp (1+4, Automatic) InService")
            gp = goodput_run(c, minutes, kill_every, random.Random(args.seed))
            nodes_bench.delete_cluster(d, "gp", timeout=180)
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if d:
            t = time.time()
            d.cleanup()
            left = d.leftovers()
            netns = [x for x in nodestest.run("ip", "netns", "list", check=False).stdout.split()
                     if x.startswith(PREFIX + "n")]
            log("cleaned up in %.1f s%s" % (time.time() - t, "; WARNING: left behind: %s %s" % (
                left, netns) if left or netns else " (nothing left)"))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    if results:
        report_faults(results, peers, args, WORKLOAD)
    if gp:
        report_goodput(gp, minutes, kill_every)
    log("(took %.0f s)" % (time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
