"""Machines of a pool, each a separate machine as far as it can tell (issue 26).

Three rig hosts (hostrig.py: own network namespace on a bridge, own mounts,
hostname, pids, machine id, boot id and disk; nothing of hpodd's visible) join a
real hpodd (`hpodd-fake`, whose --agent-listen is the bridge's address) with one
token, each running `hpod-agent join --server URL --token TOKEN --instance-type T`
under a PID 1 that plays systemd (Restart=always, RestartPreventExitStatus=78).
Checked as an admin sees it with the real `hpod` CLI: the hosts are Spare with
their own facts; an agent killed with SIGKILL is back under the same host id
without a token; a reboot is seen as a new boot id; a revoked host's agent exits
78 and is not started again. Traffic stays on the rig's bridge and loopback.
"""
import json
import os
import time
import unittest

import hostrig
import hpodtest

AGENT = os.path.join(hpodtest.BIN_DIR, "cmd", "hpod-agent", "hpod-agent")
TYPE = "ml.c5.large"  # every rig host is this machine: 2 CPUs, 24 GiB on CI


class HostPoolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the rig needs root (namespaces, a bridge, mounts)")
        for binary in (AGENT, hpodtest.HPOD_CLI):
            if not os.path.exists(binary):
                raise unittest.SkipTest(binary + " is not built")
        cls.rig = hostrig.Rig(3)
        try:
            cls.d = hpodtest.Daemon(extra_args=[
                "--agent-listen", cls.rig.server_ip + ":0"]).start()
            token = cls.hpod_cls("create-join-token", "--uses", "3", "--pool", "rack1",
                                 "--ttl", "10m", output="text").strip()
            for h in cls.rig.hosts:
                cls.rig.boot(h, AGENT, cls.d.agent_url, token, TYPE)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        d = getattr(cls, "d", None)
        cls.rig.cleanup()  # the hosts first: nothing of theirs outlives the test
        if d is not None:
            d.cleanup()

    @classmethod
    def hpod_cls(cls, *args, output="json"):
        return cls.d.hpod(*args, output=output)

    def hpod(self, *args):
        return json.loads(self.hpod_cls(*args))

    def hosts(self):
        """{hostname: summary} of pool rack1."""
        return {h.get("Hostname"): h for h in self.hpod("list-hosts", "--pool", "rack1")["Hosts"]}

    def wait_for(self, what, predicate, timeout=60):
        def logs():
            return "; agent logs:\n" + "\n".join(
                "== %s\n%s" % (h.name, h.read_log()[-2000:]) for h in self.rig.hosts)
        return hpodtest.wait_for(self, what, predicate, timeout, logs)

    def all_spare(self):
        hosts = self.hosts()
        ok = len(hosts) == 3 and all(h["Status"] == "Spare" and h["Connected"]
                                     for h in hosts.values())
        return hosts if ok else None

    def test_1_hosts_join_as_separate_machines_and_wait_as_spares(self):
        hosts = self.wait_for("three connected Spare hosts", self.all_spare)
        self.assertEqual(sorted(hosts), ["host0", "host1", "host2"])
        self.assertEqual(len({h["MachineId"] for h in hosts.values()}), 3)
        self.assertEqual(len({h["HostId"] for h in hosts.values()}), 3)
        for rig_host in self.rig.hosts:
            h = hosts[rig_host.name]
            self.assertEqual(h["InstanceType"], TYPE)
            d = self.hpod("describe-host", "--host-id", h["HostId"])
            self.assertIn(rig_host.ip, d["Facts"]["Addresses"])
            self.assertEqual(d["Facts"]["BootId"], rig_host.boot_id())
            self.assertEqual([e["To"] for e in d["History"]], ["Joining", "Spare"])
            # What a person sees inside: its own identity, none of hpodd's files,
            # no route but its own /24 (hpodd's agents' address is on it).
            inside = rig_host.sh(
                "hostname; cat /etc/machine-id; test -e %s && echo VISIBLE || echo hidden; "
                "ls /var/lib/hpod-agent; ip -4 route" % self.d.data_dir).stdout.split("\n")
            self.assertEqual(inside[0], rig_host.name)
            self.assertEqual(inside[1], h["MachineId"])
            self.assertEqual(inside[2], "hidden")
            self.assertIn("join.json", inside)
            routes = [r for r in inside if "proto kernel" in r or "default" in r]
            self.assertEqual(len(routes), 1, inside)
            self.assertNotIn("default", routes[0])

    def test_2_a_killed_agent_comes_back_without_a_token(self):
        hosts = self.wait_for("three connected Spare hosts", self.all_spare)
        victim = self.rig.hosts[0]
        before = victim.agent_pids()
        self.assertEqual(len(before), 1, before)
        victim.sh("kill -9 %d" % before[0])
        self.wait_for("a new agent", lambda: victim.agent_pids() and
                      victim.agent_pids() != before)
        again = self.wait_for("host0 connected again", self.all_spare)
        self.assertEqual(again["host0"]["HostId"], hosts["host0"]["HostId"])
        self.assertIn("agent exited", victim.read_log())
        # The token was spent by the three joins: the restart did not need it.
        tokens = self.hpod("hpod-list-join-tokens")["JoinTokens"]
        self.assertEqual([t["Status"] for t in tokens if t["Pool"] == "rack1"], ["UsedUp"])

    def test_3_a_reboot_is_seen_as_a_new_boot_id(self):
        hosts = self.wait_for("three connected Spare hosts", self.all_spare)
        victim = self.rig.hosts[1]
        host_id = hosts[victim.name]["HostId"]
        old = victim.boot_id()
        victim.reboot()
        self.wait_for("a new boot id", lambda: victim.boot_id() != old)
        new = victim.boot_id()
        d = self.wait_for("hpodd seeing the reboot", lambda: (
            lambda d: d if d["Facts"]["BootId"] == new and d["Connected"] else None)(
                self.hpod("describe-host", "--host-id", host_id)))
        self.assertEqual(d["Status"], "Spare")
        self.assertIn("rebooting", victim.read_log())

    def test_4_a_revoked_host_is_cut_off_and_not_restarted(self):
        hosts = self.wait_for("three connected Spare hosts", self.all_spare)
        victim = self.rig.hosts[2]
        out = self.hpod("revoke-host", "--host-id", hosts[victim.name]["HostId"])
        self.assertEqual(out["Status"], "Retired")
        self.wait_for("the agent's exit 78", lambda: "not restarting" in victim.read_log())
        time.sleep(2)  # the init would have restarted it within a second
        self.assertEqual(victim.agent_pids(), [])
        h = self.hosts()[victim.name]
        self.assertFalse(h["Connected"])
        self.assertEqual(h["Status"], "Retired")


if __name__ == "__main__":
    hpodtest.main()
