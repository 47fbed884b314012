"""The web console in a real browser (Debian's chromium, headless, driven by
playwright-core: web/e2e/console.e2e.mjs) against the real hpodd on real
namespaced nodes with Slurm.

One cluster, step by step: a wrong key is refused; the admin signs in, creates a
1+2 cluster (controller group of 1, worker group of 2) from the form and sees it
reach InService; a shell on a worker runs `hostname`; the worker group is scaled
to 3; a kill-node fault on a worker is injected and its recovery timeline
followed to the end; a focused button keeps the focus while the tables refresh,
and a malformed address (#/clusters/%E0) shows the cluster list; a small hpod-train
run on /fsx is plotted; a user key sees no delete (nor create, scale, fault) button
and a DeleteCluster signed with it by the console's own client is refused
(AccessDeniedException); the admin deletes the cluster with the typed
confirmation. The Content-Security-Policy blocks nothing but xterm's inline
styles. Each page's screenshot (some also at a 400 px wide window) goes to
$HPOD_TEST_ARTIFACTS (default build/test-artifacts/console).

Needs root, Slurm, chromium, node with web/node_modules, and the built console
(build/web/dist); exits 77 (skipped) without them."""
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WEB = os.path.join(TOP, "web")
DRIVER = os.path.join(WEB, "e2e", "console.e2e.mjs")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
DIST = os.path.join(hpodtest.BIN_DIR, "web", "dist", "index.html")
TRAIN = os.path.join(hpodtest.BIN_DIR, "cmd", "hpod-train", "hpod-train")
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
CLUSTER = "console"
RUN_DIR = "/fsx/runs/console/tensorboard"
TRAIN_STEPS = 20


def skip(why):
    print("SKIP: " + why)
    sys.exit(hpodtest.SKIP)


def require_browser():
    if not os.path.exists(CHROMIUM):
        skip("%s is not installed (scripts/install-deps.sh)" % CHROMIUM)
    if not shutil.which("node"):
        skip("node is not installed")
    if not os.path.isdir(os.path.join(WEB, "node_modules", "playwright-core")):
        skip("web/node_modules is missing (the console build runs npm ci)")
    if not os.path.exists(DIST):
        skip("%s is not built" % DIST)
    if not os.path.exists(PROMETHEUS):
        skip("%s is not installed (scripts/install-deps.sh)" % PROMETHEUS)
    if not os.path.exists(TRAIN):
        skip("%s is not built" % TRAIN)


def timestamp(text):
    """The CLI's ISO 8601 timestamps ("2026-12-01T23:16:22.412000+00:00", "...Z")."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrong_secret(secret):
    """`secret` with its last character changed: always a different key. (Not just
    secret[:-1] + "x": secrets are 40 characters of A-Z a-z 0-9 + /, so 1 in 64
    ends in "x" already, and that "wrong" key was the admin's own and signed in.)"""
    wrong = secret[:-1] + ("x" if secret[-1] != "x" else "y")
    assert wrong != secret
    return wrong


def parse_key(text):
    kv = dict(l.split(" = ", 1) for l in text.splitlines() if " = " in l)
    return kv["aws_access_key_id"].strip(), kv["aws_secret_access_key"].strip()


class Browser:
    """The node driver as a child: one JSON line per step each way."""

    def __init__(self, endpoint, artifacts):
        env = dict(os.environ, HPOD_CONSOLE_URL=endpoint, HPOD_TEST_ARTIFACTS=artifacts,
                   CHROMIUM=CHROMIUM)
        self.proc = subprocess.Popen(["node", DRIVER], cwd=WEB, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def step(self, step_name, **args):
        """Runs one step; its result, or AssertionError with the driver's error."""
        name = step_name
        started = time.time()
        self.proc.stdin.write(json.dumps(dict(step=name, **args)) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the browser driver exited (%s) during step %s" % (
                self.proc.poll(), name))
        reply = json.loads(line)
        print("step %-16s %5.1f s" % (name, time.time() - started), file=sys.stderr)
        if not reply["ok"]:
            raise AssertionError("step %s failed: %s\nscreenshot: %s\npage text: %s" % (
                name, reply["error"], reply.get("screenshot"), reply.get("page", "")[:2000]))
        return reply["result"]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write('{"step": "quit"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Here, not in setUp: unittest turns a SystemExit in setUp into an error.
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            skip("Debian's slurm packages are not installed")
        require_browser()

    def setUp(self):
        self.artifacts = os.environ.get("HPOD_TEST_ARTIFACTS") or os.path.join(
            hpodtest.BIN_DIR, "test-artifacts", "console")
        shutil.rmtree(self.artifacts, ignore_errors=True)
        os.makedirs(self.artifacts)
        self.browser = None
        self.trainer = None
        self.d = nodestest.NodesDaemon("t7c")
        self.addCleanup(self.d.cleanup)  # deletes the cluster, stops hpodd, sweeps
        self.lcs = os.path.join(self.d.root, "lcs")
        nodestest.write_script(os.path.join(self.lcs, "on_create.sh"),
                               "#!/bin/bash\necho console lifecycle on $(hostname)\n")
        with open(os.path.join(self.d.aws_dir, "credentials")) as f:
            self.admin = parse_key(f.read())
        self.user = parse_key(nodestest.run(nodestest.HPODD, "--data-dir", self.d.data_dir,
                                            "create-key", "--role", "user").stdout)
        self.d.start()
        self.start_prometheus()
        self.browser = Browser(self.d.endpoint, self.artifacts)
        self.addCleanup(self.browser.close)

    def tearDown(self):
        if self.trainer:
            self.trainer.join(timeout=120)

    # ---- Prometheus (issue 16, "Metrics") ----

    def start_prometheus(self):
        """Debian's prometheus on loopback, scraping this hpodd every second with
        examples/observability/prometheus.yml (its token file and target swapped
        for this run's), started early so that it has samples by the time the
        cluster is up."""
        with open(os.path.join(TOP, "examples", "observability", "prometheus.yml")) as f:
            config = f.read()
        for old, new in (("/var/lib/hpod/metrics-token",
                          os.path.join(self.d.data_dir, "metrics-token")),
                         ('"127.0.0.1:8450"', '"127.0.0.1:%d"' % self.d.port),
                         ("scrape_interval: 5s", "scrape_interval: 1s"),
                         ("scrape_timeout: 5s", "scrape_timeout: 1s")):
            self.assertIn(old, config, "examples/observability/prometheus.yml changed shape")
            config = config.replace(old, new)
        path = os.path.join(self.d.root, "prometheus.yml")
        with open(path, "w") as f:
            f.write(config)
        nodestest.run(PROMTOOL, "check", "config", path)
        self.prom_port = free_port()
        self.prom_log = open(os.path.join(self.d.root, "prometheus.out"), "w")
        self.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + path,
             "--storage.tsdb.path=" + os.path.join(self.d.root, "prometheus"),
             "--web.listen-address=127.0.0.1:%d" % self.prom_port],
            stdout=self.prom_log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop_prometheus)

    def stop_prometheus(self):
        if self.prom.poll() is None:
            self.prom.terminate()
            try:
                self.prom.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.prom.kill()
                self.prom.wait(timeout=10)
        self.prom_log.close()

    def promql(self, query, want, timeout=30):
        """Polls an instant PromQL query through Prometheus' HTTP API until `want`
        (a function of the result's float values, sorted) holds; the values."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.prom_port, urllib.parse.urlencode({"query": query}))
        deadline = time.time() + timeout
        values = None
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = json.load(r)
                self.assertEqual(body["status"], "success", body)
                values = sorted(float(x["value"][1]) for x in body["data"]["result"])
                if want(values):
                    return values
            except OSError:
                pass  # not listening yet
            time.sleep(0.5)
        self.fail("PromQL %s: %s after %d s\n%s" % (query, values, timeout,
                                                       open(self.prom_log.name).read()[-2000:]))

    def check_metrics(self):
        """While the cluster is up (1 controller + 3 workers) and after the
        kill-node recovery: Prometheus has scraped hpodd, the node counts are the
        API's, and the recovery's duration is the one hpodd recorded."""
        c = 'cluster_name="%s"' % CLUSTER
        self.promql('up{job="hpodd"}', lambda v: v == [1.0])
        self.promql('sum(hpod_nodes{%s,status="Running"})' % c, lambda v: v == [4.0])
        self.promql('hpod_nodes{%s,instance_group="workers",status="Running"}' % c,
                    lambda v: v == [3.0])
        # One target serves every node's host figures (the agents' heartbeats).
        self.promql('count(hpod_node_memory_total_bytes{%s})' % c, lambda v: v == [4.0])
        recoveries = [r for r in self.d.hpod_json("hpod-list-recoveries", "--cluster-name",
                                                  CLUSTER)["Recoveries"]
                      if r["Status"] == "Succeeded"]
        self.assertEqual(len(recoveries), 1, recoveries)
        r = recoveries[0]
        took = (timestamp(r["FinishedTime"]) - timestamp(r["CreatedTime"])).total_seconds()
        got = self.promql('hpod_recovery_last_duration_seconds{%s,kind="Replace"}' % c,
                          lambda v: len(v) == 1)
        self.assertAlmostEqual(got[0], took, delta=0.01)
        self.promql('hpod_recoveries_total{%s,kind="Replace",outcome="Succeeded"}' % c,
                    lambda v: v == [1.0])
        print("prometheus: recovery of %s took %.2f s" % (r["NodeId"], got[0]), file=sys.stderr)

    # ---- helpers ----

    def worker_ids(self):
        return sorted(n["InstanceId"] for n in self.d.nodes(CLUSTER)
                      if n["InstanceGroupName"] == "workers" and
                      n["InstanceStatus"]["Status"] == "Running")

    def start_training(self):
        """hpod-train for a few steps on the controller (through a session, as a
        user runs it), writing TensorBoard events under /fsx, in the background
        while the browser goes on."""
        cluster = self.d.hpod_json("describe-cluster", "--cluster-name", CLUSTER)
        controller = [n for n in self.d.nodes(CLUSTER) if n["InstanceGroupName"] == "controller"][0]
        target = "sagemaker-cluster:%s_controller-%s" % (cluster["ClusterArn"].split("/")[-1],
                                                         controller["InstanceId"])
        self.d.session(target, "mkdir -p /fsx/bin && touch /fsx/bin/.console-here")
        marks = [root for root, _, files in os.walk(self.d.fsx_root) if ".console-here" in files]
        self.assertEqual(len(marks), 1, marks)
        shutil.copy(TRAIN, os.path.join(marks[0], "hpod-train"))
        self.train_out = {}

        def train():
            self.train_out["stdout"] = self.d.session(
                target, "/fsx/bin/hpod-train --model ci --data synthetic --seq-len 32 "
                "--batch-size 4 --threads 1 --max-steps %d --progress none "
                "--tensorboard-dir %s && echo TRAINED" % (TRAIN_STEPS, RUN_DIR), check=False)

        self.trainer = threading.Thread(target=train, daemon=True)
        self.trainer.start()

    # ---- the test ----

    def test_console(self):
        b = self.browser
        started = time.time()
        b.step("open")
        wrong = b.step("signin", keyId=self.admin[0], secret=wrong_secret(self.admin[1]),
                       refused=True, shot="signin-refused")
        self.assertRegex(wrong["error"], r"SignatureDoesNotMatch|InvalidSignature|"
                                         r"UnrecognizedClient|AccessDenied|IncompleteSignature")
        self.assertEqual(wrong["stored"], 0, "a refused key is not kept")
        me = b.step("signin", keyId=self.admin[0], secret=self.admin[1], shot="clusters-admin")
        self.assertEqual(me["identity"], "%s (admin)" % self.admin[0])
        self.assertEqual(me["storage"]["local"], 0, "keys never go to localStorage")
        self.assertEqual(me["storage"]["cookies"], "", "nor into cookies")

        src = "file://%s/" % self.lcs
        b.step("create_cluster", name=CLUSTER, groups=[
            dict(name="controller", instanceType="ml.c5.xlarge", count=1, source=src,
                 onCreate="on_create.sh", slurm="Controller"),
            dict(name="workers", instanceType="ml.c5.xlarge", count=2, source=src,
                 onCreate="on_create.sh", slurm="Compute", partition="dev")])
        rows = b.step("wait_cluster", name=CLUSTER, nodes=3, timeoutS=300)["rows"]
        self.assertEqual(len(rows), 3, rows)
        self.start_training()

        worker = self.worker_ids()[0]
        hostname = self.d.in_node(worker, "hostname").stdout.strip()
        shell = b.step("shell", cluster=CLUSTER, nodeId=worker, command="hostname",
                       expect=hostname)
        self.assertIn(hostname, shell["lines"])

        b.step("scale", cluster=CLUSTER, group="workers", count=3, nodes=4)
        self.assertEqual(len(self.worker_ids()), 3)

        victim = self.worker_ids()[-1]
        self.recovery = b.step("inject_fault", cluster=CLUSTER, nodeId=victim, kind="kill-node")
        self.assertEqual(self.recovery["status"], "Succeeded", self.recovery)
        self.assertTrue(any("Resumed" in s for s in self.recovery["timeline"]), self.recovery)
        self.check_metrics()

        kept = b.step("focus_kept", cluster=CLUSTER)
        for where, focus in kept.items():
            self.assertTrue(focus["before"], kept)
            self.assertEqual(focus["after"], focus["before"],
                             "the %s table took the focus away on a refresh" % where)

        # Hosts beside clusters (issue 26): the list is what HpodListHosts says —
        # empty with local nodes on the Unix socket, the nodes' hosts over TLS.
        hosts = b.step("hosts")
        self.assertEqual(hosts["heading"], "Hosts")
        api_hosts = self.d.hpod_json("list-hosts")["Hosts"]
        self.assertEqual(hosts["empty"], not api_hosts, hosts)
        self.assertEqual(len(hosts["rows"]), len(api_hosts), hosts)

        self.trainer.join(timeout=120)
        self.assertIn("TRAINED", self.train_out.get("stdout", ""), self.train_out)
        plot = b.step("training", cluster=CLUSTER, path="runs/console/tensorboard",
                      minPoints=TRAIN_STEPS)
        self.assertEqual(plot["points"], TRAIN_STEPS, plot)
        self.assertGreater(plot["canvas"][0], 100, plot)

        b.step("signin", keyId=self.user[0], secret=self.user[1], shot="clusters-user")
        view = b.step("user_view", cluster=CLUSTER, nodeId=self.worker_ids()[0])
        self.assertEqual(view["shown"], [], "admin actions shown to a user key")
        denied = view["deleteCall"]
        self.assertFalse(denied["ok"], denied)
        self.assertEqual(denied["type"], "AccessDeniedException", denied)
        self.assertEqual(self.d.hpod_json("describe-cluster", "--cluster-name",
                                          CLUSTER)["ClusterStatus"], "InService")

        b.step("signin", keyId=self.admin[0], secret=self.admin[1], shot="clusters-admin-again")
        gone = b.step("delete_cluster", name=CLUSTER)
        self.assertTrue(gone["disabledWhenWrong"] and gone["enabledWhenRight"], gone)
        self.d.wait_status(CLUSTER, None, timeout=120)

        problems = b.step("problems")
        print("console problems: %s" % json.dumps(problems), file=sys.stderr)
        self.assertEqual(problems["errors"], [])
        # The only thing the policy blocks is xterm's inline styling (styles.css
        # carries the same rules): nothing from script-, connect-, img-, font-src...
        # A <style> xterm adds may be reported after it left the terminal (a closed
        # shell), outside .xterm: it is known by the same source line.
        xterm = {v["source"] for v in problems["csp"] if v["where"] == "xterm"}
        unexpected = [v for v in problems["csp"]
                      if not (v["directive"] in ("style-src", "style-src-elem", "style-src-attr")
                              and v["blocked"] == "inline" and
                              (v["where"] == "xterm" or v["source"] in xterm))]
        self.assertEqual(unexpected, [], problems["csp"])
        print("console e2e: %.0f s; screenshots in %s" % (time.time() - started, self.artifacts),
              file=sys.stderr)


if __name__ == "__main__":
    hpodtest.main()
