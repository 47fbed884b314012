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

#include "hpod/provider/local/local_provider_test_fixture.h"

namespace hpod::provider::local {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using test_support::LocalProviderTest;
using test_support::ReadFile;
using test_support::SharedHost;

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

TEST_F(LocalProviderTest, RestartRepairsTheHostsFileButNeverRewritesAnUnchangedOne) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  std::string hosts = (dir_ / "local/clusters/c1/hosts").string();
  const std::string want = ReadFile(hosts);
  // An old mtime: any write, even of the same bytes, would change it.
  auto old = fs::file_time_type::clock::now() - std::chrono::hours(24);
  fs::last_write_time(hosts, old);
  p = Make();
  EXPECT_EQ(fs::last_write_time(hosts), old);
  std::ofstream(hosts, std::ios::trunc) << "127.0.0.1 local";  // a crash mid-write
  struct stat before, after;
  ASSERT_EQ(::stat(hosts.c_str(), &before), 0);
  p = Make();
  EXPECT_EQ(ReadFile(hosts), want);
  ASSERT_EQ(::stat(hosts.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
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
  EXPECT_EQ(agent["systemctl"], true);  // node-init is PID 1: the agent's systemctl
  auto init = nlohmann::json::parse(ReadFile(dir + "/node-init.json"));
  EXPECT_EQ(init["agent_socket_dir"], "/var/lib/hpod");
  EXPECT_EQ(init["hosts_file"], (dir_ / "local/clusters/c1/hosts").string());
  EXPECT_EQ(init["fsx_dir"], (dir_ / "local/fsx/c1").string());
  EXPECT_EQ(init["program"], nlohmann::json({test_support::kAbsentAgent, "--config",
                                             "/var/lib/hpod-agent/agent.json"}));
  EXPECT_TRUE(fs::is_directory(dir_ / "local/fsx/c1"));
  auto node = nlohmann::json::parse(ReadFile(dir + "/node.json"));
  EXPECT_EQ(node["netns"], "hpn0");
  EXPECT_EQ(node["pid"], p->NodeProcess("i-1")->pid);
  ASSERT_EQ(host_.spawns().size(), 1u);
  EXPECT_EQ(host_.spawns()[0].config_path, dir + "/node-init.json");
}

TEST_F(LocalProviderTest, NetworkAgentsJoinThroughOneRouteToHpoddsAddress) {
  auto o = Options();
  o.agent_transport = LocalProviderOptions::AgentTransport::kTls;
  auto p = Make(o);
  // The address hpodd listens on, behind the guard; the last /24 is never a cluster's.
  EXPECT_EQ(LocalProvider::AgentServiceAddress("10.77.0.0/16"), "10.77.255.254");
  EXPECT_EQ(LocalProvider::AgentServiceAddress("10.77.0.0/24"), "");
  const std::vector<std::string> calls = host_.calls();
  auto guard = std::find(calls.begin(), calls.end(), "AddGuardRoute 10.77.0.0/16");
  auto service = std::find(calls.begin(), calls.end(), "AddServiceAddress 10.77.255.254/32");
  ASSERT_NE(service, calls.end());
  EXPECT_LT(guard, service);
  EXPECT_EQ(p->Environment().agent_url, "https://10.77.255.254:8451");
  EXPECT_TRUE(p->Environment().agent_socket.empty());
  EXPECT_TRUE(p->Environment().Validate().ok());

  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  const std::string dir = p->NodeDir("i-1");
  auto agent = nlohmann::json::parse(ReadFile(dir + "/agent.json"));
  EXPECT_EQ(agent["endpoint"], "https://10.77.255.254:8451");
  EXPECT_EQ(agent["join_token"], "tok-i-1");
  EXPECT_FALSE(agent.contains("bootstrap_token"));
  EXPECT_EQ(agent["machine_id_file"], "/var/lib/hpod-agent/machine-id");
  const std::string machine_id = ReadFile(dir + "/disk/state/machine-id");
  EXPECT_THAT(machine_id, ::testing::MatchesRegex("[0-9a-f]{32}\n"));
  auto init = nlohmann::json::parse(ReadFile(dir + "/node-init.json"));
  EXPECT_EQ(init.value("agent_socket_dir", ""), "");  // nothing of hpodd's is bound in
  auto called = [&](const std::string& call) {
    const std::vector<std::string> all = host_.calls();
    return std::find(all.begin(), all.end(), call) != all.end();
  };
  EXPECT_TRUE(
      called("CreateNodeNetwork hpn0 hpv0h hpv0c hpbr0 10.77.0.10/24 route 10.77.255.254 via "
             "10.77.0.1"));
  // A reboot keeps the machine id (same disk); a replacement is another machine.
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());
  EXPECT_EQ(ReadFile(dir + "/disk/state/machine-id"), machine_id);
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  EXPECT_NE(ReadFile(p->NodeDir("i-2") + "/disk/state/machine-id"), machine_id);

  ASSERT_TRUE(p->DestroyAll().ok());
  EXPECT_TRUE(called("DeleteServiceAddress 10.77.255.254/32"));
}

TEST_F(LocalProviderTest, NetworkAgentsNeverGetTheLastSubnet) {
  auto o = Options();
  o.node_block = "10.77.0.0/23";  // two /24s: one for clusters, one for hpodd
  o.agent_transport = LocalProviderOptions::AgentTransport::kTls;
  auto p = Make(o);
  ASSERT_TRUE(p->Launch(Spec("a-1", "a")).ok());
  EXPECT_EQ(p->Launch(Spec("b-1", "b")).code(), StatusCode::kResourceExhausted);
  // Not even for a replacement that asks for an address there.
  EXPECT_EQ(p->Launch(Spec("c-1", "c", "10.77.1.10")).code(), StatusCode::kResourceExhausted);
}

TEST_F(LocalProviderTest, SkewedGroupsRunUnderLibfaketimeWithOneSharedStateForAll) {
  auto o = Options();
  o.link_prefix = "fk";  // its own shared-memory names
  o.fake_clock_skew_s = {{"workers", 90}, {"behind", -90}};
  o.faketime_library = (dir_ / "libfaketime.so.1").string();
  {
    auto missing = LocalProvider::Create(o, std::make_unique<FakeNodeHost>());
    EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(missing.status().message(), HasSubstr("install Debian's faketime package"));
  }
  std::ofstream(o.faketime_library) << "stand-in";
  {
    auto bad = o;
    bad.fake_clock_skew_s = {{"workers", 86401}};
    EXPECT_EQ(LocalProvider::Create(bad, std::make_unique<FakeNodeHost>()).status().code(),
              StatusCode::kInvalidArgument);
  }
  auto p = Make(o);
  // One semaphore and counter for every node, open to munged's user too.
  struct stat st {};
  ASSERT_EQ(stat("/dev/shm/hpod-fk-faketime-shm", &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  ASSERT_EQ(stat("/dev/shm/sem.hpod-fk-faketime-sem", &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);

  auto env_of = [&](const std::string& id) {
    auto init = nlohmann::json::parse(ReadFile(p->NodeDir(id) + "/node-init.json"));
    return init.value("env", nlohmann::json::object());
  };
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());  // group workers
  auto env = env_of("i-1");
  EXPECT_EQ(env["LD_PRELOAD"], o.faketime_library);
  EXPECT_EQ(env["FAKETIME"], "+90s");
  EXPECT_EQ(env["FAKETIME_DONT_FAKE_MONOTONIC"], "1");
  EXPECT_EQ(env["FAKETIME_SHARED"], "/hpod-fk-faketime-sem /hpod-fk-faketime-shm");
  auto behind = Spec("i-2");
  behind.group_name = "behind";
  ASSERT_TRUE(p->Launch(behind).ok());
  EXPECT_EQ(env_of("i-2")["FAKETIME"], "-90s");
  auto plain = Spec("i-3");
  plain.group_name = "plain";
  ASSERT_TRUE(p->Launch(plain).ok());
  EXPECT_FALSE(env_of("i-3").contains("LD_PRELOAD"));
  EXPECT_FALSE(env_of("i-3").contains("FAKETIME"));

  // Gone with the last node.
  ASSERT_TRUE(p->DestroyAll().ok());
  EXPECT_NE(stat("/dev/shm/hpod-fk-faketime-shm", &st), 0);
  EXPECT_NE(stat("/dev/shm/sem.hpod-fk-faketime-sem", &st), 0);
}

TEST_F(LocalProviderTest, RebootKeepsAddressAndDiskWithANewProcess) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto before = *p->NodeProcess("i-1");
  std::ofstream(p->NodeDir("i-1") + "/disk/marker") << "kept";
  host_.SimulateDeath(before.pid);
  EXPECT_EQ(Observe(*p, "i-1").state, NodeState::kFailed);
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());
  auto after = *p->NodeProcess("i-1");
  EXPECT_NE(after.pid, before.pid);
  auto o = Observe(*p, "i-1");
  EXPECT_EQ(o.state, NodeState::kRunning);
  EXPECT_EQ(o.private_ip, "10.77.0.10");
  EXPECT_TRUE(fs::exists(p->NodeDir("i-1") + "/disk/marker"));
  EXPECT_EQ(host_.netns(), std::set<std::string>{"hpn0"});
  EXPECT_EQ(p->Reboot("i-x", "r-1").code(), StatusCode::kNotFound);
}

TEST_F(LocalProviderTest, RebootIsIdempotentPerRequestIdAcrossRestarts) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());
  auto first = *p->NodeProcess("i-1");
  host_.ClearCalls();
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());  // repeated after a crash: nothing happens
  EXPECT_EQ(*p->NodeProcess("i-1"), first);
  EXPECT_TRUE(host_.calls().empty());
  auto node = nlohmann::json::parse(ReadFile(p->NodeDir("i-1") + "/node.json"));
  EXPECT_EQ(node["last_reboot_request"], "r-1");

  p = Make();  // hpodd restarts: the request id was persisted
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());
  EXPECT_EQ(*p->NodeProcess("i-1"), first);
  ASSERT_TRUE(p->Reboot("i-1", "r-2").ok());
  EXPECT_NE(p->NodeProcess("i-1")->pid, first.pid);
  // An empty id always reboots.
  auto second = *p->NodeProcess("i-1");
  ASSERT_TRUE(p->Reboot("i-1", "").ok());
  EXPECT_NE(p->NodeProcess("i-1")->pid, second.pid);
}

TEST_F(LocalProviderTest, FailedRebootCanBeRetriedWithTheSameRequestId) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  host_.FailNextSpawn();
  EXPECT_FALSE(p->Reboot("i-1", "r-1").ok());
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());
  EXPECT_TRUE(host_.IsAlive(*p->NodeProcess("i-1")));
}

TEST_F(LocalProviderTest, SizedDiskIsMountedBeforeTheNodeStartsAndUnmountedWhenRemoved) {
  auto o = Options();
  o.node_disk_mb = 64;
  auto p = Make(o);
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  const std::string disk = p->NodeDir("i-1") + "/disk";
  auto calls = host_.calls();
  auto mount = std::find(calls.begin(), calls.end(), "MountDisk " + disk + " 64");
  auto spawn = std::find_if(calls.begin(), calls.end(),
                            [](const std::string& c) { return c.rfind("SpawnNode", 0) == 0; });
  ASSERT_NE(mount, calls.end());
  EXPECT_LT(mount, spawn);
  EXPECT_EQ(host_.mounted_disks(), (std::map<std::string, int>{{disk, 64}}));

  // A restart adopts the node with its disk as it is.
  host_.ClearCalls();
  p = Make(o);
  for (const auto& c : host_.calls()) EXPECT_EQ(c.find("Disk"), std::string::npos) << c;
  ASSERT_TRUE(p->InjectFault("i-1", {FaultSpec::Kind::kDiskFull, 0, 0}).ok());
  EXPECT_EQ(host_.calls().back(), "FillDisk " + disk);
  ASSERT_TRUE(p->Reboot("i-1", "r-1").ok());  // a reboot keeps the disk
  EXPECT_EQ(host_.mounted_disks().size(), 1u);

  ASSERT_TRUE(p->Terminate("i-1").ok());
  EXPECT_TRUE(host_.mounted_disks().empty());
  EXPECT_FALSE(fs::exists(p->NodeDir("i-1")));
}

TEST_F(LocalProviderTest, DiskFullNeedsASizedDisk) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  Status s = p->InjectFault("i-1", {FaultSpec::Kind::kDiskFull, 0, 0});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("start hpodd with a sized node disk (--node-disk-mb N)"));
  for (const auto& c : host_.calls()) EXPECT_EQ(c.find("Disk"), std::string::npos) << c;
}

TEST_F(LocalProviderTest, WithoutTheFakeGpuNodesTurnNvmlOff) {
  auto p = Make(Options());
  LaunchSpec gpu = Spec("i-g");
  gpu.instance_type = "ml.g5.12xlarge";
  ASSERT_TRUE(p->Launch(gpu).ok());
  // Their GPUs are stand-ins: the host's own NVML must not judge them.
  EXPECT_EQ(nlohmann::json::parse(ReadFile(p->NodeDir("i-g") + "/node-init.json"))["env"],
            nlohmann::json(
                {{"HPOD_KERNEL_LOG", "/var/lib/hpod-agent/kmsg"}, {"HPOD_NVML_LIBRARY", "none"}}));
}

TEST_F(LocalProviderTest, AgentGetsItsKernelLogAndGpuNodesTheFakeNvml) {
  auto o = Options();
  o.fake_nvml_library = (dir_ / "libfake-nvml.so").string();
  std::ofstream(o.fake_nvml_library) << "";
  auto p = Make(o);
  LaunchSpec gpu = Spec("i-g");
  gpu.instance_type = "ml.g5.12xlarge";  // 4 GPUs
  ASSERT_TRUE(p->Launch(gpu).ok());
  ASSERT_TRUE(p->Launch(Spec("i-c")).ok());
  auto env = [&](const std::string& id) {
    return nlohmann::json::parse(ReadFile(p->NodeDir(id) + "/node-init.json"))["env"];
  };
  EXPECT_EQ(env("i-g"),
            nlohmann::json({{"HPOD_KERNEL_LOG", "/var/lib/hpod-agent/kmsg"},
                            {"HPOD_NVML_LIBRARY", "/var/lib/hpod-agent/libhpod_fake_nvml.so"},
                            {"HPOD_FAKE_NVML_SCRIPT", "/var/lib/hpod-agent/fake-nvml.json"}}));
  EXPECT_EQ(env("i-c"), nlohmann::json({{"HPOD_KERNEL_LOG", "/var/lib/hpod-agent/kmsg"}}));
  EXPECT_EQ(p->KernelLogPath("i-g"), p->NodeDir("i-g") + "/disk/state/kmsg");
  EXPECT_EQ(ReadFile(p->KernelLogPath("i-g")), "");
  EXPECT_EQ(nlohmann::json::parse(ReadFile(p->FakeNvmlScriptPath("i-g"))),
            nlohmann::json({{"devices", 4}}));
  EXPECT_FALSE(fs::exists(p->FakeNvmlScriptPath("i-c")));

  // gpu-xid: the driver's line in the kernel log, the xid in the fake's script.
  ASSERT_TRUE(p->InjectFault("i-g", {FaultSpec::Kind::kGpuXid, 0, 79}).ok());
  ASSERT_TRUE(p->InjectFault("i-g", {FaultSpec::Kind::kGpuXid, 0, 48}).ok());
  ASSERT_TRUE(p->InjectFault("i-c", {FaultSpec::Kind::kGpuXid, 0, 79}).ok());
  EXPECT_EQ(ReadFile(p->KernelLogPath("i-g")),
            "NVRM: Xid (PCI:0000:00:1e): 79, pid=0, name=hpod-inject-fault, Ch 00000000\n"
            "NVRM: Xid (PCI:0000:00:1e): 48, pid=0, name=hpod-inject-fault, Ch 00000000\n");
  EXPECT_EQ(nlohmann::json::parse(ReadFile(p->FakeNvmlScriptPath("i-g"))),
            nlohmann::json({{"devices", 4}, {"xids", {79, 48}}}));
  EXPECT_THAT(ReadFile(p->KernelLogPath("i-c")), HasSubstr("Xid (PCI:0000:00:1e): 79,"));
  // A reboot starts the kernel log and the GPUs afresh.
  ASSERT_TRUE(p->Reboot("i-g", "r-1").ok());
  EXPECT_EQ(ReadFile(p->KernelLogPath("i-g")), "");
  EXPECT_EQ(nlohmann::json::parse(ReadFile(p->FakeNvmlScriptPath("i-g"))),
            nlohmann::json({{"devices", 4}}));
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

TEST(NodeMacTest, FollowsTheAddressOnlyAndIsLocallyAdministered) {
  const std::string mac = NodeMac("10.77.0.12/24");
  EXPECT_THAT(mac, ::testing::MatchesRegex("02(:[0-9a-f]{2}){5}"));
  EXPECT_EQ(NodeMac("10.77.0.12"), mac);     // the prefix length does not matter
  EXPECT_EQ(NodeMac("10.77.0.12/24"), mac);  // a replacement gets the same
  EXPECT_NE(NodeMac("10.77.0.13/24"), mac);
}

}  // namespace
}  // namespace hpod::provider::local
