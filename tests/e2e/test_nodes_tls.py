"""Local nodes whose agents reach hpodd over the network, as remote machines do:
`hpodd --agent-transport tls`. No socket of hpodd's is bound into a node; each node
joins with its launch's join token at https://<the node block's last address>:8451
(one route through its bridge), keeps its key and certificate on its own disk, and
talks to hpodd over mutual TLS. On that path the seed's journey runs as it does
over the Unix socket (test_auto_resume.py's first two tests, on a 1+3 Slurm
cluster): an --auto-resume training job across three workers, then the same job
through a kill-node fault whose replacement (a new machine, a new join) keeps the
hostname, and ends with the undisturbed run's loss, bit for bit. Needs root and
Debian's slurm packages."""
import ipaddress
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402
import test_auto_resume  # noqa: E402  (a module: its own test class is not collected here)


class TlsAgentsTest(test_auto_resume.AutoResumeTest):
    PREFIX = "t5t"
    HPODD_ARGS = ("--agent-transport", "tls")

    # Only the undisturbed job and the kill-node recovery run again on TLS; the other
    # faults differ from kill-node in how hpod finds them, not in the agents' path.
    test_3_hang_and_partition_are_recovered_the_same_way = None
    test_4_a_users_action_replace_during_the_job = None
    test_5_batch_host_killed_requeues_and_resumes = None
    test_6_without_auto_resume_the_job_fails = None
    test_7_bad_option_values_are_one_line_errors = None
    test_8_a_rolling_software_update_keeps_the_job_running = None
    test_9_a_pytorch_ddp_job_resumes_from_its_snapshot = None

    def all_hosts(self):
        return self.d.hpod_json("list-hosts")["Hosts"]

    def hosts(self):
        """{instance id: host} of the hosts serving a node now."""
        return {h["InstanceId"]: h for h in self.all_hosts() if "InstanceId" in h}

    def test_0_every_node_joined_over_the_network(self):
        block = ipaddress.ip_network(self.d.block)
        self.assertEqual(self.d.agent_url, "https://%s:8451" % (block.broadcast_address - 1))
        hosts = self.hosts()
        nodes = self.d.nodes("ar")
        self.assertEqual(len(nodes), 4)
        for n in nodes:
            iid = n["InstanceId"]
            h = hosts.get(iid)
            self.assertIsNotNone(h, "%s did not join: %s" % (iid, hosts))
            self.assertEqual(h["Pool"], "nodes")
            self.assertTrue(h["Connected"], h)
            self.assertEqual(h["Status"], "Assigned", h)
            # No socket of hpodd's is mounted in the node (only the node's own disk,
            # which the local provider keeps under the data dir); its agent dials https.
            points = [l.split()[1] for l in
                      self.d.in_node(iid, "cat /proc/mounts").stdout.splitlines()]
            self.assertNotIn("/run/hpod", points)
            self.assertEqual(self.d.in_node(iid, "ls /run/hpod 2>&1 || true").stdout.strip(),
                             "ls: cannot access '/run/hpod': No such file or directory")
            config = self.d.in_node(iid, "cat /var/lib/hpod-agent/agent.json").stdout
            self.assertIn('"endpoint": "%s"' % self.d.agent_url, config)
            self.assertNotIn("bootstrap_token", config)
            # Its key and certificate: 0600, on its own disk.
            mode = self.d.in_node(iid, "stat -c %a /var/lib/hpod-agent/tls/node.pem").stdout
            self.assertEqual(mode.strip(), "600")
            # The certificate it presents is the one hpodd lists for its host.
            serial = self.d.in_node(
                iid, "openssl x509 -noout -serial -in /var/lib/hpod-agent/tls/node.pem").stdout
            self.assertEqual(re.sub(r"^serial=", "", serial.strip()).lower().lstrip("0"),
                             h["CertificateSerial"].lower().lstrip("0"))
            # The one route to hpodd's address is through the node's bridge.
            route = self.d.in_node(iid, "ip -o route get %s" % (block.broadcast_address - 1))
            self.assertIn(" via ", route.stdout)
        # hpodd made no key for a node: each is on that node's own disk (which the
        # local provider keeps under the data dir), nowhere else.
        keys = [os.path.join(r, f) for r, _, fs in os.walk(self.d.data_dir) for f in fs
                if f == "node.pem"]
        disks = os.path.join(self.d.data_dir, "local", "nodes")
        self.assertEqual([k for k in keys if not k.startswith(disks + "/")], [])
        self.assertTrue(all(re.search(r"/nodes/i-[0-9a-f]+/disk/state/tls/node\.pem$", k)
                            for k in keys), keys)

    def test_2b_the_replacement_joined_as_a_new_host(self):
        hosts = self.hosts()
        for iid in self.workers():
            self.assertIn(iid, hosts, "replacement %s did not join" % iid)
            self.assertTrue(hosts[iid]["Connected"], hosts[iid])
            self.assertEqual(hosts[iid]["Status"], "Assigned", hosts[iid])
        everyone = self.all_hosts()
        machines = [h["MachineId"] for h in everyone]
        self.assertEqual(len(machines), len(set(machines)), "each node is its own machine")
        # The killed node's host served that launch only: Retired, serving nothing.
        retired = [h for h in everyone if h["Status"] == "Retired"]
        self.assertEqual(len(retired), 1, everyone)
        self.assertNotIn("InstanceId", retired[0])
        self.assertIn("terminated for replacement", retired[0]["StatusReason"])


if __name__ == "__main__":
    unittest.main()
