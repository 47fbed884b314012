// The local provider on real namespaces: two nodes running `sleep` in place of the
// agent. Needs root, iproute2 and util-linux; skips cleanly otherwise. Uses the
// test-only node blocks 10.213.0.0/16 and 10.214.0.0/16 and the link prefixes "ht"
// and "hu" (one pair per test, so ctest -j runs them side by side), so it never touches
// a running hpodd's nodes, and removes everything it made even when it fails.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"
#include "hpod/provider/local/local_provider.h"

namespace hpod::provider::local {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// Each test's own block and prefix: `{block, prefix}` by the test's name.
struct TestNet {
  const char* block;
  const char* prefix;
};
TestNet NetOf(const std::string& test) {
  if (test.find("Fault") != std::string::npos) return {"10.214.0.0/16", "hu"};
  return {"10.213.0.0/16", "ht"};
}

// Output of a command that is expected to run (stdout + stderr merged).
std::string Sh(const std::string& script) {
  SubprocessOptions o;
  o.argv = {"bash", "-c", script};
  o.merge_stderr = true;
  o.timeout = 20s;
  auto r = RunCommand(o);
  if (!r.ok()) return "ERROR: " + r.status().ToString();
  return r->stdout_data;
}

// Command lines of running processes that contain `needle` (node-init's --config).
std::vector<std::string> ProcessesMentioning(const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // read(2), not an istreambuf_iterator: a process that exits while it is read
    // makes the stream throw (ESRCH), and processes of other tests come and go.
    auto text = ReadFile((e.path() / "cmdline").string());
    if (!text.ok()) continue;
    std::string cmd = *text;
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(name + ": " + cmd);
  }
  return out;
}

bool Have(const std::string& program) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "command -v " + program};
  auto r = RunCommand(o);
  return r.ok() && r->exit_code == 0;
}

// Removes whatever carries our test-only names (safe: nothing else uses them).
void ForceCleanup(const char* block, const char* prefix) {
  Sh(std::string("for n in $(ls /run/netns 2>/dev/null | grep '^") + prefix +
     "n'); do ip netns del $n; done; "
     "for l in $(ls /sys/class/net | grep -E '^" +
     prefix +
     "(v|br)'); do ip link del $l; done; "
     "ip route del unreachable " +
     block + " 2>/dev/null; true");
}

class LocalProviderRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    for (const char* p : {"ip", "unshare", "nsenter", "bash", "python3"}) {
      if (!Have(p)) GTEST_SKIP() << "needs " << p;
    }
    if (Sh("unshare --net --uts --mount --pid --fork true && echo ok") != "ok\n") {
      GTEST_SKIP() << "cannot create namespaces here";
    }
    if (!fs::exists(HPOD_NODE_INIT_BINARY)) GTEST_SKIP() << "no " << HPOD_NODE_INIT_BINARY;
    net_ = NetOf(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ForceCleanup(net_.block, net_.prefix);
    dir_ = fs::path("/tmp") / ("hpod-local-root-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "sock");
    LocalProviderOptions o;
    o.state_dir = (dir_ / "local").string();
    o.node_block = net_.block;
    o.link_prefix = net_.prefix;
    o.node_init_binary = HPOD_NODE_INIT_BINARY;
    o.agent_endpoint = "unix://" + (dir_ / "sock/agent.sock").string();
    o.node_program = {"sleep", "1000"};
    options_ = o;
    auto p = LocalProvider::Create(o, std::make_unique<RealNodeHost>());
    if (!p.ok() && p.status().code() == StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << "test block unusable here: " << p.status().ToString();
    }
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    provider_ = std::move(*p);
  }

  void TearDown() override {
    if (provider_) {
      Status s = provider_->DestroyAll();
      EXPECT_TRUE(s.ok()) << s.ToString();
      provider_.reset();
    }
    if (!dir_.empty()) {
      ForceCleanup(net_.block, net_.prefix);
      // Sized node disks a failed test left mounted.
      Sh("awk '{print $5}' /proc/self/mountinfo | grep '^" + dir_.string() +
         "/' | sort -r | xargs -r -n1 umount -l");
      fs::remove_all(dir_);
    }
  }

  LaunchSpec Spec(const std::string& id) {
    LaunchSpec s;
    s.instance_id = id;
    s.cluster_id = "rootc";
    s.group_name = "g";
    s.instance_type = "ml.t3.medium";
    s.bootstrap_token = "t";
    return s;
  }

  // Waits for the node to report Running (its PID 1 set the hostname).
  NodeObservation WaitRunning(const std::string& id) {
    NodeObservation o;
    for (int i = 0; i < 200; ++i) {
      auto r = provider_->Describe(id);
      if (!r.ok()) break;
      o = *r;
      if (o.state != NodeState::kPending) break;
      std::this_thread::sleep_for(50ms);
    }
    return o;
  }

  // Starts the provider again (as an hpodd restart does), with these options.
  void Recreate(const LocalProviderOptions& o) {
    provider_.reset();
    options_ = o;
    auto p = LocalProvider::Create(o, std::make_unique<RealNodeHost>());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    provider_ = std::move(*p);
  }

  std::string InNode(const std::string& id, const std::string& ns_flags,
                     const std::string& script) {
    auto pid = provider_->NodeProcess(id);
    if (!pid) return "no such node";
    return Sh("nsenter -t " + std::to_string(pid->pid) + " " + ns_flags + " -- bash -c '" + script +
              "'");
  }

  TestNet net_{};
  fs::path dir_;
  LocalProviderOptions options_;
  std::unique_ptr<LocalProvider> provider_;
};

// Waits (generously) for `done`; true when it came.
bool Eventually(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// Kill returns once the node's PID 1 is dead; its /proc entry lasts until the
// unshare holder reaps the zombie, which races the check (CI saw it at 3.7 s).
bool ProcEntryGoes(pid_t pid) {
  return Eventually([&] { return !fs::exists("/proc/" + std::to_string(pid)); });
}

TEST_F(LocalProviderRootTest, TwoNodesTalkOnlyOverTheirBridgeAndLeaveNothingBehind) {
  ASSERT_TRUE(provider_->Launch(Spec("i-a")).ok());
  ASSERT_TRUE(provider_->Launch(Spec("i-b")).ok());
  auto a = WaitRunning("i-a");
  auto b = WaitRunning("i-b");
  std::string log_a = Sh("cat " + provider_->NodeDir("i-a") + "/node-init.log");
  ASSERT_EQ(a.state, NodeState::kRunning) << a.message << "\n" << log_a;
  ASSERT_EQ(b.state, NodeState::kRunning) << b.message;
  EXPECT_EQ(a.private_ip, "10.213.0.10");
  EXPECT_EQ(b.private_ip, "10.213.0.11");

  // Guard and bridge: node addresses route via the bridge, never a gateway.
  EXPECT_THAT(Sh("ip route show type unreachable"), HasSubstr(net_.block));
  std::string route = Sh("ip route get 10.213.0.11");
  EXPECT_THAT(route, HasSubstr("dev htbr0"));
  EXPECT_THAT(route, Not(HasSubstr(" via ")));
  EXPECT_THAT(Sh("ip route get 10.213.7.7 2>&1"),
              ::testing::ContainsRegex("unreachable|No route to host"));
  // The bridge's MAC is its own (addr_assign_type 3, NET_ADDR_SET), not its
  // lowest port's: a node leaving must not change the gateway's MAC under the others.
  EXPECT_EQ(Sh("cat /sys/class/net/htbr0/addr_assign_type"), "3\n");
  const std::string bridge_mac = Sh("cat /sys/class/net/htbr0/address");

  // Identity. The MAC follows the address, so a replacement (same address)
  // keeps it and its peers' neighbour entries stay right.
  const std::string mac = "ip -o link show dev eth0 | grep -o \"link/ether [0-9a-f:]*\"";
  EXPECT_EQ(InNode("i-a", "-n", mac), "link/ether " + NodeMac("10.213.0.10") + "\n");
  EXPECT_EQ(InNode("i-b", "-n", mac), "link/ether " + NodeMac("10.213.0.11") + "\n");
  EXPECT_EQ(InNode("i-a", "-u", "hostname"), "ip-10-213-0-10\n");
  EXPECT_EQ(InNode("i-b", "-u", "hostname"), "ip-10-213-0-11\n");
  // The node finds its address as AWS's lifecycle_script.py does (a UDP connect to
  // an outside address, then getsockname) and by a route lookup, while a packet for
  // an outside address is routed to the node's own loopback (never out of eth0)
  // and TCP to one fails at once.
  EXPECT_EQ(InNode("i-a", "-n",
                   "python3 -c \"import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                   "s.connect((\\\"10.254.254.254\\\",1))\nprint(s.getsockname()[0])\n"
                   "s.send(b\\\"x\\\")\""),
            "10.213.0.10\n");
  EXPECT_THAT(InNode("i-a", "-n", "ip route get 1.1.1.1"), HasSubstr("dev lo src 10.213.0.10"));
  EXPECT_THAT(InNode("i-a", "-n", "ip route get 1.1.1.1 ipproto udp dport 53 2>&1 || true"),
              HasSubstr("unreachable"));
  EXPECT_EQ(InNode("i-a", "-n", "hostname -I"), "10.213.0.10 \n");
  EXPECT_THAT(InNode("i-a", "-m", "cat /etc/hosts"),
              HasSubstr("10.213.0.10 ip-10-213-0-10\n10.213.0.11 ip-10-213-0-11\n"));
  EXPECT_EQ(InNode("i-a", "-p -m", "cat /proc/1/cmdline | tr \"\\0\" \" \""),
            std::string(HPOD_NODE_INIT_BINARY) + " --config " + provider_->NodeDir("i-a") +
                "/node-init.json ");

  // A TCP connection from node A to node B (listener inside B's netns).
  SubprocessOptions listen;
  listen.argv = {"nsenter",
                 "-t",
                 std::to_string(provider_->NodeProcess("i-b")->pid),
                 "-n",
                 "python3",
                 "-c",
                 "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,"
                 "socket.SO_REUSEADDR,1)\ns.bind(('10.213.0.11',7777))\ns.listen()\n"
                 "c,_=s.accept()\nc.sendall(b'hello-from-b')\nc.close()"};
  auto listener = Subprocess::Start(listen);
  ASSERT_TRUE(listener.ok());
  std::string got;
  for (int i = 0; i < 50 && got.find("hello-from-b") == std::string::npos; ++i) {
    got = InNode("i-a", "-n", "exec 3<>/dev/tcp/10.213.0.11/7777 && cat <&3");
    if (got.find("hello-from-b") == std::string::npos) std::this_thread::sleep_for(100ms);
  }
  EXPECT_THAT(got, HasSubstr("hello-from-b"));
  (*listener)->Wait(5s);
  listener->reset();
  // Outside the /24 a node reaches nothing.
  EXPECT_THAT(InNode("i-a", "-n", "exec 3<>/dev/tcp/192.0.2.1/80 2>&1 || true"),
              HasSubstr("unreachable"));

  // Each node has its own root: what it installs stays on it (and off the host),
  // it sees the host's files, its /root starts from /etc/skel, and it knows its name.
  EXPECT_EQ(
      InNode("i-a", "-m",
             "echo mine > /usr/local/bin/hpod-root-probe && cat /usr/local/bin/hpod-root-probe"),
      "mine\n");
  EXPECT_FALSE(fs::exists("/usr/local/bin/hpod-root-probe"));
  EXPECT_EQ(InNode("i-b", "-m", "test -e /usr/local/bin/hpod-root-probe && echo leaked || echo no"),
            "no\n");
  // The host's files show through (outside the node's private /tmp, /run, ...).
  EXPECT_EQ(InNode("i-a", "-m", "cat /etc/os-release"), Sh("cat /etc/os-release"));
  if (fs::exists("/etc/skel/.bashrc")) {
    EXPECT_EQ(InNode("i-a", "-m", "cmp /root/.bashrc /etc/skel/.bashrc && echo skel"), "skel\n");
  }
  EXPECT_EQ(InNode("i-a", "-m", "cat /etc/hostname"), "ip-10-213-0-10\n");
  EXPECT_EQ(InNode("i-a", "-p -m", "findmnt -n -o FSTYPE /"), "overlay\n");

  // /fsx is shared, /tmp is private, /opt is the node's own.
  EXPECT_EQ(InNode("i-a", "-m",
                   "echo shared > /fsx/f.txt && echo private > /tmp/p.txt && "
                   "ls -d /opt/sagemaker_cluster /opt/ml/config"),
            "/opt/ml/config\n/opt/sagemaker_cluster\n");
  EXPECT_EQ(InNode("i-b", "-m", "cat /fsx/f.txt; test -e /tmp/p.txt && echo leaked || echo no"),
            "shared\nno\n");
  EXPECT_TRUE(fs::exists(dir_ / "local/fsx/rootc/f.txt"));
  EXPECT_FALSE(fs::exists("/tmp/p.txt"));
  EXPECT_TRUE(fs::exists(provider_->NodeDir("i-a") + "/disk/tmp/p.txt"));
  EXPECT_EQ(Sh("findmnt -n " + provider_->NodeDir("i-a") + "/disk || echo none"), "none\n");
  EXPECT_EQ(InNode("i-a", "-m", "cat /var/lib/hpod-agent/agent.json | grep -o run/hpod/agent.sock"),
            "run/hpod/agent.sock\n");

  // With a time namespace, the node's boot time is its creation.
  if (Sh("unshare --time --fork true && echo ok") == "ok\n") {
    EXPECT_LT(std::stoi(InNode("i-a", "-T", "cut -d. -f1 /proc/uptime")), 120);
  }

  // hpodd restarts: the new provider adopts the running nodes without touching them.
  auto pid_a = *provider_->NodeProcess("i-a");
  provider_.reset();
  auto again = LocalProvider::Create(options_, std::make_unique<RealNodeHost>());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  provider_ = std::move(*again);
  EXPECT_EQ(*provider_->NodeProcess("i-a"), pid_a);
  EXPECT_EQ(WaitRunning("i-a").state, NodeState::kRunning);
  EXPECT_EQ(WaitRunning("i-b").state, NodeState::kRunning);

  // Reboot: new PID 1, same address, node disk kept.
  EXPECT_THAT(Sh("cat " + provider_->NodeDir("i-a") + "/node-init.log"),
              Not(HasSubstr("continuing")));  // the root overlay worked
  auto old_pid = *provider_->NodeProcess("i-a");
  ASSERT_TRUE(provider_->Reboot("i-a", "r-1").ok());
  EXPECT_NE(provider_->NodeProcess("i-a")->pid, old_pid.pid);
  EXPECT_EQ(WaitRunning("i-a").state, NodeState::kRunning);
  EXPECT_EQ(InNode("i-a", "-m", "cat /tmp/p.txt"), "private\n");
  EXPECT_EQ(InNode("i-a", "-m", "cat /usr/local/bin/hpod-root-probe"), "mine\n")
      << "a reboot keeps the node's root, as a disk would";

  // Failure detection: kill node B's PID 1.
  auto pid_b = *provider_->NodeProcess("i-b");
  ::kill(pid_b.pid, SIGKILL);
  NodeObservation dead;
  for (int i = 0; i < 100; ++i) {
    dead = *provider_->Describe("i-b");
    if (dead.state == NodeState::kFailed) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(dead.state, NodeState::kFailed);
  EXPECT_THAT(dead.message, HasSubstr("its first process"));

  std::vector<pid_t> pids = {provider_->NodeProcess("i-a")->pid, pid_b.pid};
  // The leftover check below can fail: node A's init is visible now.
  EXPECT_THAT(ProcessesMentioning(dir_.string() + "/local/nodes"), Not(::testing::IsEmpty()));
  Status tb = provider_->Terminate("i-b");
  ASSERT_TRUE(tb.ok()) << tb.ToString();
  EXPECT_EQ(Sh("cat /sys/class/net/htbr0/address"), bridge_mac);
  Status ta = provider_->Terminate("i-a");
  ASSERT_TRUE(ta.ok()) << ta.ToString();
  EXPECT_EQ(Sh("ls /run/netns 2>/dev/null | grep -c '^htn' || true"), "0\n");
  EXPECT_EQ(Sh("ls /sys/class/net | grep -cE '^ht(v|br)' || true"), "0\n");
  EXPECT_EQ(Sh("grep -c " + dir_.string() + " /proc/self/mountinfo || true"), "0\n");
  // A dead node's PID 1 stays a zombie until its unshare holder reaps it.
  for (pid_t p : pids) EXPECT_TRUE(ProcEntryGoes(p)) << p;
  EXPECT_THAT(ProcessesMentioning(dir_.string() + "/local/nodes"), ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(dir_ / "local/nodes/i-a"));
  ASSERT_TRUE(provider_->DestroyAll().ok());
  EXPECT_THAT(Sh("ip route show type unreachable"), Not(HasSubstr(net_.block)));
}

std::string StateOf(pid_t pid) {  // /proc/<pid>/stat field 3: R, S, T, Z, ...
  std::string stat = Sh("cat /proc/" + std::to_string(pid) + "/stat 2>/dev/null");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos ? "" : stat.substr(paren + 2, 1);
}

bool LinkUp(const std::string& link) {  // IFF_UP in /sys/class/net/<link>/flags
  std::string flags = Sh("cat /sys/class/net/" + link + "/flags");
  return !flags.empty() && (std::stoul(flags, nullptr, 16) & 1) != 0;
}

TEST_F(LocalProviderRootTest, EveryFaultActsOnTheRealNode) {
  LocalProviderOptions o = options_;
  o.node_disk_mb = 16;
  o.fake_nvml_library = (dir_ / "libfake-nvml.so").string();  // only its path matters here
  std::ofstream(o.fake_nvml_library) << "";
  Recreate(o);
  LaunchSpec gpu = Spec("i-a");
  gpu.instance_type = "ml.g5.xlarge";  // one GPU
  ASSERT_TRUE(provider_->Launch(gpu).ok());
  ASSERT_TRUE(provider_->Launch(Spec("i-b")).ok());
  ASSERT_TRUE(provider_->Launch(Spec("i-c")).ok());
  for (const char* id : {"i-a", "i-b", "i-c"}) {
    ASSERT_EQ(WaitRunning(id).state, NodeState::kRunning)
        << Sh("cat " + provider_->NodeDir(id) + "/node-init.log");
  }
  const std::string disk = provider_->NodeDir("i-a") + "/disk";
  EXPECT_THAT(Sh("findmnt -n -o FSTYPE,OPTIONS " + disk), HasSubstr("tmpfs"));
  EXPECT_EQ(InNode("i-a", "-p -m", "df -k /var/log | tail -1 | awk \"{print \\$2}\""), "16384\n");

  // The agent (here its stand-in, sleep) gets the node's kernel log and fake NVML.
  auto pid1 = *provider_->NodeProcess("i-a");
  std::string p1 = std::to_string(pid1.pid);
  std::string agent =
      Sh("cut -d\" \" -f1 /proc/" + p1 + "/task/" + p1 + "/children | tr -d \"\\n\"");
  std::string env = Sh("tr \"\\0\" \"\\n\" < /proc/" + agent + "/environ");
  EXPECT_THAT(env, HasSubstr("HPOD_KERNEL_LOG=/var/lib/hpod-agent/kmsg\n"));
  EXPECT_THAT(env, HasSubstr("HPOD_NVML_LIBRARY=/var/lib/hpod-agent/libhpod_fake_nvml.so\n"));
  // A copy on the node's disk: the host's path may be under a /tmp the node cannot see.
  EXPECT_EQ(InNode("i-a", "-m", "test -f /var/lib/hpod-agent/libhpod_fake_nvml.so && echo ok"),
            "ok\n");
  EXPECT_THAT(env, HasSubstr("HPOD_FAKE_NVML_SCRIPT=/var/lib/hpod-agent/fake-nvml.json\n"));
  EXPECT_EQ(InNode("i-a", "-m", "cat /var/lib/hpod-agent/fake-nvml.json"), "{\"devices\":1}\n");

  // gpu-xid: in the node's own kernel log and the fake's script.
  ASSERT_TRUE(provider_->InjectFault("i-a", {FaultSpec::Kind::kGpuXid, 0, 79}).ok());
  EXPECT_EQ(InNode("i-a", "-m", "cat /var/lib/hpod-agent/kmsg"),
            "NVRM: Xid (PCI:0000:00:1e): 79, pid=0, name=hpod-inject-fault, Ch 00000000\n");
  EXPECT_THAT(InNode("i-a", "-m", "cat /var/lib/hpod-agent/fake-nvml.json"),
              HasSubstr("\"xids\":[79]"));

  // flag-file: in this node's private /run only.
  ASSERT_TRUE(provider_->InjectFault("i-a", {FaultSpec::Kind::kFlagFile, 0, 0}).ok());
  EXPECT_EQ(InNode("i-a", "-m", "cat /var/run/sagemaker_healthcheck_status"), "1\n");
  EXPECT_EQ(InNode("i-b", "-m", "cat /var/run/sagemaker_healthcheck_status 2>/dev/null || echo no"),
            "no\n");

  // kill-slurmd: a stand-in slurmd inside the node.
  EXPECT_EQ(provider_->InjectFault("i-a", {FaultSpec::Kind::kKillSlurmd, 0, 0}).code(),
            StatusCode::kFailedPrecondition);
  InNode("i-a", "-p -m",
         "cp /bin/sleep /tmp/slurmd && setsid /tmp/slurmd 1000 </dev/null >/dev/null 2>&1 &");
  ASSERT_TRUE(Eventually([&] { return InNode("i-a", "-p -m", "pgrep -x slurmd") != ""; }));
  Status ks = provider_->InjectFault("i-a", {FaultSpec::Kind::kKillSlurmd, 0, 0});
  ASSERT_TRUE(ks.ok()) << ks.ToString();
  EXPECT_TRUE(Eventually([&] { return InNode("i-a", "-p -m", "pgrep -x slurmd") == ""; }));
  EXPECT_EQ(WaitRunning("i-a").state, NodeState::kRunning);  // the node lives on

  // disk-full: the node's writes fail with ENOSPC.
  ASSERT_TRUE(provider_->InjectFault("i-a", {FaultSpec::Kind::kDiskFull, 0, 0}).ok());
  EXPECT_THAT(InNode("i-a", "-m", "echo x > /var/log/probe; true"),
              HasSubstr("No space left on device"));
  // A full disk still reboots (and stays full); the same request id does nothing.
  ASSERT_TRUE(provider_->Reboot("i-a", "r-1").ok());
  auto rebooted = *provider_->NodeProcess("i-a");
  EXPECT_NE(rebooted.pid, pid1.pid);
  ASSERT_TRUE(provider_->Reboot("i-a", "r-1").ok());
  EXPECT_EQ(*provider_->NodeProcess("i-a"), rebooted);
  EXPECT_EQ(WaitRunning("i-a").state, NodeState::kRunning);
  EXPECT_EQ(InNode("i-a", "-m", "cat /var/lib/hpod-agent/kmsg"), "");

  // kill-agent: the agent's exit is the node's end (hpod-node-init exits with it).
  std::string p2 = std::to_string(rebooted.pid);
  agent = Sh("cut -d\" \" -f1 /proc/" + p2 + "/task/" + p2 + "/children | tr -d \"\\n\"");
  ASSERT_FALSE(agent.empty());
  ASSERT_TRUE(provider_->InjectFault("i-a", {FaultSpec::Kind::kKillAgent, 0, 0}).ok());
  EXPECT_TRUE(Eventually([&] { return !fs::exists("/proc/" + agent); }));

  // partition: i-b's link down now, up at its end, across an hpodd restart.
  auto veth =
      nlohmann::json::parse(Sh("cat " + provider_->NodeDir("i-b") + "/node.json"))["veth_host"]
          .get<std::string>();
  ASSERT_TRUE(LinkUp(veth));
  ASSERT_TRUE(provider_->InjectFault("i-b", {FaultSpec::Kind::kPartition, 2, 0}).ok());
  EXPECT_FALSE(LinkUp(veth));
  Recreate(o);
  EXPECT_TRUE(Eventually([&] { return LinkUp(veth); }));

  // hang: every process of i-b stopped; Terminate still ends them.
  auto b = *provider_->NodeProcess("i-b");
  std::string pb = std::to_string(b.pid);
  std::string b_agent =
      Sh("cut -d\" \" -f1 /proc/" + pb + "/task/" + pb + "/children | tr -d \"\\n\"");
  ASSERT_FALSE(b_agent.empty());
  ASSERT_TRUE(provider_->InjectFault("i-b", {FaultSpec::Kind::kHang, 0, 0}).ok());
  EXPECT_TRUE(Eventually([&] {
    return StateOf(b.pid) == "T" && StateOf(std::stoi(b_agent)) == "T";
  })) << StateOf(b.pid)
      << StateOf(std::stoi(b_agent));
  ASSERT_TRUE(provider_->Terminate("i-b").ok());
  EXPECT_TRUE(ProcEntryGoes(b.pid));

  // kill-node: PID 1 gone, the netns and files left for recovery.
  auto c = *provider_->NodeProcess("i-c");
  ASSERT_TRUE(provider_->InjectFault("i-c", {FaultSpec::Kind::kKillNode, 0, 0}).ok());
  EXPECT_TRUE(ProcEntryGoes(c.pid));
  EXPECT_EQ(WaitRunning("i-c").state, NodeState::kFailed);
  EXPECT_TRUE(fs::exists(provider_->NodeDir("i-c") + "/node.json"));
  EXPECT_EQ(Sh("ls /run/netns | grep -c '^hun' || true"), "2\n");  // i-a's and i-c's
  EXPECT_EQ(provider_->InjectFault("i-c", {FaultSpec::Kind::kKillNode, 0, 0}).code(),
            StatusCode::kFailedPrecondition);

  ASSERT_TRUE(provider_->Terminate("i-a").ok());
  ASSERT_TRUE(provider_->Terminate("i-c").ok());
  EXPECT_EQ(Sh("grep -c " + dir_.string() + " /proc/self/mountinfo || true"), "0\n");
}

}  // namespace
}  // namespace hpod::provider::local
