"""The parts of `make quickstart` (scripts/quickstart.py) on this host: its
settings, its output, running hpod, installing hpod and starting hpodd, and the
lifecycle scripts' source (quickstart_cluster.py has the parts on the cluster).

Everything talks to hpod the way a user does: the installed `hpod` CLI (profile
`hpod`, written by `hpodd init`) and `hpod start-session` on the controller. Only
reading /fsx (the job's output and goodput ledger) goes through the host's copy of
the cluster's shared directory, to follow the job without a session a second."""
import fcntl
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time


class QuickstartError(Exception):
    def __init__(self, what, todo):
        super().__init__(what)
        self.what, self.todo = what, todo


def fail(what, todo):
    raise QuickstartError(what, todo)


# Host paths a node cannot see: each node has its own (node_init.cc).
NODE_PRIVATE = ("/tmp", "/run", "/var/log", "/var/spool", "/var/lib/hpod-agent", "/fsx")


# What the quickstart's hpod calls must not take from the user's shell: AWS
# settings meant for a real AWS account would override the 'hpod' profile that
# `hpodd init` wrote (keys and region before the profile, endpoints before its
# endpoint_url, other config files instead of ~/.aws).
AWS_OVERRIDES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER",
                 "HPOD_ENDPOINT_URL", "HPOD_PROFILE")
SETTINGS = ("prefix", "port", "block", "link_prefix")


class Config:
    """The quickstart's settings: the environment, else what the last `up` with
    this state directory used (so `down` finds the same hpodd), else defaults."""

    def __init__(self):
        env = os.environ
        self.top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.build = os.path.join(self.top, env.get("BUILD", "build"))
        self.state = os.path.abspath(env.get("HPOD_QUICKSTART_DIR", "/var/lib/hpod-quickstart"))
        self.data = os.path.join(self.state, "data")
        try:
            saved = json.load(open(os.path.join(self.state, "settings.json")))
        except (OSError, ValueError):
            saved = {}
        self.prefix = os.path.abspath(env.get("HPOD_PREFIX") or saved.get("prefix", "/usr/local"))
        self.port = int(env.get("HPOD_PORT") or saved.get("port", 8450))
        self.block = env.get("HPOD_NODE_BLOCK") or saved.get("block", "10.77.0.0/16")
        self.link_prefix = env.get("HPOD_LINK_PREFIX") or saved.get("link_prefix", "qs")
        self.bin = os.path.join(self.prefix, "bin")
        self.examples = os.path.join(self.prefix, "share", "hpod", "examples")
        self.steps = int(env.get("HPOD_QUICKSTART_STEPS", "600"))
        self.train_timeout = int(env.get("HPOD_QUICKSTART_TRAIN_TIMEOUT", "900"))
        self.interactive = (env.get("HPOD_QUICKSTART_NONINTERACTIVE") != "1"
                            and sys.stdout.isatty())
        global COLOR
        COLOR = self.interactive
        self.s3 = env.get("HPOD_S3_ENDPOINT", "")
        self.bucket = env.get("HPOD_S3_BUCKET", "hpod-quickstart")
        self.cluster = None
        # Nodes start login shells (PATH from /etc/profile): name the prefix's bin
        # when it is not one of those directories.
        std = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".split(":")
        self.node_path = "" if self.bin in std else "export PATH=%s:$PATH; " % self.bin
        self.overridden = [k for k in AWS_OVERRIDES if env.get(k)]
        self.env = {k: v for k, v in env.items() if k not in AWS_OVERRIDES}
        self.env.update(HPOD_PROFILE="hpod", AWS_EC2_METADATA_DISABLED="true")

    def save(self):
        os.makedirs(self.state, exist_ok=True)
        with open(os.path.join(self.state, "settings.json"), "w") as f:
            json.dump({k: getattr(self, k) for k in SETTINGS}, f)


# ---- output ----

COLOR = False


def header(n, title):
    print("\n\033[1m== %d/6  %s\033[0m" % (n, title) if COLOR else "\n== %d/6  %s" % (n, title),
          flush=True)


def say(text):
    print("  " + text.replace("\n", "\n  "), flush=True)


def show_cmd(text):
    print("  $ " + text, flush=True)


class LiveLine:
    """One status line rewritten in place on a terminal; plain lines otherwise."""

    def __init__(self, cfg):
        self.live = cfg.interactive
        self.text = ""

    def update(self, text):
        if not self.live:
            print("  " + text, flush=True)
            return
        width = shutil.get_terminal_size((120, 20)).columns - 3
        self.text = text if len(text) <= width else text[:width - 1] + "…"
        sys.stdout.write("\r\033[K  " + self.text)
        sys.stdout.flush()

    def println(self, text):
        if self.live and self.text:
            sys.stdout.write("\r\033[K")
        print("  " + text, flush=True)
        if self.live and self.text:
            sys.stdout.write("  " + self.text)
            sys.stdout.flush()

    def clear(self, keep=False):
        if self.live and self.text:
            sys.stdout.write("\n" if keep else "\r\033[K")
            sys.stdout.flush()
        self.text = ""


# ---- hpod, hpodd ----

def run_hpod(cfg, *args, timeout=60):
    """The installed hpod CLI with the quickstart's environment; its output captured."""
    return subprocess.run([os.path.join(cfg.bin, "hpod")] + list(args), env=cfg.env,
                          capture_output=True, text=True, timeout=timeout)


def hpod(cfg, *args, show=False, stream=False, capture=False, check=True, hint=None,
         timeout=900):
    """Runs the installed hpod CLI; shows the command as a user types it. Returns its
    stdout ("" when streamed to the terminal)."""
    if show:
        show_cmd("hpod " + shlex.join(args))
    if stream:
        p = subprocess.run([os.path.join(cfg.bin, "hpod")] + list(args), env=cfg.env,
                           timeout=timeout)
        out, err = "", ""
    else:
        p = run_hpod(cfg, *args, timeout=timeout)
        out, err = p.stdout, p.stderr
        if show and not capture and out.strip():
            say(out.rstrip())
    if check and p.returncode != 0:
        fail("`hpod %s` failed (exit %d)%s" % (args[0], p.returncode,
                                               (": " + err.strip()) if err else ""),
             hint or "look at %s/hpodd.log; `make quickstart-down` removes what was started"
             % cfg.data)
    return out


def describe(cfg, name):
    """DescribeCluster's answer, or None when there is no such cluster."""
    p = run_hpod(cfg, "describe-cluster", "--cluster-name", name, "--output", "json")
    if p.returncode != 0:
        if "ResourceNotFound" in p.stderr:
            return None
        fail("hpod describe-cluster failed: %s" % p.stderr.strip(),
             "is hpodd running? (%s/hpodd.log)" % cfg.data)
    return json.loads(p.stdout)


def hpodd_pid(cfg):
    """The pid of the hpodd serving the quickstart's data dir, or None. hpodd holds
    an flock on <data-dir>/hpodd.lock while it runs and writes its pid there."""
    try:
        fd = os.open(os.path.join(cfg.data, "hpodd.lock"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it
    except OSError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)


def hpodd_argv(pid):
    try:
        return open("/proc/%d/cmdline" % pid, "rb").read().decode(errors="replace").split("\0")
    except OSError:
        return []


def alive(pid):
    """Whether a process runs (a zombie waiting for init to reap it does not)."""
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


def stop_hpodd(cfg, pid):
    """SIGTERM, then SIGKILL after 30 s; nodes keep running (they outlive hpodd)."""
    show_cmd("kill %d   # hpodd" % pid)
    try:
        os.kill(pid, 15)
        for _ in range(300):
            if not alive(pid):
                return
            time.sleep(0.1)
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def preflight(cfg):
    if os.geteuid() != 0:
        fail("hpodd's local provider creates network namespaces, bridges and mounts",
             "run it as root: sudo make quickstart")
    for what, path in (("HPOD_QUICKSTART_DIR", cfg.state), ("HPOD_PREFIX", cfg.prefix)):
        if any(path == p or path.startswith(p + "/") for p in NODE_PRIVATE):
            fail("%s=%s is a directory the nodes cannot see (each node has its own %s)" % (
                what, path, ", ".join(NODE_PRIVATE)), "choose one elsewhere, e.g. under /var/lib")
    for tool in ("ip", "unshare", "nsenter", "slurmctld", "slurmd", "munged"):
        if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            fail("%s is not installed" % tool, "run `make deps` (scripts/install-deps.sh)")
    if not os.path.exists(os.path.join(cfg.build, "cmd", "hpodd", "hpodd")):
        fail("hpod is not built in %s" % cfg.build, "run `make` first")


def install(cfg):
    show_cmd("cmake --install %s --prefix %s   # make install" % (
        os.path.relpath(cfg.build, cfg.top), cfg.prefix))
    p = subprocess.run(["cmake", "--install", cfg.build, "--prefix", cfg.prefix],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail("installing into %s failed: %s" % (cfg.prefix, (p.stderr or p.stdout).strip()[-500:]),
             "run `make` and check that %s is writable" % cfg.prefix)
    changed = sum(1 for l in p.stdout.splitlines() if l.startswith("-- Installing"))
    say("hpod, hpodd, hpod-agent, hpod-train, hpod-data in %s/bin, spank_hpod.so in %s/lib/hpod,"
        " the console and examples in %s/share/hpod (%d files updated)" % (
            cfg.prefix, cfg.prefix, cfg.prefix, changed))


def hpodd_args(cfg):
    args = [os.path.join(cfg.bin, "hpodd"), "--data-dir", cfg.data, "--listen",
            "127.0.0.1:%d" % cfg.port, "--node-block", cfg.block, "--link-prefix",
            cfg.link_prefix]
    if cfg.s3:
        args += ["--s3-endpoint", cfg.s3]
    return args


def start_hpodd(cfg):
    os.makedirs(cfg.state, exist_ok=True)
    pid = hpodd_pid(cfg)
    if pid:
        argv = hpodd_argv(pid)
        listen = argv[argv.index("--listen") + 1] if "--listen" in argv else ""
        if listen != "127.0.0.1:%d" % cfg.port:
            fail("the quickstart's hpodd (pid %d) serves %s, not port %d" % (pid, listen, cfg.port),
                 "`make quickstart-down` first to change HPOD_PORT")
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            exe = ""
        if exe.endswith(" (deleted)"):
            # A rebuilt hpodd was installed over it: nodes outlive a restart.
            say("hpodd (pid %d) runs a binary that was replaced since: restarting it" % pid)
            stop_hpodd(cfg, pid)
            pid = None
    show_cmd("hpodd --data-dir %s init --listen 127.0.0.1:%d" % (cfg.data, cfg.port))
    p = subprocess.run([os.path.join(cfg.bin, "hpodd"), "--data-dir", cfg.data, "init",
                        "--listen", "127.0.0.1:%d" % cfg.port], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        fail("hpodd init failed: %s" % p.stderr.strip(), "check that %s is writable" % cfg.state)
    say("\n".join(l for l in p.stdout.splitlines() if not l.startswith(("Next:", "Then:"))))
    if pid:
        say("hpodd is already running (pid %d, http://127.0.0.1:%d)" % (pid, cfg.port))
        return
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", cfg.port)) == 0:
            fail("port %d is in use by another program" % cfg.port,
                 "stop it, or choose another port: HPOD_PORT=8460 make quickstart")
    show_cmd("hpodd %s &" % shlex.join(hpodd_args(cfg)[1:]))
    out = open(os.path.join(cfg.state, "hpodd.out"), "w")
    err = open(os.path.join(cfg.state, "hpodd.err"), "w")
    # Its own session: a Ctrl-C of the quickstart must not stop the daemon.
    proc = subprocess.Popen(hpodd_args(cfg), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(300):
        text = open(os.path.join(cfg.state, "hpodd.out")).read()
        if "ready on" in text:
            say(text.strip() + " (pid %d; log %s/hpodd.log)" % (proc.pid, cfg.data))
            return
        if proc.poll() is not None:
            last = open(os.path.join(cfg.state, "hpodd.err")).read().strip().splitlines()[-3:]
            fail("hpodd stopped at start: %s" % " / ".join(last),
                 "if it names the node block, another hpodd or a route uses it: choose a free "
                 "one, e.g. HPOD_NODE_BLOCK=10.78.0.0/16 make quickstart")
        time.sleep(0.1)
    fail("hpodd did not answer within 30 s", "look at %s/hpodd.log" % cfg.data)


def lifecycle_source(cfg):
    """base-config through the seed's s3:// path when a local S3 is configured."""
    local = os.path.join(cfg.examples, "lifecycle", "base-config")
    if not cfg.s3:
        return "file://%s/" % local
    if not shutil.which("aws") or not os.environ.get("HPOD_S3_ACCESS_KEY_ID"):
        fail("HPOD_S3_ENDPOINT is set, but %s" % (
            "the aws CLI is not installed (it uploads the scripts)" if not shutil.which("aws")
            else "HPOD_S3_ACCESS_KEY_ID / HPOD_S3_SECRET_ACCESS_KEY are not"),
             "set them, or unset HPOD_S3_ENDPOINT to serve the scripts through file://")
    env = dict(cfg.env, AWS_ACCESS_KEY_ID=os.environ.get("HPOD_S3_ACCESS_KEY_ID", ""),
               AWS_SECRET_ACCESS_KEY=os.environ.get("HPOD_S3_SECRET_ACCESS_KEY", ""),
               AWS_DEFAULT_REGION=os.environ.get("HPOD_S3_REGION", "us-east-1"))
    env.pop("HPOD_PROFILE", None)
    uri = "s3://%s/LifecycleScripts/base-config/" % cfg.bucket
    aws = ["aws", "--endpoint-url", cfg.s3, "s3"]
    subprocess.run(aws + ["mb", "s3://" + cfg.bucket], env=env, capture_output=True, timeout=60)
    show_cmd("aws --endpoint-url %s s3 sync %s/ %s" % (cfg.s3, local, uri))
    p = subprocess.run(aws + ["sync", "--delete", local + "/", uri], env=env, capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        fail("uploading the lifecycle scripts to %s failed: %s" % (uri, p.stderr.strip()),
             "check HPOD_S3_ENDPOINT and HPOD_S3_ACCESS_KEY_ID/HPOD_S3_SECRET_ACCESS_KEY, or "
             "unset HPOD_S3_ENDPOINT to use file://")
    return uri
