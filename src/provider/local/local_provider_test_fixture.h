#pragma once

// LocalProviderTest's fixture, shared by local_provider_test.cc and
// local_faults_test.cc: a provider over a FakeNodeHost in a temp state dir.
//
// Thread contract: test-only; one test thread.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "hpod/provider/local/local_provider.h"

namespace hpod::provider::local::test_support {

namespace fs = std::filesystem;

// Lets two provider instances (before and after a "restart") share one fake world.
class SharedHost final : public NodeHost {
 public:
  explicit SharedHost(FakeNodeHost* h) : h_(h) {}
  StatusOr<std::vector<std::string>> ListRoutes() override { return h_->ListRoutes(); }
  Status AddGuardRoute(const std::string& c) override { return h_->AddGuardRoute(c); }
  Status DeleteGuardRoute(const std::string& c) override { return h_->DeleteGuardRoute(c); }
  Status AddServiceAddress(const std::string& c) override { return h_->AddServiceAddress(c); }
  Status DeleteServiceAddress(const std::string& c) override { return h_->DeleteServiceAddress(c); }
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
  StatusOr<std::vector<NodeProcessInfo>> NodeProcesses(const ProcessId& id) override {
    return h_->NodeProcesses(id);
  }
  Status Signal(const ProcessId& id, int sig) override { return h_->Signal(id, sig); }
  Status SetLinkUp(const std::string& l, bool up) override { return h_->SetLinkUp(l, up); }
  Status MountDisk(const std::string& d, int mb) override { return h_->MountDisk(d, mb); }
  Status UnmountDisk(const std::string& d) override { return h_->UnmountDisk(d); }
  Status FillDisk(const std::string& d) override { return h_->FillDisk(d); }
  Status ThrottleCpu(const ProcessId& id, const std::string& name, int percent) override {
    return h_->ThrottleCpu(id, name, percent);
  }
  Status RemoveCpuThrottle(const std::string& name) override { return h_->RemoveCpuThrottle(name); }
  Status ShapeEgress(const std::string& netns, const std::string& dev, int kbit) override {
    return h_->ShapeEgress(netns, dev, kbit);
  }
  Status RunInNodeMounts(const ProcessId& id, const std::vector<std::string>& argv) override {
    return h_->RunInNodeMounts(id, argv);
  }

 private:
  FakeNodeHost* h_;
};

// A worker's LaunchSpec in `cluster` (the local tests' and the conformance harness's).
inline LaunchSpec TestSpec(const std::string& id, const std::string& cluster,
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

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The agent the fake-host tests name: a path that exists nowhere, so no test
// depends on whether this machine has hpod-agent installed (an existing program
// would be copied into the image store and run from there, node_images.cc).
inline constexpr char kAbsentAgent[] = "/nonexistent/hpod-test/bin/hpod-agent";

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
    o.agent_binary = kAbsentAgent;
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
    return TestSpec(id, cluster, ip);
  }
  NodeObservation Observe(LocalProvider& p, const std::string& id) {
    auto o = p.Describe(id);
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return o.ok() ? *o : NodeObservation{};
  }

  fs::path dir_;
  FakeNodeHost host_;
};

}  // namespace hpod::provider::local::test_support
