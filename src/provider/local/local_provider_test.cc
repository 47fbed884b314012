#include "hpod/provider/local/local_provider.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hpod::provider::local {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Lets two provider instances (before and after a "restart") share one fake world.
class SharedHost final : public NodeHost {
 public:
  explicit SharedHost(FakeNodeHost* h) : h_(h) {}
  StatusOr<std::vector<std::string>> ListRoutes() override { return h_->ListRoutes(); }
  Status AddGuardRoute(const std::string& c) override { return h_->AddGuardRoute(c); }
  Status DeleteGuardRoute(const std::string& c) override { return h_->DeleteGuardRoute(c); }
  Status CreateBridge(const std::string& n, const std::string& g) override {
    return h_->CreateBridge(n, g);
  }
  Status DeleteBridge(const std::string& n) override { return h_->DeleteBridge(n); }
  Status CreateNodeNetwork(const NodeNetwork& n) override { return h_->CreateNodeNetwork(n); }
  Status DeleteNodeNetwork(const std::string& ns, const std::string& v) override {
    return h_->DeleteNodeNetwork(ns, v);
  }
  bool NetnsExists(const std::string& ns) override { return h_->NetnsExists(ns); }
  StatusOr<ProcessId> SpawnNode(const NodeSpawn& s) override { return h_->SpawnNode(s); }
  bool IsAlive(const ProcessId& id) override { return h_->IsAlive(id); }
  Status Kill(const ProcessId& id, std::chrono::milliseconds t) override { return h_->Kill(id, t); }
  std::string HostnameOf(const ProcessId& id) override { return h_->HostnameOf(id); }

 private:
  FakeNodeHost* h_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class LocalProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hpod-local-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    host_.SetRoutes({"default via 10.0.2.2 dev eth0",
                     "10.0.2.0/24 dev eth0 proto kernel scope link src 10.0.2.15"});
  }
  void TearDown() override { fs::remove_all(dir_); }

  LocalProviderOptions Options() {
    LocalProviderOptions o;
    o.state_dir = (dir_ / "local").string();
    o.node_block = "10.77.0.0/16";
    o.node_init_binary = "/usr/bin/hpod-node-init";
    o.agent_binary = "/usr/bin/hpod-agent";
    o.agent_endpoint = "unix:///var/lib/hpod/agent.sock";
    return o;
  }
  std::unique_ptr<LocalProvider> Make(LocalProviderOptions o) {
    auto p = LocalProvider::Create(std::move(o), std::make_unique<SharedHost>(&host_));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : nullptr;
  }
  std::unique_ptr<LocalProvider> Make() { return Make(Options()); }

  static LaunchSpec Spec(const std::string& id, const std::string& cluster = "c1",
                         const std::string& ip = "") {
    LaunchSpec s;
    s.instance_id = id;
    s.cluster_id = cluster;
    s.cluster_name = "cluster-" + cluster;
    s.group_name = "workers";
    s.instance_name = "workers-1";
    s.instance_type = "ml.c5.xlarge";
    s.bootstrap_token = "tok-" + id;
    s.private_ip = ip;
    return s;
  }
  NodeObservation Observe(LocalProvider& p, const std::string& id) {
    auto o = p.Describe(id);
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return o.ok() ? *o : NodeObservation{};
  }

  fs::path dir_;
  FakeNodeHost host_;
};

TEST_F(LocalProviderTest, GuardRouteComesBeforeAnyBridgeOrNamespace) {
  auto p = Make();
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto calls = host_.calls();
  auto pos = [&](const std::string& prefix) {
    return std::find_if(calls.begin(), calls.end(),
                        [&](const std::string& c) { return c.rfind(prefix, 0) == 0; }) -
           calls.begin();
  };
  ASSERT_LT(pos("AddGuardRoute"), static_cast<long>(calls.size()));
  EXPECT_EQ(calls[pos("AddGuardRoute")], "AddGuardRoute 10.77.0.0/16");
  EXPECT_EQ(pos("ListRoutes"), 0);  // the overlap check is the very first thing
  EXPECT_LT(pos("AddGuardRoute"), pos("CreateBridge"));
  EXPECT_LT(pos("CreateBridge"), pos("CreateNodeNetwork"));
  EXPECT_LT(pos("CreateNodeNetwork"), pos("SpawnNode"));
  EXPECT_EQ(calls[pos("CreateBridge")], "CreateBridge hpbr0 10.77.0.1/24");
  EXPECT_EQ(calls[pos("CreateNodeNetwork")],
            "CreateNodeNetwork hpn0 hpv0h hpv0c hpbr0 10.77.0.10/24");
}

TEST_F(LocalProviderTest, OverlappingNodeBlockIsRefusedBeforeAnyChange) {
  auto o = Options();
  o.node_block = "10.0.0.0/8";
  auto p = LocalProvider::Create(o, std::make_unique<SharedHost>(&host_));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.status().message(),
            "node block 10.0.0.0/8 overlaps host route 10.0.2.0/24 dev eth0; choose another "
            "with --node-block");
  EXPECT_EQ(host_.calls(), std::vector<std::string>{"ListRoutes"});
}

TEST_F(LocalProviderTest, MalformedNodeBlockIsInvalid) {
  for (const char* bad :
       {"10.77.0.0/25", "10.77.1.0/16", "bogus", "10.77.0.0", "300.1.0.0/16", "10.77.0.0/"}) {
    auto o = Options();
    o.node_block = bad;
    auto p = LocalProvider::Create(o, std::make_unique<SharedHost>(&host_));
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(host_.calls().empty());
}

TEST_F(LocalProviderTest, OverlapIgnoresOurOwnRoutes) {
  std::vector<std::string> routes = {
      "default via 192.0.2.1 dev eth0",
      "unreachable 10.77.0.0/16",
      "10.77.3.0/24 dev hpbr3 proto kernel scope link src 10.77.3.1",
      "192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2",
  };
  auto block = ParseCidr("10.77.0.0/16");
  ASSERT_TRUE(block);
  EXPECT_TRUE(OverlappingRoutes(routes, block->first, block->second, "hp").empty());
  // Another provider's bridge (other prefix), a host route, a wider route.
  routes.push_back("10.77.9.0/24 dev xxbr0 proto kernel");
  routes.push_back("10.77.5.5 via 192.0.2.1 dev eth0");
  routes.push_back("blackhole 10.0.0.0/8");
  EXPECT_THAT(OverlappingRoutes(routes, block->first, block->second, "hp"),
              ::testing::ElementsAre("10.77.9.0/24 dev xxbr0", "10.77.5.5 dev eth0",
                                     "blackhole 10.0.0.0/8"));
}

TEST_F(LocalProviderTest, AllocatesAddressesAndReusesFreedOnes) {
  auto p = Make();
  for (const char* id : {"i-1", "i-2", "i-3"}) ASSERT_TRUE(p->Launch(Spec(id)).ok());
  EXPECT_EQ(Observe(*p, "i-1").private_ip, "10.77.0.10");
  EXPECT_EQ(Observe(*p, "i-2").private_ip, "10.77.0.11");
  EXPECT_EQ(Observe(*p, "i-3").hostname, "ip-10-77-0-12");
  ASSERT_TRUE(p->Terminate("i-2").ok());
  ASSERT_TRUE(p->Launch(Spec("i-4")).ok());
  EXPECT_EQ(Observe(*p, "i-4").private_ip, "10.77.0.11");
  // A second cluster gets the next /24 on its own bridge.
  ASSERT_TRUE(p->Launch(Spec("i-5", "c2")).ok());
  EXPECT_EQ(Observe(*p, "i-5").private_ip, "10.77.1.10");
  EXPECT_EQ(host_.bridges(), (std::set<std::string>{"hpbr0", "hpbr1"}));
  // Names use a persisted counter, never reused.
  EXPECT_EQ(host_.netns(), (std::set<std::string>{"hpn0", "hpn2", "hpn3", "hpn4"}));
  auto ids = p->List("c1");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<std::string>{"i-1", "i-3", "i-4"}));
}

TEST_F(LocalProviderTest, LaunchIsIdempotent) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  EXPECT_EQ(host_.spawns().size(), 1u);
  EXPECT_EQ(host_.live_processes(), 1u);
}

TEST_F(LocalProviderTest, PendingUntilHostnameIsSetThenRunning) {
  auto p = Make();
  host_.SetHostnamesReady(false);
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  EXPECT_EQ(Observe(*p, "i-1").state, NodeState::kPending);
  host_.SetHostnamesReady(true);
  EXPECT_EQ(Observe(*p, "i-1").state, NodeState::kRunning);
}

TEST_F(LocalProviderTest, TerminateFreesEverything) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  std::string node_dir = p->NodeDir("i-1");
  EXPECT_TRUE(fs::exists(node_dir + "/node.json"));
  ASSERT_TRUE(p->Terminate("i-1").ok());
  EXPECT_EQ(p->Describe("i-1").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(node_dir));
  EXPECT_FALSE(fs::exists(dir_ / "local/clusters/c1"));
  EXPECT_TRUE(host_.bridges().empty());
  EXPECT_TRUE(host_.netns().empty());
  EXPECT_EQ(host_.live_processes(), 0u);
  EXPECT_TRUE(p->Terminate("i-1").ok());  // gone: no-op
  EXPECT_TRUE(p->Terminate("i-never").ok());
  // The /24 is free again.
  ASSERT_TRUE(p->Launch(Spec("i-2", "c2")).ok());
  EXPECT_EQ(Observe(*p, "i-2").private_ip, "10.77.0.10");
}

TEST_F(LocalProviderTest, DeadFirstProcessOrLostNetnsIsFailed) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  auto pid = p->NodeProcess("i-1")->pid;
  host_.SimulateDeath(pid);
  auto o = Observe(*p, "i-1");
  EXPECT_EQ(o.state, NodeState::kFailed);
  EXPECT_EQ(o.message,
            "node i-1 stopped: its first process (pid " + std::to_string(pid) + ") exited");
  host_.RemoveNetns("hpn1");
  o = Observe(*p, "i-2");
  EXPECT_EQ(o.state, NodeState::kFailed);
  EXPECT_THAT(o.message, HasSubstr("network namespace hpn1 vanished"));
}

TEST_F(LocalProviderTest, RestartAdoptsLiveNodesAndReportsVanishedOnes) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  auto dead = *p->NodeProcess("i-2");
  p.reset();  // hpodd exits; nodes keep running
  EXPECT_EQ(host_.live_processes(), 2u);
  host_.SimulateDeath(dead.pid);  // ... and one dies meanwhile
  host_.ClearCalls();
  p = Make();
  ASSERT_TRUE(p);
  for (const auto& c : host_.calls()) EXPECT_EQ(c.rfind("Kill", 0), std::string::npos) << c;
  EXPECT_EQ(Observe(*p, "i-1").state, NodeState::kRunning);
  auto o = Observe(*p, "i-2");
  EXPECT_EQ(o.state, NodeState::kFailed);
  EXPECT_THAT(o.message, HasSubstr("namespaces vanished"));
  EXPECT_EQ(o.private_ip, "10.77.0.11");
  // The counter survives: new names do not collide with adopted ones.
  ASSERT_TRUE(p->Launch(Spec("i-3")).ok());
  EXPECT_TRUE(host_.netns().count("hpn2"));
  EXPECT_EQ(Observe(*p, "i-3").private_ip, "10.77.0.12");
}

TEST_F(LocalProviderTest, HostsFileListsTheClusterAndIsRewrittenInPlace) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-9", "c2")).ok());
  std::string hosts = (dir_ / "local/clusters/c1/hosts").string();
  EXPECT_EQ(ReadFile(hosts),
            "127.0.0.1 localhost\n10.77.0.10 ip-10-77-0-10\n10.77.0.11 ip-10-77-0-11\n");
  struct stat before, after;
  ASSERT_EQ(::stat(hosts.c_str(), &before), 0);
  ASSERT_TRUE(p->Terminate("i-1").ok());
  ASSERT_EQ(::stat(hosts.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // bind mounts pin the inode
  EXPECT_EQ(ReadFile(hosts), "127.0.0.1 localhost\n10.77.0.11 ip-10-77-0-11\n");
}

TEST_F(LocalProviderTest, ReplacementKeepsThePrivateIp) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  // In use, outside the /24, or not a node address: refused.
  EXPECT_EQ(p->Launch(Spec("i-3", "c1", "10.77.0.10")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Launch(Spec("i-3", "c1", "10.77.5.10")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Launch(Spec("i-3", "c1", "10.77.0.1")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Describe("i-3").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(fs::exists(p->NodeDir("i-1") + "/disk"));
  std::ofstream(p->NodeDir("i-1") + "/disk/marker") << "old";
  ASSERT_TRUE(p->Terminate("i-1").ok());
  ASSERT_TRUE(p->Launch(Spec("i-1r", "c1", "10.77.0.10")).ok());
  auto o = Observe(*p, "i-1r");
  EXPECT_EQ(o.private_ip, "10.77.0.10");
  EXPECT_EQ(o.hostname, "ip-10-77-0-10");
  EXPECT_FALSE(fs::exists(p->NodeDir("i-1r") + "/disk/marker"));  // fresh disk
}

TEST_F(LocalProviderTest, ReplacingTheOnlyNodeGetsTheSameSubnetBack) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("a-1", "a")).ok());
  ASSERT_TRUE(p->Launch(Spec("b-1", "b")).ok());
  EXPECT_EQ(Observe(*p, "b-1").private_ip, "10.77.1.10");
  ASSERT_TRUE(p->Terminate("b-1").ok());  // cluster b's /24 is freed
  ASSERT_TRUE(p->Launch(Spec("b-1r", "b", "10.77.1.10")).ok());
  EXPECT_EQ(Observe(*p, "b-1r").hostname, "ip-10-77-1-10");
}

TEST_F(LocalProviderTest, WritesAgentAndNodeInitConfig) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  std::string dir = p->NodeDir("i-1");
  struct stat st;
  ASSERT_EQ(::stat((dir + "/agent.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto agent = nlohmann::json::parse(ReadFile(dir + "/agent.json"));
  EXPECT_EQ(agent["instance_id"], "i-1");
  EXPECT_EQ(agent["cluster_id"], "c1");
  EXPECT_EQ(agent["endpoint"], "unix:///run/hpod/agent.sock");
  EXPECT_EQ(agent["bootstrap_token"], "tok-i-1");
  EXPECT_EQ(agent["state_dir"], "/var/lib/hpod-agent");
  EXPECT_EQ(agent["hostname"], "ip-10-77-0-10");
  EXPECT_EQ(agent["private_ip"], "10.77.0.10");
  auto init = nlohmann::json::parse(ReadFile(dir + "/node-init.json"));
  EXPECT_EQ(init["agent_socket_dir"], "/var/lib/hpod");
  EXPECT_EQ(init["hosts_file"], (dir_ / "local/clusters/c1/hosts").string());
  EXPECT_EQ(init["fsx_dir"], (dir_ / "local/fsx/c1").string());
  EXPECT_EQ(init["program"],
            nlohmann::json({"/usr/bin/hpod-agent", "--config", "/var/lib/hpod-agent/agent.json"}));
  EXPECT_TRUE(fs::is_directory(dir_ / "local/fsx/c1"));
  auto node = nlohmann::json::parse(ReadFile(dir + "/node.json"));
  EXPECT_EQ(node["netns"], "hpn0");
  EXPECT_EQ(node["pid"], p->NodeProcess("i-1")->pid);
  ASSERT_EQ(host_.spawns().size(), 1u);
  EXPECT_EQ(host_.spawns()[0].config_path, dir + "/node-init.json");
}

TEST_F(LocalProviderTest, RebootKeepsAddressAndDiskWithANewProcess) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto before = *p->NodeProcess("i-1");
  std::ofstream(p->NodeDir("i-1") + "/disk/marker") << "kept";
  host_.SimulateDeath(before.pid);
  EXPECT_EQ(Observe(*p, "i-1").state, NodeState::kFailed);
  ASSERT_TRUE(p->Reboot("i-1").ok());
  auto after = *p->NodeProcess("i-1");
  EXPECT_NE(after.pid, before.pid);
  auto o = Observe(*p, "i-1");
  EXPECT_EQ(o.state, NodeState::kRunning);
  EXPECT_EQ(o.private_ip, "10.77.0.10");
  EXPECT_TRUE(fs::exists(p->NodeDir("i-1") + "/disk/marker"));
  EXPECT_EQ(host_.netns(), std::set<std::string>{"hpn0"});
  EXPECT_EQ(p->Reboot("i-x").code(), StatusCode::kNotFound);
}

TEST_F(LocalProviderTest, FailedSpawnIsRolledBack) {
  auto p = Make();
  host_.FailNextSpawn();
  EXPECT_FALSE(p->Launch(Spec("i-1")).ok());
  EXPECT_EQ(p->Describe("i-1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(host_.netns().empty());
  EXPECT_TRUE(host_.bridges().empty());
  EXPECT_FALSE(fs::exists(dir_ / "local/nodes/i-1"));
  // A retry works and takes the same address.
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  EXPECT_EQ(Observe(*p, "i-1").private_ip, "10.77.0.10");
}

TEST_F(LocalProviderTest, ShutdownKeepsNodesAndDestroyAllRemovesEverything) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2", "c2")).ok());
  ASSERT_TRUE(p->Shutdown(/*remove_guard=*/true).ok());
  EXPECT_EQ(host_.live_processes(), 2u);
  auto calls = host_.calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "DeleteGuardRoute 10.77.0.0/16"), 0);
  ASSERT_TRUE(p->DestroyAll().ok());
  EXPECT_EQ(host_.live_processes(), 0u);
  EXPECT_TRUE(host_.netns().empty());
  EXPECT_TRUE(host_.bridges().empty());
  calls = host_.calls();
  EXPECT_EQ(calls.back(), "DeleteGuardRoute 10.77.0.0/16");
}

TEST_F(LocalProviderTest, TcpEndpointPassesUnchanged) {
  auto o = Options();
  o.agent_endpoint = "http://10.77.0.1:8081";
  o.node_program = {"sleep", "1000"};
  auto p = Make(o);
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto agent = nlohmann::json::parse(ReadFile(p->NodeDir("i-1") + "/agent.json"));
  EXPECT_EQ(agent["endpoint"], "http://10.77.0.1:8081");
  auto init = nlohmann::json::parse(ReadFile(p->NodeDir("i-1") + "/node-init.json"));
  EXPECT_EQ(init["agent_socket_dir"], "");
  EXPECT_EQ(init["program"], nlohmann::json({"sleep", "1000"}));
}

TEST(Ipv4Test, ParseAndFormat) {
  EXPECT_EQ(ParseIpv4("10.77.0.1"), 0x0A4D0001u);
  EXPECT_EQ(FormatIpv4(0x0A4D0001u), "10.77.0.1");
  for (const char* bad :
       {"", "10.77.0", "10.77.0.1.2", "10.77.0.256", "a.b.c.d", "10..0.1", "10.77.0.1."}) {
    EXPECT_FALSE(ParseIpv4(bad)) << bad;
  }
  EXPECT_EQ(ParseCidr("10.77.0.0/16"), std::make_pair(0x0A4D0000u, 16));
  EXPECT_FALSE(ParseCidr("10.77.0.1/16"));  // host bits set
}

}  // namespace
}  // namespace hpod::provider::local
