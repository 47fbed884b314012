// The local provider passes the provider conformance suite (provider_conformance.h)
// over a FakeNodeHost: the provider's own logic (ids, addresses, persistence,
// reboots, the declared environment) without root. provider_local_root_test runs
// the real namespaces.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hpod/provider/local/local_provider.h"
#include "hpod/provider/local/local_provider_test_fixture.h"
#include "hpod/provider/local/node_host.h"
#include "hpod/provider/local/node_init.h"
#include "hpod/provider/provider_conformance.h"

namespace hpod::provider::local {
namespace {

namespace fs = std::filesystem;

class LocalHarness {
 public:
  LocalHarness()
      : dir_(fs::temp_directory_path() / ("hpod-local-conformance-" + std::to_string(getpid()) +
                                          "-" + std::to_string(next_++))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    host_.SetRoutes({"default via 10.0.2.2 dev eth0"});
    LocalProviderOptions o;
    o.state_dir = (dir_ / "local").string();
    o.node_block = "10.77.0.0/16";
    o.node_init_binary = "/usr/bin/hpod-node-init";
    o.agent_binary = test_support::kAbsentAgent;
    o.agent_endpoint = "unix:///var/lib/hpod/agent.sock";
    // Any file will do: the provider copies it onto node disks as it is.
    o.spank_plugin = (dir_ / "spank_hpod.so").string();
    std::ofstream(o.spank_plugin) << "not really a plugin";
    auto p = LocalProvider::Create(o, std::make_unique<test_support::SharedHost>(&host_));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) provider_ = std::move(*p);
  }
  ~LocalHarness() {
    provider_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  Provider& provider() { return *provider_; }
  LocalProvider& local() { return *provider_; }
  LaunchSpec Spec(const std::string& id, const std::string& cluster) {
    return test_support::TestSpec(id, cluster);
  }
  // The fake host settles at once: nothing to wait for.
  void Advance() {}
  // Each start of a node is one spawn of its PID 1 with its node-init config.
  int Starts(const std::string& id) {
    int starts = 0;
    for (const NodeSpawn& s : host_.spawns()) {
      if (s.config_path.find("/" + id + "/") != std::string::npos) ++starts;
    }
    return starts;
  }

 private:
  static inline int next_ = 0;
  fs::path dir_;
  FakeNodeHost host_;
  std::unique_ptr<LocalProvider> provider_;
};

// What the local provider declares, field by field: the facts the control plane
// once read from literals and provider-specific methods.
TEST(LocalProviderEnvironmentTest, DeclaresNodesThatShareThisMachine) {
  LocalHarness h;
  const NodeEnvironment e = h.provider().Environment();
  EXPECT_EQ(e.agent_socket, "/run/hpod/agent.sock");
  EXPECT_EQ(e.agent_url, "");
  EXPECT_EQ(e.s3_relay_socket, "/run/hpod/s3.sock");
  EXPECT_TRUE(e.sees_hpodd_files);
  EXPECT_EQ(e.PrivateDirOf("/tmp/lcs"), "/tmp");
  EXPECT_EQ(e.PrivateDirOf("/var/tmp/lcs"), "");
  EXPECT_EQ(e.spank_plugin, "/var/lib/hpod-agent/spank_hpod.so");
  EXPECT_TRUE(e.gpu_stand_ins);
  EXPECT_EQ(e.gpu_device_dir, "/run/hpod-gpus");
  EXPECT_TRUE(e.replacement_keeps_address);
}

// The declaration agrees with what the provider does: node-init binds hpodd's
// socket directory where agent_socket says, and the SPANK plugin is on the node
// disk where spank_plugin says (the disk's state/ is the node's /var/lib/hpod-agent).
TEST(LocalProviderEnvironmentTest, AgreesWithTheNodesItMakes) {
  LocalHarness h;
  const NodeEnvironment e = h.provider().Environment();
  ASSERT_TRUE(h.provider().Launch(h.Spec("i-0e0000000000000f1", "env-c1")).ok());
  const std::string node_dir = h.local().NodeDir("i-0e0000000000000f1");
  auto init = LoadNodeInitConfig(node_dir + "/node-init.json");
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  bool socket_dir_bound = false;
  for (const MountStep& m : PlanMounts(*init)) {
    socket_dir_bound |= m.kind == MountStep::Kind::kBind && m.source == "/var/lib/hpod" &&
                        m.target + "/agent.sock" == e.agent_socket;
  }
  EXPECT_TRUE(socket_dir_bound) << "no bind of hpodd's socket directory on " << e.agent_socket;
  EXPECT_EQ(e.spank_plugin, std::string(kAgentStateDir) + "/spank_hpod.so");
  EXPECT_TRUE(fs::exists(node_dir + "/disk/state/spank_hpod.so"));
}

}  // namespace
}  // namespace hpod::provider::local

// The suite's generated names live in its own namespace.
namespace hpod::provider::conformance {
INSTANTIATE_TYPED_TEST_SUITE_P(Local, ProviderConformanceTest,
                               ::hpod::provider::local::LocalHarness);
}  // namespace hpod::provider::conformance
