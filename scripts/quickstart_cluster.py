"""`make quickstart` on the cluster (scripts/quickstart.py): the controller through
`hpod start-session`, the job, the recovery as it happens, the summary, and
`make quickstart-down`."""
import datetime
import json
import os
import re
import shutil
import signal
import queue
import subprocess
import threading
import time

from quickstart_lib import (LiveLine, fail, hpod, hpodd_args, hpodd_pid, run_hpod, say,
                            stop_hpodd)


def cluster_info(cfg, name):
    d = json.loads(hpod(cfg, "describe-cluster", "--cluster-name", name, "--output", "json",
                        capture=True))
    cid = d["ClusterArn"].rsplit("/", 1)[-1]
    nodes = json.loads(hpod(cfg, "list-cluster-nodes", "--cluster-name", name, "--output", "json",
                            capture=True))["ClusterNodeSummaries"]
    for n in nodes:
        n["Hostname"] = n.get("PrivateDnsHostname", "").split(".")[0]
    ctl = [n for n in nodes if n["InstanceGroupName"] == "controller-group"]
    if not ctl:
        fail("cluster %s has no controller-group node" % name,
             "`make quickstart-down`, then `make quickstart` (it creates the seed's cluster)")
    return {"name": name, "id": cid, "nodes": nodes, "controller": ctl[0]["InstanceId"],
            "target": "sagemaker-cluster:%s_controller-group-%s" % (cid, ctl[0]["InstanceId"]),
            "fsx": os.path.join(cfg.data, "local", "fsx", cid)}


def session_argv(cfg, script):
    return [os.path.join(cfg.bin, "hpod"), "start-session", "--target", cfg.cluster["target"],
            "--command", cfg.node_path + script]


def session(cfg, script, timeout=600):
    """Runs a bash script on the controller as a user does; (exit code, stdout, stderr)."""
    p = subprocess.run(session_argv(cfg, script), env=cfg.env, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def on_controller(cfg, script, show=None, capture=False, hint=None, timeout=600):
    """A command on the controller; its output shown (indented) or returned."""
    if show:
        print("  controller$ " + show, flush=True)
    if capture:
        rc, out, err = session(cfg, script, timeout)
    else:
        proc = subprocess.Popen(session_argv(cfg, script), env=cfg.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        out, err = "", ""
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)],
                         daemon=True).start()
        live = LiveLine(cfg)
        start = last = time.time()
        while True:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                # Live progress while a step is silent (tokenizer training is).
                if time.time() - last >= 3:
                    if cfg.interactive:
                        live.update("… %.0f s" % (time.time() - start))
                    elif int(time.time() - last) % 15 == 0:
                        live.println("  … still running (%.0f s)" % (time.time() - start))
                if time.time() - start > timeout:
                    proc.kill()
                    fail("on the controller, `%s` took more than %d s" % ((show or script)[:80],
                                                                          timeout),
                         hint or "open a shell there: hpod start-session --target %s"
                         % cfg.cluster["target"])
                continue
            if line is None:
                break
            out += line
            last = time.time()
            live.println("  " + line.rstrip())
        live.clear()
        rc = proc.wait(timeout=30)
    if rc != 0:
        fail("on the controller, `%s` failed (exit %d): %s" % (
            (show or script)[:80], rc, (err or out).strip()[-400:]),
             hint or "open a shell there: hpod start-session --target %s" % cfg.cluster["target"])
    return out


def slurm_nodes(cfg):
    rc, out, _ = session(cfg, "sinfo -h -N -o '%N %T'", timeout=60)
    return dict(l.split()[:2] for l in out.splitlines() if len(l.split()) >= 2) if rc == 0 else {}


def wait_slurm_idle(cfg, count, timeout=180):
    deadline = time.time() + timeout
    states = {}
    while time.time() < deadline:
        states = slurm_nodes(cfg)
        if sum(1 for s in states.values() if s == "idle") >= count:
            say("Slurm: %d worker(s) idle (%s)" % (count, " ".join(sorted(states))))
            return
        time.sleep(1)
    fail("Slurm's workers are not idle after %d s: %s" % (timeout, states),
         "run sinfo on the controller: hpod start-session --target %s" % cfg.cluster["target"])


def remember_job(cfg, job):
    with open(os.path.join(cfg.state, "jobs"), "a") as f:
        f.write("%s %s\n" % (cfg.cluster["id"], job))


def cancel_old_jobs(cfg):
    """A second `make quickstart` (after a Ctrl-C) cancels the jobs the first left on
    this cluster (job ids start again at 1 on a new cluster: its own only)."""
    path = os.path.join(cfg.state, "jobs")
    try:
        pairs = [l.split() for l in open(path)]
    except OSError:
        return
    jobs = [p[1] for p in pairs if len(p) == 2 and p[0] == cfg.cluster["id"]]
    running = [j for j in jobs if job_running(cfg, j)]
    if running:
        say("cancelling the earlier quickstart job(s) %s" % " ".join(running))
        session(cfg, "scancel %s" % " ".join(running))
        wait_slurm_idle(cfg, 4)
    os.remove(path)


def job_running(cfg, job):
    rc, out, _ = session(cfg, "squeue -h -j %s -o %%T" % job, timeout=60)
    return rc == 0 and bool(out.strip())


def job_field(cfg, job, field):
    """One field of `scontrol show job` ("" when the job or the field is unknown)."""
    _, out, _ = session(cfg, "scontrol show job %s" % job, timeout=60)
    m = re.search(r"\b%s=(\S+)" % field, out)
    return m.group(1) if m else ""


def job_state(cfg, job):
    return job_field(cfg, job, "JobState") or "unknown"


def batch_host(cfg, job):
    for _ in range(10):
        host = job_field(cfg, job, "BatchHost")
        if host and host != "(null)":
            return host
        time.sleep(0.5)
    fail("Slurm names no batch host for job %s" % job,
         "look at `scontrol show job %s` on the controller" % job)


class Tail:
    """New whole lines of a file that grows (and may not exist yet)."""

    def __init__(self, path):
        self.path, self.offset, self.rest = path, 0, b""

    def lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
                self.offset = f.tell()
        except OSError:
            return []
        # Whole lines only are decoded: a read may end inside a UTF-8 character.
        parts = (self.rest + data).replace(b"\r", b"\n").split(b"\n")
        self.rest = parts.pop()
        return [p.decode(errors="replace") for p in parts if p.strip()]


def read_ledger(path):
    try:
        text = open(path).read()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # the line being written
    return out


# What each step of a recovery's timeline means, in the user's words.
STEP_WORDS = {
    "Detected": "detected",
    "Marked": "marked in Slurm",
    "StepsCancelled": "job steps on it cancelled",
    "Terminated": "failed instance terminated",
    "Launched": "replacement launched",
    "LifecycleDone": "lifecycle scripts done on the replacement",
    "SlurmdRegistered": "replacement's slurmd registered",
    "Resumed": "node resumed in Slurm",
}


def epoch(v):
    """A time from the CLI's JSON (ISO 8601, as the AWS CLI v2 prints) in seconds."""
    if isinstance(v, (int, float)):
        return float(v)
    return datetime.datetime.fromisoformat(v).timestamp() if v else 0.0


def watch_recovery(cfg, fault, events, live):
    """Prints each new step of the killed node's recovery, then the resumed training."""
    now = time.time()
    if now - fault.get("polled", 0) >= 0.5 and fault.get("recovery", {}).get("Status") not in (
            "Succeeded", "Failed"):
        fault["polled"] = now
        out = hpod(cfg, "describe-recovery", "--cluster-name", cfg.cluster["name"], "--node-id",
                   fault["node"], "--output", "json", capture=True, check=False)
        rec = json.loads(out).get("Recovery", {}) if out.strip() else {}
        # The node's latest recovery may be an older one (it was itself a
        # replacement) until this fault's is written.
        if epoch(rec.get("CreatedTime")) >= fault["t0"] - 1:
            fault["recovery"] = rec
            for step in rec.get("Timeline", []):
                key = (step["Step"], step["Time"])
                if key in fault["seen"]:
                    continue
                fault["seen"].add(key)
                live.println("+%5.1f s  %-40s %s" % (
                    epoch(step["Time"]) - fault["t0"], STEP_WORDS.get(step["Step"], step["Step"]),
                    step.get("Detail", "")))
            if rec.get("Status") == "Failed":
                fail("the recovery of %s failed: %s" % (fault["host"], rec.get("Message", "")),
                     "hpod describe-recovery --cluster-name %s --node-id %s" % (
                         cfg.cluster["name"], fault["node"]))
    starts = [e for e in events if e.get("event") == "start" and e.get("time", 0) > fault["t0"]]
    if starts and not fault.get("resumed"):
        s = starts[-1]
        fault["resumed"] = s
        live.println("+%5.1f s  %-40s attempt %s, from checkpoint step %s" % (
            s.get("time", 0) - fault["t0"], "training restarted", s.get("attempt"),
            s.get("resumed_step")))
    if fault.get("resumed"):
        after = [e for e in events if e.get("event") == "step" and "step" in e
                 and e.get("time", 0) >= max(fault["t0"], fault["resumed"].get("time", 0))]
        if after and fault.get("recovery", {}).get("Status") == "Succeeded":
            live.println("+%5.1f s  %-40s step %d" % (after[0]["time"] - fault["t0"],
                                                       "first training step after the fault",
                                                       after[0]["step"]))
            fault["first_step_s"] = after[0]["time"] - fault["t0"]
            fault["done"] = True
            live.clear()
            hpod(cfg, "describe-recovery", "--cluster-name", cfg.cluster["name"], "--node-id",
                 fault["node"], "--output", "table", show=True, stream=True)
            say("training goes on from the checkpoint:")


def recovery_seconds(rec):
    if rec.get("FinishedTime") and rec.get("CreatedTime"):
        return round(epoch(rec["FinishedTime"]) - epoch(rec["CreatedTime"]), 2)
    return None


def access_key(cfg):
    path = os.path.join(os.path.expanduser("~"), ".aws", "credentials")
    section = None
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "hpod" and line.startswith("aws_access_key_id"):
                return line.split("=", 1)[1].strip(), path
    except OSError:
        pass
    return "(see hpodd init's output)", path


def fmt(v, pattern="%s"):
    return "?" if v is None else pattern % v


def print_summary(cfg, r):
    key, creds = access_key(cfg)
    host_tb = os.path.join(cfg.cluster["fsx"], r["run_dir"][len("/fsx/"):], "tensorboard")
    rows = [
        ("Training", "final loss %s after %s steps; job %s %s, %s attempt(s)" % (
            fmt(r["final_loss"], "%.4f"), fmt(r["steps"]), r["job"], r["job_state"],
            fmt(r["attempts"]))),
        ("Node failure", "kill-node on %s (%s): recovery %s %s in %s s (detected, marked, "
         "replaced with the same hostname)" % (r["killed_host"], r["killed_node"],
                                               r["recovery_id"], r["recovery_status"],
                                               fmt(r["recovery_seconds"]))
         if r["killed_node"] else "none injected (the run was too short)"),
        ("Resume", "first training step %s s after the fault; %s step(s) re-run" % (
            fmt(r["fault_to_first_step_seconds"], "%.1f"), fmt(r["steps_rerun"]))),
        ("Goodput", fmt(r["goodput"] and r["goodput"] * 100, "%.1f %%") +
         " (useful step time over wall time; hpod describe-job-goodput)"),
        ("TensorBoard", "%s/tensorboard on the cluster (%s on this host)" % (r["run_dir"],
                                                                          host_tb)),
        ("Console", "http://127.0.0.1:%d/  sign in with access key %s and its secret (%s, "
         "[hpod])" % (cfg.port, key, creds)),
        ("Shell", "hpod start-session --target %s" % cfg.cluster["target"]),
        ("Explore", "hpod list-cluster-nodes --cluster-name demo --with-slurm --output table\n"
         "hpod describe-recovery --cluster-name demo --node-id %s --output table\n"
         "hpod get-training-metrics --cluster-name demo --path %s/tensorboard"
         % (r["killed_node"], r["run_dir"])),
        ("Tear down", "make quickstart-down   (deletes the cluster and stops hpodd)"),
    ]
    if cfg.node_path:
        rows.insert(0, ("PATH", "export PATH=%s:$PATH   (hpod and hpodd are there)" % cfg.bin))
    if cfg.overridden:
        rows.append(("Note", "your shell sets %s, which hpod and aws take before the 'hpod' "
                     "profile:\nunset them for the commands above" % " ".join(cfg.overridden)))
    for k, v in rows:
        lines = v.split("\n")
        print("  %-13s %s" % (k, lines[0]))
        for line in lines[1:]:
            print("  %-13s %s" % ("", line))


# ---- make quickstart-down ----

def down(cfg, purge=False):
    print("== quickstart-down: %s" % cfg.state, flush=True)
    if os.geteuid() != 0:
        fail("only root can stop hpodd and remove nodes, namespaces and routes",
             "run it as root: sudo make quickstart-down")
    pid = hpodd_pid(cfg)
    nodes_dir = os.path.join(cfg.data, "local", "nodes")
    has_nodes = os.path.isdir(nodes_dir) and os.listdir(nodes_dir)
    if not pid and has_nodes and os.path.exists(os.path.join(cfg.bin, "hpodd")):
        # Nodes outlive hpodd: only hpodd removes them properly.
        say("starting hpodd to remove the nodes it left")
        proc = subprocess.Popen(hpodd_args(cfg), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True, text=True)
        if "ready on" in (proc.stdout.readline() or ""):
            pid = proc.pid
    if pid:
        p = run_hpod(cfg, "list-clusters", "--output", "json")
        if p.returncode != 0:
            # Stopping hpodd now would strand its clusters in the store.
            fail("hpod list-clusters failed: %s" % p.stderr.strip(),
                 "check that ~/.aws's [hpod] profile is the quickstart's (hpodd --data-dir %s "
                 "init rewrites it), then run this again" % cfg.data)
        for c in json.loads(p.stdout or "{}").get("ClusterSummaries", []):
            hpod(cfg, "delete-cluster", "--cluster-name", c["ClusterName"], show=True, check=False)
            hpod(cfg, "wait", "cluster-deleted", "--cluster-name", c["ClusterName"], "--timeout",
                 "300", show=True, stream=True, check=False)
        stop_hpodd(cfg, pid)
    left = sweep(cfg)
    if left:
        say("removed what was left behind: %s" % ", ".join(left))
        if any(x.startswith("netns") for x in left):
            say("the store may still list those nodes: `scripts/quickstart.py down --purge` "
                "starts afresh")
    else:
        say("nothing left: no hpodd, node, namespace, link, guard route or mount of the "
            "quickstart")
    try:
        os.remove(os.path.join(cfg.state, "jobs"))
    except OSError:
        pass
    if purge:
        shutil.rmtree(cfg.state, ignore_errors=True)
        say("removed %s" % cfg.state)
    else:
        say("kept %s (keys, store, data cache); `scripts/quickstart.py down --purge` removes it"
            % cfg.state)


def sweep(cfg):
    """The safety net: anything of the quickstart's link prefix, block or state dir."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            argv = open("/proc/%s/cmdline" % pid, "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if (os.path.basename(argv[0]) in ("hpodd", "hpod-node-init")
                and any(cfg.data in a for a in argv[1:])):
            try:
                os.kill(int(pid), signal.SIGKILL)
                found.append("process %s" % pid)
            except ProcessLookupError:
                pass

    def ip(*args):
        return subprocess.run(["ip"] + list(args), capture_output=True, text=True).stdout

    for ns in ip("netns", "list").split("\n"):
        name = ns.split(" ")[0]
        if name.startswith(cfg.link_prefix + "n"):
            ip("netns", "del", name)
            found.append("netns " + name)
    for line in ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith((cfg.link_prefix + "br", cfg.link_prefix + "v")):
            ip("link", "del", name)
            found.append("link " + name)
    if cfg.block in ip("route", "show", "type", "unreachable"):
        ip("route", "del", "unreachable", cfg.block)
        found.append("route unreachable " + cfg.block)
    with open("/proc/self/mountinfo") as f:
        mounts = [l.split()[4] for l in f if (l.split()[4] + "/").startswith(cfg.state + "/")]
    for m in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)
        found.append("mount " + m)
    return found
