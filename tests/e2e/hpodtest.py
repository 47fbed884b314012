"""Shared support for hpod's end-to-end tests.

Starts a real hpodd (the test-only `hpodd-fake`, i.e. hpodd with the scripted
fake provider) on a free loopback port with a private data dir, and gives the
environment that makes the real `aws` CLI and boto3 talk to it. Nothing leaves
loopback. Every daemon started is stopped by PID in stop()/kill().
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BIN_DIR = os.environ.get("HPOD_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
HPODD_FAKE = os.path.join(BIN_DIR, "tests", "hpodd-fake")
HPOD_CLI = os.path.join(BIN_DIR, "cmd", "hpod", "hpod")
REGION = "us-west-2"
SKIP = 77  # ctest SKIP_RETURN_CODE


def require_aws_clients():
    """Exit with SKIP unless the image's awscli v1 with the HyperPod model and boto3 exist."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("SKIP: boto3 is not importable by", sys.executable)
        sys.exit(SKIP)
    aws = shutil.which("aws")
    if not aws:
        print("SKIP: no aws CLI on PATH")
        sys.exit(SKIP)
    out = subprocess.run([aws, "--version"], capture_output=True, text=True)
    if not (out.stdout + out.stderr).startswith("aws-cli/1."):
        print("SKIP: aws CLI is not v1 with the HyperPod model:", out.stdout + out.stderr)
        sys.exit(SKIP)


class Daemon:
    """One hpodd-fake process with its own data dir, profile and fake-provider state."""

    def __init__(self, pending_ms=100, fail_groups="", capacity=None, extra_args=(), root=None):
        self.root = root or tempfile.mkdtemp(prefix="hpod-e2e-")
        self.data_dir = os.path.join(self.root, "data")
        self.aws_dir = os.path.join(self.root, "aws")
        self.fake_dir = os.path.join(self.root, "fake")
        self.env_extra = {
            "HPOD_FAKE_STATE_DIR": self.fake_dir,
            "HPOD_FAKE_PENDING_MS": str(pending_ms),
            "HPOD_FAKE_FAIL_GROUPS": fail_groups,
        }
        if capacity is not None:
            self.env_extra["HPOD_FAKE_CAPACITY"] = str(capacity)
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None
        if not os.path.exists(os.path.join(self.data_dir, "state.db")):
            out = subprocess.run(
                [HPODD_FAKE, "--data-dir", self.data_dir, "init", "--aws-dir", self.aws_dir,
                 "--region", REGION, "--listen", "127.0.0.1:1"],
                capture_output=True, text=True, check=True)
            self.init_output = out.stdout

    def start(self):
        """Starts hpodd-fake on the data dir (again, after stop()/kill(): same state)."""
        env = dict(os.environ, **self.env_extra)
        self._close_log()
        self.log = open(os.path.join(self.root, "hpodd.out"), "a")
        self.proc = subprocess.Popen(
            [HPODD_FAKE, "--data-dir", self.data_dir, "--listen", "127.0.0.1:0",
             "--region", REGION] + self.extra_args,
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        line = self.proc.stdout.readline()
        # With --agent-listen, the agents' address comes first.
        self.agent_url = None
        joins = re.search(r"agents join on (https://\S+)", line)
        if joins:
            self.agent_url = joins.group(1)
            line = self.proc.stdout.readline()
        m = re.search(r"ready on (https?)://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise RuntimeError("hpodd-fake did not start: %r (see %s)" % (line, self.log.name))
        self.scheme = m.group(1)
        self.port = int(m.group(2))
        return self

    @property
    def endpoint(self):
        return "%s://127.0.0.1:%d" % (getattr(self, "scheme", "http"), self.port)

    @property
    def ca_bundle(self):
        """hpodd's CA (`hpodd init` made it): what clients verify its TLS listener against."""
        return os.path.join(self.data_dir, "tls", "ca.pem")

    def stop(self):
        """SIGTERM and wait; returns the exit status (None if it was not running)."""
        rc = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=30)
        self._forget_proc()
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._forget_proc()

    def _forget_proc(self):
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def restart(self):
        """kill -9 (if running) and start again on the same data dir and fake state."""
        self.kill()
        return self.start()

    def cleanup(self):
        self.kill()
        self._close_log()
        shutil.rmtree(self.root, ignore_errors=True)

    def _close_log(self):
        log = getattr(self, "log", None)
        if log is not None and not log.closed:
            log.close()

    def fake_nodes(self, live_only=True):
        """The fake provider's nodes: {instance_id: record} from HPOD_FAKE_STATE_DIR.

        A terminated node's file lingers (terminated_at >= 0) until the daemon
        describes it once more; live_only drops those."""
        nodes = {}
        try:
            names = os.listdir(self.fake_dir)
        except FileNotFoundError:
            return nodes
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.fake_dir, name)) as f:
                    rec = json.load(f)
            except (FileNotFoundError, ValueError):
                continue  # erased (or being replaced) meanwhile
            if live_only and rec.get("terminated_at", -1) >= 0:
                continue
            nodes[rec["instance_id"]] = rec
        return nodes

    # Clients -----------------------------------------------------------------
    def env(self, **extra):
        """Environment for the aws CLI / hpod CLI using the profile hpodd init wrote."""
        return client_env(self.aws_dir, AWS_MAX_ATTEMPTS="1", **extra)

    def aws(self, *args, check=True, **env):
        """Runs `aws sagemaker <args>`; returns (rc, parsed stdout or text, stderr)."""
        cmd = ["aws", "--endpoint-url", self.endpoint, "--region", REGION, "sagemaker"] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env(**env), timeout=120)
        if check and p.returncode != 0:
            raise AssertionError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr))
        try:
            out = json.loads(p.stdout) if p.stdout.strip() else None
        except ValueError:
            out = p.stdout
        return p.returncode, out, p.stderr

    def hpod(self, *args, output="json"):
        """Runs the hpod CLI against this daemon (`--output output`); its stdout.
        AssertionError with hpod's own line when it fails."""
        p = subprocess.run([HPOD_CLI, "--endpoint-url", self.endpoint, "--output", output] +
                           list(args), capture_output=True, text=True, env=self.env(),
                           timeout=60)
        if p.returncode != 0:
            raise AssertionError("hpod %s: %s" % (args, p.stderr))
        return p.stdout

    def boto3(self):
        import boto3
        import botocore.config
        creds = read_profile(os.path.join(self.aws_dir, "credentials"), "hpod")
        session = boto3.session.Session(
            aws_access_key_id=creds["aws_access_key_id"],
            aws_secret_access_key=creds["aws_secret_access_key"], region_name=REGION)
        return session.client("sagemaker", endpoint_url=self.endpoint,
                              config=botocore.config.Config(retries={"max_attempts": 1}))

    def wait_status(self, name, want, timeout=60):
        """Polls DescribeCluster until ClusterStatus is `want` (or gone, for want=None)."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            rc, out, err = self.aws("describe-cluster", "--cluster-name", name, check=False)
            if want is None and rc != 0 and "ResourceNotFound" in err:
                return None
            if rc == 0:
                last = out["ClusterStatus"]
                if last == want:
                    return out
            time.sleep(0.2)
        raise AssertionError("cluster %s never reached %s (last %s)" % (name, want, last))


def client_env(aws_dir, **extra):
    """os.environ without ambient AWS credentials, pointed at the 'hpod' profile that
    `hpodd init --aws-dir aws_dir` wrote, plus `extra`."""
    e = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
              "AWS_CA_BUNDLE"):  # would override the profile's ca_bundle
        e.pop(k, None)
    e.update({
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(aws_dir, "credentials"),
        "AWS_CONFIG_FILE": os.path.join(aws_dir, "config"),
        "AWS_PROFILE": "hpod",
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    e.update(extra)
    return e


def wait_cluster(client, name, want, timeout=60):
    """Like Daemon.wait_status but polls through a boto3 client (no CLI start-up per poll).

    want=None waits until DescribeCluster answers ResourceNotFound."""
    import botocore.exceptions
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            out = client.describe_cluster(ClusterName=name)
        except botocore.exceptions.ClientError as e:
            if want is None and e.response["Error"]["Code"] == "ResourceNotFound":
                return None
            raise
        last = out["ClusterStatus"]
        if last == want:
            return out
        time.sleep(0.1)
    raise AssertionError("cluster %s never reached %s (last %s)" % (name, want, last))


def wait_for(test, what, predicate, timeout=30, detail=lambda: ""):
    """`predicate()`'s first truthy value, polled every 0.2 s; `test` fails after
    `timeout` s with `what` and `detail()` (logs worth reading) in its message."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.2)
    test.fail("timed out waiting for %s%s" % (what, detail()))


def parallel(*calls, workers=4):
    """Runs the zero-argument callables concurrently (each aws CLI run is mostly a
    Python start-up); returns their results in order, re-raising the first failure."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


def aws_error_line(operation, code):
    """The line the aws CLI prints (exit 255) for a service error."""
    return "An error occurred (%s) when calling the %s operation: " % (code, operation)


class CliTestCase(unittest.TestCase):
    """Base for tests that drive the aws CLI against `self.d` (a started Daemon)."""

    d = None

    def cli(self, *args, daemon=None, **env):
        """Runs `aws sagemaker <args>`, which must succeed; returns its parsed output."""
        rc, out, err = (daemon or self.d).aws(*args, check=False, **env)
        self.assertEqual(rc, 0, "aws sagemaker %s failed: %s" % (" ".join(args), err))
        return out

    def cli_error(self, operation, code, *args, daemon=None, **env):
        """Runs a command that must fail with exit 255 and the AWS error line for `code`;
        returns the message that follows the line."""
        rc, out, err = (daemon or self.d).aws(*args, check=False, **env)
        self.assertEqual(rc, 255, "expected exit 255 from %s, got %d: %s %s" % (args, rc, out, err))
        line = aws_error_line(operation, code)
        self.assertIn(line, err)
        return err.split(line, 1)[1].strip()


def read_profile(path, section):
    values, current = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                current = line.strip("[]")
            elif "=" in line and current == section:
                k, v = line.split("=", 1)
                values[k.strip()] = v.strip()
    return values


def group(name, count, instance_type="ml.c5.xlarge", **extra):
    g = {"InstanceGroupName": name, "InstanceType": instance_type, "InstanceCount": count,
         "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lcs/base-config/",
                             "OnCreate": "on_create.sh"},
         "ExecutionRole": "arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole"}
    g.update(extra)
    return g


def main():
    """unittest main that exits 0/1 and prints ctest-friendly summary lines."""
    unittest.main(verbosity=2)
