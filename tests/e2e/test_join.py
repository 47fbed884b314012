"""Machines that join hpodd over the network with a join token (issue 25).

A real hpodd (`hpodd-fake`) serves its agents' listener with mutual TLS on
loopback (`--agent-listen 127.0.0.1:0`). Real `hpod-agent join` processes, each
with its own state dir and machine id, join with tokens the real `hpod` CLI
created, and then hold their host channel open as spare hosts. Every refusal the
issue names is checked as the user sees it: hpod-agent's exit status 78 and its
one line — a wrong CA pin (nothing is sent to that server), an expired, used-up or
revoked token, a machine id already joined and live, a certificate hpodd revoked, an
instance type missing or one the machine does not fit (issue 26). A host's states
(Joining, Spare, Retired) and their history are read back with `hpod list-hosts` and
`hpod describe-host`, and moved with `retire-host`, `release-host` and `revoke-host`.
Renewal runs with 15-second certificates. Nothing leaves loopback.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import hpodtest

AGENT = os.path.join(hpodtest.BIN_DIR, "cmd", "hpod-agent", "hpod-agent")
EX_CONFIG = 78
# Every machine here is this one (2 CPUs, 24 GiB on CI): it fits ml.c5.large.
TYPE = "ml.c5.large"


class JoinTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for binary in (AGENT, hpodtest.HPOD_CLI):
            if not os.path.exists(binary):
                raise unittest.SkipTest(binary + " is not built")
        cls.d = hpodtest.Daemon(
            extra_args=["--agent-listen", "127.0.0.1:0", "--agent-cert-validity", "15"]).start()
        assert cls.d.agent_url, "hpodd printed no agents' address"
        cls.tmp = tempfile.mkdtemp(prefix="hpod-join-")
        cls.agents = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.agents:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        cls.d.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------

    def hpod(self, *args):
        return json.loads(self.d.hpod(*args))

    def token(self, **fields):
        args = ["hpod-create-join-token"]
        for k, v in fields.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return self.hpod(*args)["JoinToken"]

    def friendly_token(self, *args):
        """`hpod create-join-token ...` as an admin types it: the bare token on stdout."""
        p = subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", self.d.endpoint,
                            "create-join-token"] + list(args), capture_output=True, text=True,
                           env=self.d.env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("\n"), 1, p.stdout)
        return p.stdout.strip()

    def machine(self, name):
        """A state dir and a machine-id file of its own: one machine per name."""
        state = os.path.join(self.tmp, name)
        os.makedirs(state, exist_ok=True)
        mid = os.path.join(self.tmp, name + ".machine-id")
        if not os.path.exists(mid):
            with open(mid, "w") as f:
                f.write(os.urandom(16).hex() + "\n")
        return state, mid

    def join_args(self, token, name, instance_type=TYPE):
        state, mid = self.machine(name)
        return ([AGENT, "--machine-id-file", mid, "join", "--server", self.d.agent_url,
                 "--state-dir", state] + (["--token", token] if token else []) +
                (["--instance-type", instance_type] if instance_type else []))

    def refused(self, token, name, instance_type=TYPE):
        """Runs a join that must fail; returns its one line on stderr."""
        p = subprocess.run(self.join_args(token, name, instance_type), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, EX_CONFIG, p.stderr)
        lines = [l for l in p.stderr.splitlines() if l.startswith("hpod-agent join: ")]
        self.assertEqual(len(lines), 1, p.stderr)
        return lines[0]

    def start(self, token, name, instance_type=TYPE):
        with open(os.path.join(self.tmp, name + ".log"), "a") as log:  # the child keeps its copy
            p = subprocess.Popen(self.join_args(token, name, instance_type), stdout=log,
                                 stderr=log, text=True)
        self.agents.append(p)
        return p

    def host_of(self, name):
        state, _ = self.machine(name)
        with open(os.path.join(state, "join.json")) as f:
            return json.load(f)["host_id"]

    def listed(self, host_id):
        for h in self.hpod("hpod-list-hosts")["Hosts"]:
            if h["HostId"] == host_id:
                return h
        return None

    def wait_for(self, what, predicate, timeout=30):
        return hpodtest.wait_for(self, what, predicate, timeout)

    def serial_of(self, name):
        state, _ = self.machine(name)
        out = subprocess.run(["openssl", "x509", "-noout", "-serial", "-in",
                              os.path.join(state, "tls", "node.pem")],
                             capture_output=True, text=True, check=True).stdout
        return out.strip().split("=", 1)[1].lower()

    # -- tests -----------------------------------------------------------------

    def test_a_machine_joins_runs_as_a_spare_host_and_renews_its_certificate(self):
        token = self.friendly_token("--pool", "rack4", "--ttl", "10m", "--description", "e2e")
        listed = [t for t in self.hpod("hpod-list-join-tokens")["JoinTokens"]
                  if t.get("Description") == "e2e"]
        self.assertEqual(len(listed), 1, listed)
        self.assertIn(listed[0]["TokenId"], token)
        agent = self.start(token, "alpha")
        self.wait_for("join.json", lambda: os.path.exists(
            os.path.join(self.machine("alpha")[0], "join.json")))
        host_id = self.host_of("alpha")
        self.assertRegex(host_id, r"^h-[0-9a-f]{16}$")
        h = self.wait_for("alpha connected", lambda: (self.listed(host_id) or {}).get("Connected")
                          and self.listed(host_id))
        self.assertEqual(h["Pool"], "rack4")
        self.assertEqual(h["Status"], "Spare")
        with open(self.machine("alpha")[1]) as f:
            self.assertEqual(h["MachineId"], f.read().strip())
        self.assertGreater(h["Cpus"], 0)
        self.assertGreater(h["MemoryMiB"], 0)
        # The key stays on the machine, readable by root only, with the certificate.
        node = os.path.join(self.machine("alpha")[0], "tls", "node.pem")
        self.assertEqual(os.stat(node).st_mode & 0o777, 0o600)
        first = self.serial_of("alpha")
        self.assertEqual(h["CertificateSerial"].lstrip("0"), first.lstrip("0"))

        # 15-second certificates: a new one after 10 s, over the host's channel.
        self.wait_for("a renewed certificate", lambda: self.serial_of("alpha") != first,
                      timeout=40)
        renewed = self.serial_of("alpha")
        self.wait_for("hpod-list-hosts showing it", lambda: (
            self.listed(host_id)["CertificateSerial"].lstrip("0") == renewed.lstrip("0")))
        self.assertIsNone(agent.poll())

        # A join with the same state dir is a restart, not a second join: no token.
        agent.terminate()
        self.assertEqual(agent.wait(timeout=30), 0)
        again = self.start(None, "alpha")
        self.wait_for("alpha reconnected", lambda: self.listed(host_id)["Connected"])
        again.terminate()
        again.wait(timeout=30)

    def test_a_wrong_ca_pin_is_refused_before_anything_is_sent(self):
        token = self.token()
        prefix, pin, rest = token.split(".", 2)
        wrong = ".".join([prefix, "f" * 64, rest])
        line = self.refused(wrong, "pinned")
        self.assertIn("but the token pins " + "f" * 64, line)
        self.assertIn("nothing was sent", line)
        self.assertFalse(os.path.exists(os.path.join(self.machine("pinned")[0], "join.json")))
        # The token was not spent: the right one still joins.
        p = self.start(token, "pinned")
        self.wait_for("join.json", lambda: os.path.exists(
            os.path.join(self.machine("pinned")[0], "join.json")))
        p.terminate()
        p.wait(timeout=30)

    def test_expired_used_up_and_revoked_tokens_are_refused(self):
        short = self.token(ttl_seconds=1)
        time.sleep(1.5)
        self.assertRegex(self.refused(short, "late"), r"join token [0-9a-f]{8} expired at ")

        once = self.token(uses=1)
        p = self.start(once, "first")
        self.wait_for("first joined", lambda: os.path.exists(
            os.path.join(self.machine("first")[0], "join.json")))
        self.assertRegex(self.refused(once, "second"), r"join token [0-9a-f]{8} is used up")
        p.terminate()
        p.wait(timeout=30)

        revoked = self.token()
        token_id = revoked.split(".")[2]
        self.hpod("hpod-revoke-join-token", "--token-id", token_id)
        self.assertIn("join token %s was revoked" % token_id, self.refused(revoked, "third"))
        statuses = {t["TokenId"]: t["Status"] for t in self.hpod("hpod-list-join-tokens")
                    ["JoinTokens"]}
        self.assertEqual(statuses[token_id], "Revoked")
        self.assertEqual(statuses[short.split(".")[2]], "Expired")
        self.assertEqual(statuses[once.split(".")[2]], "UsedUp")

    def test_garbage_is_refused_in_one_line(self):
        self.assertIn("join token", self.refused("hpodjoin1.nope", "garbage"))

    def test_a_live_machine_cannot_join_again_and_a_revoked_host_is_cut_off(self):
        agent = self.start(self.token(), "bravo")
        self.wait_for("bravo joined", lambda: os.path.exists(
            os.path.join(self.machine("bravo")[0], "join.json")))
        host_id = self.host_of("bravo")
        self.wait_for("bravo connected", lambda: self.listed(host_id)["Connected"])

        # The same machine (machine id) from another state dir, while its agent runs.
        clone_state = os.path.join(self.tmp, "bravo-clone")
        os.makedirs(clone_state)
        p = subprocess.run([AGENT, "--machine-id-file", self.machine("bravo")[1], "join",
                            "--server", self.d.agent_url, "--token", self.token(),
                            "--instance-type", TYPE, "--state-dir", clone_state],
                           capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, EX_CONFIG, p.stderr)
        self.assertIn("already joined as host %s and its agent is connected" % host_id, p.stderr)

        # Revoked: the open channel is closed, the agent is refused and exits 78.
        out = self.hpod("hpod-revoke-host", "--host-id", host_id)
        self.assertEqual(out["HostId"], host_id)
        self.assertEqual(agent.wait(timeout=30), EX_CONFIG)
        with open(os.path.join(self.tmp, "bravo.log")) as f:
            log = f.read()
        self.assertRegex(log, r"certificate [0-9a-f]+ of host %s was revoked" % host_id)
        self.assertFalse(self.listed(host_id)["Connected"])
        self.assertEqual(self.listed(host_id)["Status"], "Retired")
        self.assertIn("revoked", self.listed(host_id)["StatusReason"])

    def test_a_host_declares_a_type_it_fits_and_moves_through_its_states(self):
        token = self.friendly_token("--pool", "typed", "--instance-type", TYPE)
        # Neither the token nor the agent naming a type, or one the machine does not
        # fit: refused in one line saying what to do or what differs, and the token
        # is not spent.
        bare = self.token(pool="typed")
        line = self.refused(bare, "untyped", instance_type=None)
        self.assertIn("say which instance type this machine is: hpod-agent join "
                      "--instance-type", line)
        self.assertIn("it fits ml.", line)
        line = self.refused(bare, "untyped", instance_type="ml.p5.48xlarge")
        self.assertRegex(line, r"this machine is not a ml.p5.48xlarge: it has \d+ CPUs, "
                               r"ml.p5.48xlarge has 192; .* it has 0 GPUs, ml.p5.48xlarge has 8")
        self.assertIn("not a HyperPod instance type",
                      self.refused(bare, "untyped", instance_type="ml.x9.huge"))
        statuses = {t["TokenId"]: t["UsesLeft"] for t in self.hpod("hpod-list-join-tokens")
                    ["JoinTokens"]}
        self.assertEqual(statuses[bare.split(".")[2]], 1)

        # The token's type serves when the agent names none.
        agent = self.start(token, "charlie", instance_type=None)
        self.wait_for("charlie joined", lambda: os.path.exists(
            os.path.join(self.machine("charlie")[0], "join.json")))
        host_id = self.host_of("charlie")
        spares = self.wait_for("charlie Spare", lambda: [
            h for h in self.hpod("list-hosts", "--pool", "typed", "--state", "Spare")["Hosts"]
            if h["HostId"] == host_id])
        self.assertEqual(spares[0]["InstanceType"], TYPE)
        self.assertTrue(spares[0]["Connected"])
        self.assertEqual(self.hpod("list-hosts", "--pool", "typed", "--state", "Joining")
                         ["Hosts"], [])

        d = self.hpod("describe-host", "--host-id", host_id)
        self.assertEqual(d["Status"], "Spare")
        self.assertEqual(d["InstanceType"], TYPE)
        self.assertFalse(d["Revoked"])
        self.assertEqual(d["FailuresLast30Days"], 0)
        self.assertGreater(d["Facts"]["Cpus"], 0)
        self.assertNotIn("CurrentInstance", d)
        self.assertEqual([(e.get("From"), e["To"]) for e in d["History"]],
                         [(None, "Joining"), ("Joining", "Spare")])
        self.assertIn("joined pool typed as " + TYPE, d["History"][0]["Reason"])
        self.assertIn("its agent connected", d["History"][1]["Reason"])

        # Retired and released by hand; a revoked host cannot be released.
        out = self.hpod("retire-host", "--host-id", host_id, "--reason", "moving racks")
        self.assertEqual((out["PreviousStatus"], out["Status"]), ("Spare", "Retired"))
        self.assertEqual(self.listed(host_id)["StatusReason"], "moving racks")
        out = self.hpod("release-host", "--host-id", host_id)
        self.assertEqual((out["PreviousStatus"], out["Status"]), ("Retired", "Spare"))
        self.assertEqual(self.hpod("revoke-host", "--host-id", host_id)["Status"], "Retired")
        self.assertEqual(agent.wait(timeout=30), EX_CONFIG)
        p = subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", self.d.endpoint,
                            "release-host", "--host-id", host_id], capture_output=True,
                           text=True, env=self.d.env(), timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ConflictException", p.stderr)
        self.assertIn("join the machine again with a new token", p.stderr)
        d = self.hpod("describe-host", "--host-id", host_id)
        self.assertTrue(d["Revoked"])
        self.assertEqual([e["To"] for e in d["History"]],
                         ["Joining", "Spare", "Retired", "Spare", "Retired"])


if __name__ == "__main__":
    hpodtest.main()
