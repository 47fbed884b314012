#pragma once

// A scripted Provider for tests (and the test-only daemon `hpodd-fake`); hpodd
// never offers it to users. Nodes become Running after `pending_for`, fail when
// their group or instance type is listed in `fail_groups`/`fail_instance_types`,
// and launches beyond `capacity` fail for lack of capacity. Every call is recorded
// so tests can assert the actions the control plane asked for.
//
// With a `state_dir`, each node is a small JSON file there, written atomically, so
// nodes outlive a `kill -9` of the daemon exactly as real machines would.
//
// Thread contract: safe for concurrent use.

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/provider/provider.h"

namespace hpod::provider {

struct FakeProviderOptions {
  std::string state_dir;  // empty: in memory
  std::chrono::milliseconds pending_for{0};
  std::set<std::string> fail_groups;
  std::set<std::string> fail_instance_types;
  std::string failure_message =
      "Lifecycle scripts did not run successfully. Ensure the scripts exist in provided S3 path, "
      "are accessible, and run without errors. Please see CloudWatch logs for lifecycle script "
      "execution details.";
  int capacity = 1 << 30;
  // Terminate takes effect after this long (the node is Terminating meanwhile).
  std::chrono::milliseconds terminating_for{0};
  // What the nodes share with hpodd (Environment()). By default they see every
  // host path, run no agent and keep their address across a replacement; tests
  // declare other machines (sees_hpodd_files = false) or private dirs here.
  NodeEnvironment environment = DefaultEnvironment();
  // Software images (api/software_image.h) it holds, the current one last; empty:
  // it ships none. A node launched with an image in `fail_images` fails.
  std::vector<std::string> images;
  std::set<std::string> fail_images;
  // Simulated agents (the node simulator, tests/support/nodesim): each launched
  // node's agent config goes to <agent_dir>/<instance_id>.json as a real
  // provider delivers it into the node (endpoint, instance id, bootstrap token,
  // hostname, address), is rewritten with `boot` + 1 by a reboot and removed when
  // the node starts terminating. Then RunsAgents() is true and the nodes' agents
  // dial `agent_endpoint`: "unix:///abs/agent.sock" (a path they see as hpodd
  // does), or "https://ADDRESS:PORT" for network agents, whose config then holds
  // the launch's join token (`join_token`) in place of the bootstrap token, as
  // the local provider's do. Empty: the nodes run no agent.
  std::string agent_dir;
  std::string agent_endpoint;
  static NodeEnvironment DefaultEnvironment() {
    NodeEnvironment e;
    e.sees_hpodd_files = true;
    e.replacement_keeps_address = true;
    return e;
  }
};

class FakeProvider final : public Provider {
 public:
  FakeProvider(const Clock& clock, FakeProviderOptions options);

  Status Launch(const LaunchSpec& spec) override;
  Status Terminate(const std::string& instance_id) override;
  StatusOr<NodeObservation> Describe(const std::string& instance_id) override;
  StatusOr<std::vector<std::string>> List(const std::string& cluster_id) override;
  // Heals a broken node in place (same id and address); a repeated request id is
  // a no-op, as the interface asks.
  Status Reboot(const std::string& instance_id, const std::string& request_id) override;
  NodeEnvironment Environment() const override;
  bool RunsAgents() const override { return !options_.agent_dir.empty(); }
  StatusOr<std::string> CurrentImage() const override;
  bool HasImage(const std::string& image_id) const override;
  Status SetNodeImage(const std::string& instance_id, const std::string& image_id) override;

  // Test hooks.
  struct Action {
    std::string verb;  // Launch | Terminate | Reboot
    std::string instance_id;
  };
  std::vector<Action> actions() const;
  size_t node_count() const;
  // Makes the next `n` calls fail with kUnavailable (transient provider errors).
  void FailNextCalls(int n);
  // Marks a node failed now (as a dying machine would).
  void BreakNode(const std::string& instance_id, const std::string& message);
  // Ships `image` from now on (it is held from now on too).
  void ShipImage(const std::string& image);
  // The image a node was launched with ("" for none, or an unknown node).
  std::string ImageOf(const std::string& instance_id) const;

 private:
  struct Node {
    std::string instance_id, cluster_id, group, instance_type, ip;
    double launched_at = 0;
    double terminated_at = -1;  // -1: not terminating
    bool broken = false;
    std::string message;
    std::string last_reboot;  // request id
    std::string bootstrap_token;  // in memory only (for a reboot's agent config)
    int reboots = 0;          // persisted: tests check a recovery rebooted once
    std::string image;        // in memory only
    int boot = 0;             // reboots since this process launched or loaded it
  };
  Status TransientFailure() REQUIRES(mu_);
  // The state files mirror nodes_ and change under mu_ with it.
  void Load() REQUIRES(mu_);
  void Save(const Node& n) REQUIRES(mu_);
  void Erase(const std::string& instance_id) REQUIRES(mu_);
  // The agent config of `agent_dir` (FakeProviderOptions); no-ops without one.
  void WriteAgentConfig(const Node& n, const std::string& bootstrap_token) REQUIRES(mu_);
  void RemoveAgentConfig(const std::string& instance_id) REQUIRES(mu_);
  NodeObservation Observe(const Node& n) const;

  const Clock& clock_;
  const FakeProviderOptions options_;
  mutable Mutex mu_;
  std::vector<std::string> images_ GUARDED_BY(mu_);
  std::map<std::string, Node> nodes_ GUARDED_BY(mu_);
  std::vector<Action> actions_ GUARDED_BY(mu_);
  int fail_next_ GUARDED_BY(mu_) = 0;
  uint32_t next_ip_ GUARDED_BY(mu_) = 0;
};

}  // namespace hpod::provider
