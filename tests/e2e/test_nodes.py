"""Real nodes end to end: hpodd with the local provider creates a controller and
three workers as Linux namespaces, runs their lifecycle scripts (file://) as
HyperPod does, and reaches InService; then the nodes are checked from inside
(hostnames, /etc/hosts, a TCP connection between nodes, /fsx, resource_config),
the network guard is checked from the host, a group is scaled up and down, and
deleting the cluster leaves nothing behind. Needs root."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402

ON_CREATE = r"""#!/bin/bash
set -euo pipefail
echo "on_create on $(hostname) in $(pwd)"
# HyperPod's contract: cwd is the downloaded prefix, the resource config path is set.
test "$SAGEMAKER_RESOURCE_CONFIG_PATH" = /opt/ml/config/resource_config.json
source ./utils/helper.sh
test -d /opt/sagemaker_cluster
mkdir -p /fsx/markers
cp "$SAGEMAKER_RESOURCE_CONFIG_PATH" "/fsx/markers/$(hostname).rc.json"
pwd > "/fsx/markers/$(hostname).cwd"
helper_says
echo "[INFO]: Success: All provisioning scripts completed"
"""

HELPER = """helper_says() { echo "helper was fetched with the prefix"; }
"""


class NodesTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        cls.d = nodestest.NodesDaemon("t3n")
        try:
            cls.lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(cls.lcs, "on_create.sh"), ON_CREATE)
            nodestest.write_script(os.path.join(cls.lcs, "utils", "helper.sh"), HELPER)
            # Before hpodd runs no guard exists; once it runs, the guard exists
            # before any node namespace does (checked in test_0).
            cls.guard_before = cls.d.block in nodestest.host_routes()
            cls.d.start()
            cls.guard_after_start = [l for l in nodestest.host_routes().splitlines()
                                     if l.startswith("unreachable " + cls.d.block)]
            cls.netns_after_start = nodestest.run("ip", "netns", "list").stdout
            src = "file://" + cls.lcs + "/"
            groups = [nodestest.lcs_group("controller-machine", 1, src,
                                          SlurmConfig={"NodeType": "Controller"}),
                      nodestest.lcs_group("worker-group-1", 3, src)]
            spec = os.path.join(cls.d.root, "cluster.json")
            with open(spec, "w") as f:
                json.dump(groups, f)
            t0 = time.time()
            cls.d.hpod("create-cluster", "--cluster-name", "demo", "--instance-groups",
                       "file://" + spec)
            cls.described = cls.d.wait_status("demo", "InService", timeout=240)
            cls.create_seconds = time.time() - t0
            cls.nodes = cls.d.nodes("demo")
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def test_0_guard_route_precedes_every_node(self):
        self.assertFalse(self.guard_before, "guard route existed before hpodd started")
        self.assertEqual(len(self.guard_after_start), 1, nodestest.host_routes())
        self.assertNotIn("t3nn", self.netns_after_start)
        # From the host, every node address resolves to our bridge, never via a gateway.
        for n in self.nodes:
            ip = self.d.hpod_json("describe-cluster-node", "--cluster-name", "demo", "--node-id",
                                  n["InstanceId"])["NodeDetails"]["PrivatePrimaryIp"]
            route = nodestest.run("ip", "route", "get", ip).stdout
            self.assertNotIn(" via ", route, route)
            self.assertIn("dev t3nbr", route, route)
        # An address of the block that no node holds cannot leave the host either.
        base = self.d.block.split(".")
        stray = "%s.%s.250.9" % (base[0], base[1])
        route = nodestest.run("ip", "route", "get", stray, check=False)
        self.assertNotEqual(route.returncode, 0, route.stdout)
        self.assertIn("No route to host", route.stderr)

    def test_1_cluster_in_service_with_four_running_nodes(self):
        self.assertEqual(self.described["ClusterStatus"], "InService")
        self.assertEqual(len(self.nodes), 4)
        for n in self.nodes:
            self.assertEqual(n["InstanceStatus"]["Status"], "Running", n)
        print("create-cluster -> InService (1+3 nodes): %.1f s" % self.create_seconds)

    def node_details(self):
        out = []
        for n in self.nodes:
            out.append(self.d.hpod_json("describe-cluster-node", "--cluster-name", "demo",
                                        "--node-id", n["InstanceId"])["NodeDetails"])
        return out

    def test_2_hostnames_resolve_and_nodes_talk(self):
        details = self.node_details()
        names = {d["InstanceId"]: "ip-" + d["PrivatePrimaryIp"].replace(".", "-") for d in details}
        self.assertEqual(len(set(names.values())), 4)
        ips = {d["InstanceId"]: d["PrivatePrimaryIp"] for d in details}
        for iid, name in names.items():
            got = self.d.in_node(iid, "hostname").stdout.strip()
            self.assertEqual(got, name)
            # Every node resolves every other node's name to its address.
            for other, oname in names.items():
                line = self.d.in_node(iid, "getent hosts " + oname).stdout.split()
                self.assertEqual(line[0], ips[other], (iid, oname, line))
            # The only default route inside a node is its own loopback: nothing
            # for an outside address leaves it.
            routes = self.d.in_node(iid, "ip route").stdout
            self.assertEqual([r.split()[:3] for r in routes.splitlines() if "default" in r],
                             [["default", "dev", "lo"]], routes)
        # A real TCP connection from one node to another, by name.
        a, b = details[0]["InstanceId"], details[1]["InstanceId"]
        listener = self.d.in_node(
            b, "(python3 -c 'import socket;s=socket.socket();"
               "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind((\"0.0.0.0\",7777));"
               "s.listen();c,_=s.accept();c.sendall(b\"hello from \"+socket.gethostname().encode());"
               "c.close()' >/dev/null 2>&1 </dev/null &) ; sleep 0.5")
        self.assertEqual(listener.returncode, 0)
        got = self.d.in_node(a, "exec 3<>/dev/tcp/%s/7777; cat <&3" % names[b]).stdout
        self.assertEqual(got, "hello from " + names[b])

    def test_3_fsx_is_shared(self):
        a, b = self.nodes[0]["InstanceId"], self.nodes[3]["InstanceId"]
        self.d.in_node(a, "echo written-on-$(hostname) > /fsx/shared.txt")
        got = self.d.in_node(b, "cat /fsx/shared.txt").stdout.strip()
        self.assertEqual(got, "written-on-" + self.d.in_node(a, "hostname").stdout.strip())
        # /tmp is each node's own.
        self.d.in_node(a, "echo mine > /tmp/private.txt")
        self.assertNotEqual(self.d.in_node(b, "cat /tmp/private.txt", check=False).returncode, 0)

    def test_4_resource_config_matches_cluster(self):
        details = self.node_details()
        by_id = {d["InstanceId"]: d for d in details}
        for d in details:
            rc = json.loads(self.d.in_node(d["InstanceId"],
                                           "cat /opt/ml/config/resource_config.json").stdout)
            self.assertEqual(rc["ClusterConfig"]["ClusterName"], "demo")
            self.assertEqual(rc["ClusterConfig"]["ClusterArn"], self.described["ClusterArn"])
            groups = {g["Name"]: g for g in rc["InstanceGroups"]}
            self.assertEqual(set(groups), {"controller-machine", "worker-group-1"})
            self.assertEqual(groups["worker-group-1"]["InstanceType"], "ml.c5.xlarge")
            seen = {}
            for g in rc["InstanceGroups"]:
                for inst in g["Instances"]:
                    seen[inst["InstanceId"]] = (g["Name"], inst["CustomerIpAddress"],
                                                inst["InstanceName"])
            self.assertEqual(set(seen), set(by_id))
            for iid, (gname, ip, iname) in seen.items():
                self.assertEqual(ip, by_id[iid]["PrivatePrimaryIp"])
                self.assertEqual(gname, by_id[iid]["InstanceGroupName"])
                self.assertRegex(iname, "^" + gname + r"-\d+$")
        # The script ran in /tmp/sagemaker-lifecycle-<id>/src on every node.
        for d in details:
            host = "ip-" + d["PrivatePrimaryIp"].replace(".", "-")
            with open(os.path.join(self.d.fsx_root, self.described["ClusterArn"].split("/")[-1],
                                   "markers", host + ".cwd")) as f:
                self.assertRegex(f.read().strip(), r"^/tmp/sagemaker-lifecycle-[^/]+/src$")

    def test_5_logs_show_the_lifecycle_output(self):
        iid = self.nodes[0]["InstanceId"]
        out = self.d.hpod("logs", "--cluster-name", "demo", "--node-id", iid).stdout
        self.assertIn("on_create on ip-", out)
        self.assertIn("helper was fetched with the prefix", out)
        self.assertIn("[INFO]: Success: All provisioning scripts completed", out)
        agent = self.d.hpod("logs", "--cluster-name", "demo", "--node-id", iid, "--stream",
                            "Agent").stdout
        self.assertTrue(agent.strip(), "empty agent log")
        # Also on disk, where an admin finds them.
        cid = self.described["ClusterArn"].split("/")[-1]
        self.assertTrue(os.path.exists(os.path.join(self.d.data_dir, "logs", cid, iid,
                                                    "LifecycleConfig.log")))

    def test_6_start_session_command(self):
        iid = self.nodes[1]["InstanceId"]
        group = self.nodes[1]["InstanceGroupName"]
        cid = self.described["ClusterArn"].split("/")[-1]
        target = "sagemaker-cluster:%s_%s-%s" % (cid, group, iid)
        p = self.d.hpod("start-session", "--target", target, "--command",
                        "hostname; echo to-stderr >&2; exit 7", check=False)
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertIn("ip-", p.stdout)
        self.assertIn("to-stderr", p.stdout + p.stderr)
        events = self.d.hpod_json("list-cluster-events", "--cluster-name", "demo")["Events"]
        self.assertTrue(any("Session s-" in e.get("Description", "") for e in events), events)
        # The agent blocks SIGTERM/SIGINT for its signal watcher and ignores
        # SIGPIPE; a session's shell must start with neither (or Ctrl-C,
        # timeout(1) and kill would not work in it).
        p = self.d.hpod("start-session", "--target", target, "--command",
                        "grep -E '^Sig(Blk|Ign)' /proc/self/status")
        masks = dict(line.split(":\t") for line in p.stdout.split("\n") if ":\t" in line)
        # Standard signals only: 32 and 33 are glibc's own, which no process
        # can reset (an ignored 32 inherited from the environment stays).
        self.assertEqual(int(masks["SigBlk"], 16) & 0x7fffffff, 0, p.stdout)
        self.assertEqual(int(masks["SigIgn"], 16) & 0x7fffffff, 0, p.stdout)
        # Nothing of hpodd's environment reaches the node.
        env = self.d.in_node(iid, "cat /proc/1/environ | tr '\\0' '\\n'").stdout
        self.assertNotIn("AWS_", env)
        self.assertNotIn("HPOD_", env)
        self.assertIn("PATH=", env)

    def test_7_scale_up_and_down(self):
        cid = self.described["ClusterArn"].split("/")[-1]
        src = "file://" + self.lcs + "/"

        def update(count):
            groups = [nodestest.lcs_group("controller-machine", 1, src,
                                          SlurmConfig={"NodeType": "Controller"}),
                      nodestest.lcs_group("worker-group-1", count, src)]
            spec = os.path.join(self.d.root, "update.json")
            with open(spec, "w") as f:
                json.dump(groups, f)
            self.d.hpod("update-cluster", "--cluster-name", "demo", "--instance-groups",
                        "file://" + spec)
            self.d.wait_status("demo", "InService", timeout=240)
            # The update is done once the node list matches too.
            deadline = time.time() + 60
            while time.time() < deadline:
                nodes = self.d.nodes("demo")
                if len(nodes) == count + 1:
                    return nodes
                time.sleep(0.5)
            self.fail("node count never became %d" % (count + 1))

        nodes = update(4)
        self.assertTrue(all(n["InstanceStatus"]["Status"] == "Running" for n in nodes))
        netns = [n for n in nodestest.run("ip", "netns", "list").stdout.split()
                 if n.startswith("t3nn")]
        self.assertEqual(len(netns), 5)
        new = [n for n in nodes if n["InstanceId"] not in {x["InstanceId"] for x in self.nodes}]
        self.assertEqual(len(new), 1)
        # The new node ran its scripts too and sees every node in /etc/hosts.
        hosts = self.d.in_node(new[0]["InstanceId"], "cat /etc/hosts").stdout
        self.assertEqual(hosts.count("ip-"), 5, hosts)
        nodes = update(2)
        netns = [n for n in nodestest.run("ip", "netns", "list").stdout.split()
                 if n.startswith("t3nn")]
        self.assertEqual(len(netns), 3)
        self.assertTrue(os.path.isdir(os.path.join(self.d.fsx_root, cid)))

    def test_9_delete_leaves_nothing_behind(self):
        self.d.hpod("delete-cluster", "--cluster-name", "demo")
        self.d.wait_status("demo", None, timeout=120)
        left = self.d.leftovers()
        self.assertEqual(left, [], left)
        # The guard stays while hpodd runs; stopping hpodd with no nodes drops it.
        self.assertIn("unreachable " + self.d.block, nodestest.host_routes())
        self.d.stop()
        self.assertNotIn(self.d.block, nodestest.host_routes())


if __name__ == "__main__":
    hpodtest.main()
