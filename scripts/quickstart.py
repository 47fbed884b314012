#!/usr/bin/env python3
"""make quickstart: the seed's whole journey on this machine, on real parts.

  1. installs hpod (make install to $HPOD_PREFIX, /usr/local), `hpodd init`, starts hpodd
  2. creates the seed's cluster (examples/demo-cluster.json: controller-group 1,
     worker-group 4; lifecycle scripts examples/lifecycle/base-config/ through s3:// when
     HPOD_S3_ENDPOINT names a local S3, else file://) and waits until it is InService
  3. on the controller (hpod start-session): trains the tokenizer and tokenizes the KJV
     (Debian's bible-kjv) into /fsx/data (cached in $HPOD_QUICKSTART_DIR/cache)
  4. sbatch --nodes 4 --auto-resume=1 run.slurm ./llama_tiny.sh, squeue, and follows
     slurm-<job>.out
  5. midway, hpod inject-fault --kind kill-node on a worker: hpod detects, marks,
     replaces and resumes; training continues from its checkpoint
  6. a summary: final loss, steps lost, recovery seconds, goodput, where things are

`scripts/quickstart.py down` (make quickstart-down) deletes the clusters of the
quickstart's hpodd, stops it and checks that no namespace, link, route or mount is
left; `down --purge` also removes its state directory. Running `up` twice is safe:
what is there is reused (an hpodd whose binary was reinstalled is restarted; nodes
outlive that). Settings (environment; `up` keeps the first four in
$HPOD_QUICKSTART_DIR/settings.json for `down`): HPOD_PREFIX (/usr/local), HPOD_PORT
(8450), HPOD_NODE_BLOCK (10.77.0.0/16), HPOD_LINK_PREFIX (qs), HPOD_QUICKSTART_DIR
(/var/lib/hpod-quickstart), HPOD_QUICKSTART_STEPS (600), HPOD_QUICKSTART_TRAIN_TIMEOUT
(900 s), HPOD_QUICKSTART_NONINTERACTIVE=1 (no terminal: plain lines, for tests), and
for s3:// HPOD_S3_ENDPOINT, HPOD_S3_ACCESS_KEY_ID, HPOD_S3_SECRET_ACCESS_KEY,
HPOD_S3_REGION, HPOD_S3_BUCKET. AWS_* settings of the shell (keys, region, profile,
endpoints) are not passed to the quickstart's hpod calls: they would override the
'hpod' profile that `hpodd init` writes."""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quickstart_cluster as c  # noqa: E402
import quickstart_lib as q  # noqa: E402

CLUSTER = "demo"
VICTIM_AT = 0.4  # kill a node once training is this far and a checkpoint exists,
VICTIM_BY = 0.75  # and not later than this


def phase_install(cfg):
    q.header(1, "Install hpod and start hpodd")
    q.preflight(cfg)
    cfg.save()  # `down` stops the same hpodd, whatever the environment then says
    q.install(cfg)
    q.start_hpodd(cfg)


def phase_cluster(cfg):
    q.header(2, "Create the seed's cluster: controller-group x1, worker-group x4")
    source = q.lifecycle_source(cfg)
    with open(os.path.join(cfg.top, "examples", "demo-cluster.json")) as f:
        groups = json.load(f)
    for g in groups:
        g["LifeCycleConfig"]["SourceS3Uri"] = source
    spec = os.path.join(cfg.state, "demo-cluster.json")
    with open(spec, "w") as f:
        json.dump(groups, f, indent=2)
    q.say("examples/demo-cluster.json with SourceS3Uri %s -> %s" % (source, spec))
    d = q.describe(cfg, CLUSTER)
    if d and d["ClusterStatus"] == "Failed":
        q.fail("the cluster %s failed: %s" % (CLUSTER, d.get("FailureMessage", "")),
               "run `make quickstart-down` (it removes the cluster), then `make quickstart`")
    if d and d["ClusterStatus"] == "Deleting":
        q.hpod(cfg, "wait", "cluster-deleted", "--cluster-name", CLUSTER, show=True)
        d = None
    if d:
        q.say("cluster %s exists (%s): reusing it" % (CLUSTER, d["ClusterStatus"]))
    else:
        q.hpod(cfg, "create-cluster", "--cluster-name", CLUSTER, "--instance-groups",
               "file://" + spec, show=True)
    q.hpod(cfg, "wait", "cluster-in-service", "--cluster-name", CLUSTER, "--timeout", "600",
           show=True, stream=True,
           hint="`hpod logs --cluster-name demo --node-id <id>` shows a node's lifecycle "
                "script; `make quickstart-down` removes the cluster")
    q.hpod(cfg, "describe-cluster", "--cluster-name", CLUSTER, "--output", "table",
           "--query", "{ClusterName: ClusterName, ClusterStatus: ClusterStatus, "
           "ClusterArn: ClusterArn, NodeRecovery: NodeRecovery}", show=True, stream=True)
    q.hpod(cfg, "list-cluster-nodes", "--cluster-name", CLUSTER, "--with-slurm", "--output",
           "table", show=True, stream=True)
    cfg.cluster = c.cluster_info(cfg, CLUSTER)
    c.wait_slurm_idle(cfg, 4)


def phase_data(cfg):
    q.header(3, "Prepare the data on the cluster (hpod start-session on the controller)")
    cache = os.path.join(cfg.state, "cache")
    os.makedirs(cache, exist_ok=True)
    # The steps the seed's user types on the controller; the cache (a host
    # directory every node sees) keeps a second run from redoing them, and
    # `hpod-data info` verifies what is copied.
    script = (
        "set -e; mkdir -p /fsx/data; cd /fsx/data\n"
        "if [ -s tok512.model ] && [ -s train512.bin ] && hpod-data info train512.bin >/dev/null; "
        "then echo 'data: /fsx/data already holds tok512.model and train512.bin'\n"
        "elif [ -s {c}/tok512.model ] && [ -s {c}/train512.bin ] && "
        "hpod-data info {c}/train512.bin >/dev/null; then\n"
        "  cp {c}/tok512.model {c}/tok512.vocab {c}/train512.bin . && "
        "echo 'data: copied from the cache ({c})'\n"
        "else\n"
        "  echo 'controller$ hpod-data corpus --output /fsx/data/text'\n"
        "  hpod-data corpus --output /fsx/data/text\n"
        "  echo 'controller$ hpod-data train-tokenizer --vocab-size 512 --input text/kjv.txt --output tok512'\n"
        "  hpod-data train-tokenizer --vocab-size 512 --input text/kjv.txt --output tok512\n"
        "  echo 'controller$ hpod-data tokenize --tokenizer tok512.model --input text/kjv.txt "
        "--output train512.bin'\n"
        "  hpod-data tokenize --tokenizer tok512.model --input text/kjv.txt --output train512.bin\n"
        "  cp tok512.model tok512.vocab train512.bin {c}/\n"
        "fi\n"
        "hpod-data info train512.bin\n").format(c=cache)
    q.show_cmd("hpod start-session --target %s" % cfg.cluster["target"])
    c.on_controller(cfg, script, hint="is the bible-kjv package installed? (`make deps`)")


def phase_train(cfg):
    q.header(4, "Train: sbatch --nodes 4 --auto-resume=1 run.slurm ./llama_tiny.sh")
    c.cancel_old_jobs(cfg)
    run = "quickstart-%d" % int(time.time())
    cfg.run_dir = "/fsx/runs/" + run
    steps = cfg.steps
    # MAX_STEPS and RUN_DIR are llama_tiny.sh's own settings (its header); the rest is
    # the seed's line as it is.
    line = ("RUN_DIR=%s MAX_STEPS=%d sbatch --nodes 4 --auto-resume=1 run.slurm ./llama_tiny.sh "
            "--log-interval 10 --progress-interval 2" % (cfg.run_dir, steps))
    out = c.on_controller(
        cfg, "set -e; mkdir -p /fsx/quickstart && cp %s/run.slurm %s/llama_tiny.sh /fsx/quickstart/"
        " && cd /fsx/quickstart && %s" % (cfg.examples + "/slurm", cfg.examples + "/slurm", line),
        show="cd /fsx/quickstart && " + line, capture=True)
    m = re.search(r"Submitted batch job (\d+)", out)
    if not m:
        q.fail("sbatch did not submit the job: %s" % out.strip(),
               "open a shell on the controller (below) and run sinfo")
    cfg.job = m.group(1)
    c.remember_job(cfg, cfg.job)
    q.say(out.strip())
    c.on_controller(cfg, "sleep 1; squeue", show="squeue")
    follow(cfg)


def follow(cfg):
    """Follows slurm-<job>.out and the job's goodput ledger until the job ends; kills
    one worker midway once a checkpoint exists."""
    fsx = cfg.cluster["fsx"]
    out_path = os.path.join(fsx, "quickstart", "slurm-%s.out" % cfg.job)
    ledger = os.path.join(fsx, "quickstart", ".hpod", "goodput-%s.jsonl" % cfg.job)
    q.say("following /fsx/quickstart/slurm-%s.out (tail -f on the controller shows the same)"
          % cfg.job)
    tail = c.Tail(out_path)
    live = q.LiveLine(cfg)
    fault = None
    deadline = time.time() + cfg.train_timeout
    last_check = time.time()

    def show_new_lines():
        for line in tail.lines():
            if "global_step=" in line:
                live.update(line.strip())
            else:
                live.println(line.rstrip())

    while True:
        show_new_lines()
        events = c.read_ledger(ledger)
        steps = [e["step"] for e in events if e.get("event") == "step" and "step" in e]
        saved = [e["step"] for e in events if e.get("event") == "checkpoint" and "step" in e]
        if fault is None and steps and saved and steps[-1] >= cfg.steps * VICTIM_AT:
            live.clear()
            if steps[-1] <= cfg.steps * VICTIM_BY:
                fault = inject_fault(cfg, steps[-1], saved[-1])
            else:  # a fast machine and a short run: too late to show a recovery
                fault = {"skipped": True, "done": True}
                q.say("training is at step %d of %d: too close to the end for a fault; none "
                      "injected" % (steps[-1], cfg.steps))
        if fault is not None and not fault.get("done"):
            c.watch_recovery(cfg, fault, events, live)
        if time.time() - last_check > 3:
            last_check = time.time()
            if not c.job_running(cfg, cfg.job):
                break
        if time.time() > deadline:
            q.fail("job %s did not finish within %d s" % (cfg.job, cfg.train_timeout),
                   "look at /fsx/quickstart/slurm-%s.out on the controller; `make "
                   "quickstart-down` removes the cluster" % cfg.job)
        time.sleep(0.3)
    show_new_lines()
    live.clear(keep=True)
    state = c.job_state(cfg, cfg.job)
    if state != "COMPLETED":
        last = open(out_path, errors="replace").read().strip().splitlines()[-5:] \
            if os.path.exists(out_path) else []
        q.fail("job %s ended %s:\n    %s" % (cfg.job, state, "\n    ".join(last)),
               "read /fsx/quickstart/slurm-%s.out on the controller (hpod start-session "
               "--target %s)" % (cfg.job, cfg.cluster["target"]))
    cfg.fault = fault or {}
    cfg.job_state = state
    cfg.summary_path = os.path.join(fsx, cfg.run_dir[len("/fsx/"):], "summary.json")


def inject_fault(cfg, step, saved):
    q.header(5, "A worker fails in the middle of the run")
    host = c.batch_host(cfg, cfg.job)
    workers = sorted((n for n in cfg.cluster["nodes"] if n["InstanceGroupName"] == "worker-group"),
                     key=lambda n: n["Hostname"])
    victim = [n for n in workers if n["Hostname"] != host][-1]
    q.say("training is at step %d, the newest checkpoint is step %d; killing worker %s (%s),"
          " not the batch host %s" % (step, saved, victim["Hostname"], victim["InstanceId"], host))
    t0 = time.time()
    q.hpod(cfg, "inject-fault", "--cluster-name", CLUSTER, "--node-id", victim["InstanceId"],
           "--kind", "kill-node", "--query", "InjectedTime", "--output", "text", show=True)
    return {"t0": t0, "node": victim["InstanceId"], "host": victim["Hostname"], "step": step,
            "saved": saved, "seen": set(), "done": False}


def phase_summary(cfg):
    q.header(6, "Summary")
    try:
        with open(cfg.summary_path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        q.fail("no training summary at %s (%s)" % (cfg.summary_path, e),
               "see /fsx/quickstart/slurm-%s.out" % cfg.job)
    state = cfg.job_state
    g = json.loads(q.hpod(cfg, "describe-job-goodput", "--cluster-name", CLUSTER, "--job-id",
                          cfg.job, "--output", "json", capture=True))
    q.hpod(cfg, "describe-job-goodput", "--cluster-name", CLUSTER, "--job-id", cfg.job,
           "--output", "table", show=True, stream=True)
    fault = cfg.fault
    rec = fault.get("recovery") or {}
    failures = g.get("Failures") or [{}]
    good = g.get("Goodput") or {}
    result = {
        "cluster": CLUSTER, "cluster_status": (q.describe(cfg, CLUSTER) or {}).get("ClusterStatus"),
        "job": cfg.job, "job_state": state, "steps": s.get("end_step"),
        "final_loss": s.get("final_loss"), "run_dir": cfg.run_dir,
        "killed_node": fault.get("node"), "killed_host": fault.get("host"),
        "recovery_id": rec.get("RecoveryId"), "recovery_status": rec.get("Status"),
        "recovery_seconds": c.recovery_seconds(rec),
        "fault_to_first_step_seconds": failures[0].get("FaultToFirstStepSeconds"),
        "steps_rerun": failures[0].get("StepsRerun", good.get("steps_rerun")),
        "goodput": good.get("goodput"), "attempts": g.get("Attempts"),
    }
    with open(os.path.join(cfg.state, "quickstart-result.json"), "w") as f:
        json.dump(result, f, indent=2)
    c.print_summary(cfg, result)


def up(cfg):
    start = time.time()
    phase_install(cfg)
    phase_cluster(cfg)
    phase_data(cfg)
    phase_train(cfg)
    phase_summary(cfg)
    q.say("quickstart done in %.0f s" % (time.time() - start))


def main(argv):
    cfg = q.Config()
    cmd = argv[1] if len(argv) > 1 else "up"
    try:
        if cmd == "up":
            up(cfg)
        elif cmd == "down":
            c.down(cfg, purge="--purge" in argv[2:])
        else:
            print("usage: quickstart.py [up | down [--purge]]", file=sys.stderr)
            return 2
    except q.QuickstartError as e:
        print("\nquickstart: %s\n  what to do: %s" % (e.what, e.todo), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nquickstart: interrupted; what was started keeps running "
              "(`make quickstart-down` stops it)", file=sys.stderr)
        return 130
    except (OSError, ValueError) as e:
        print("\nquickstart: %s\n  what to do: run `make` (and `make quickstart` once, which "
              "installs hpod into %s), then try again" % (e, cfg.prefix), file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired as e:
        print("\nquickstart: %s timed out\n  what to do: look at %s/hpodd.log, then "
              "`make quickstart-down` and `make quickstart`" % (" ".join(e.cmd[:3]),
                                                                  cfg.data), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
