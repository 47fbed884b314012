"""hpod start-session through a real terminal: tmux runs the CLI on a PTY, the
shell on the node gets a PTY of the same size (and follows a resize), a command
typed in runs on the node, and the shell's exit status becomes the CLI's. Needs
root and tmux."""
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402


class StartSessionTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not shutil.which("tmux"):
            print("SKIP: tmux is not installed")
            sys.exit(hpodtest.SKIP)
        cls.d = nodestest.NodesDaemon("t3p")
        try:
            lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\necho ok\n")
            cls.d.start()
            spec = os.path.join(cls.d.root, "c.json")
            with open(spec, "w") as f:
                json.dump([nodestest.lcs_group("workers", 1, "file://%s/" % lcs)], f)
            cls.d.hpod("create-cluster", "--cluster-name", "pty", "--instance-groups",
                       "file://" + spec)
            out = cls.d.wait_status("pty", "InService", timeout=180)
            node = cls.d.nodes("pty")[0]
            cls.target = "sagemaker-cluster:%s_%s-%s" % (
                out["ClusterArn"].split("/")[-1], node["InstanceGroupName"], node["InstanceId"])
            cls.iid = node["InstanceId"]
            cls.hostname = cls.d.in_node(node["InstanceId"], "hostname").stdout.strip()
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.sock] + list(args), capture_output=True,
                              text=True, check=check, timeout=30)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "s").stdout

    def wait_screen(self, text, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.screen()
            if text in s:
                return s
            time.sleep(0.2)
        self.fail("never saw %r on the terminal:\n%s\n--- hpodd ---\n%s" % (
            text, self.screen(), self.d.log_tail()))

    def test_interactive_shell(self):
        self.sock = "hpod-e2e-%d" % os.getpid()
        status = os.path.join(self.d.root, "status")
        env = " ".join("%s=%s" % (k, v) for k, v in self.d.env().items()
                       if k.startswith("AWS_"))
        cmd = "env %s %s --endpoint-url %s --region %s start-session --target %s; " \
              "echo EXIT=$? > %s; sleep 30" % (env, nodestest.HPOD, self.d.endpoint,
                                               hpodtest.REGION, self.target, status)
        self.tmux("new-session", "-d", "-s", "s", "-x", "120", "-y", "40", cmd)
        self.addCleanup(lambda: self.tmux("kill-server", check=False))
        self.wait_screen("Starting session with SessionId: s-")
        # A prompt from the node's shell, then a command typed on this terminal.
        self.wait_screen(self.hostname)
        self.tmux("send-keys", "-t", "s", "echo answer-$((6*7)) on $(hostname); stty size",
                  "Enter")
        self.wait_screen("answer-42 on " + self.hostname)
        # The node's PTY has our terminal's size.
        self.wait_screen("\n40 120")
        # The node's terminal follows a resize of ours.
        self.tmux("resize-window", "-t", "s", "-x", "100", "-y", "30")
        time.sleep(0.5)
        self.tmux("send-keys", "-t", "s", "clear; stty size", "Enter")
        self.wait_screen("30 100")
        self.tmux("send-keys", "-t", "s", "exit 5", "Enter")
        deadline = time.time() + 30
        while time.time() < deadline and not os.path.exists(status):
            time.sleep(0.2)
        with open(status) as f:
            self.assertEqual(f.read().strip(), "EXIT=5")
        self.assertIn("Exiting session with sessionId: s-", self.screen())

    def test_user_keys_open_user_sessions_only_and_change_no_cluster(self):
        p = nodestest.run(nodestest.HPODD, "--data-dir", self.d.data_dir, "create-key", "--role",
                          "user")
        kv = dict(l.split(" = ") for l in p.stdout.splitlines() if " = " in l)
        env = {"AWS_ACCESS_KEY_ID": kv["aws_access_key_id"],
               "AWS_SECRET_ACCESS_KEY": kv["aws_secret_access_key"]}
        base = [nodestest.HPOD, "--endpoint-url", self.d.endpoint, "--region", hpodtest.REGION]
        e = self.d.env()
        for k in ("AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
            e.pop(k, None)
        e.update(env)
        # Not as root: a root shell is the whole node.
        root = subprocess.run(base + ["start-session", "--target", self.target, "--command",
                                      "id -un"], capture_output=True, text=True, env=e,
                              timeout=60)
        self.assertNotEqual(root.returncode, 0)
        self.assertIn("AccessDenied", root.stderr)
        self.assertIn("--user", root.stderr)
        # As a user of the node (its own /etc/passwd): yes.
        self.d.in_node(self.iid,
                       "id carol >/dev/null 2>&1 || useradd --create-home --uid 2901 carol")
        ok = subprocess.run(base + ["start-session", "--target", self.target, "--user", "carol",
                                    "--command", "echo user-session; id -un"],
                            capture_output=True, text=True, env=e, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(ok.stdout.split(), ["user-session", "carol"])
        denied = subprocess.run(base + ["delete-cluster", "--cluster-name", "pty"],
                                capture_output=True, text=True, env=e, timeout=60)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("AccessDenied", denied.stderr)

    def test_unknown_target_is_a_clear_error(self):
        bad = self.target.rsplit("-i-", 1)[0] + "-i-0123456789abcdef0"
        p = self.d.hpod("start-session", "--target", bad, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not found", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


if __name__ == "__main__":
    hpodtest.main()
