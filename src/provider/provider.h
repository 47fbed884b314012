#pragma once

// How the control plane gets machines. hpodd's reconcilers ask a Provider to
// launch, terminate and describe nodes; the local provider (Linux namespaces),
// an ssh provider and exec hooks implement it. Every call is idempotent and keyed
// by instance id, so a reconciler may repeat any call after a crash.
//
// Thread contract: implementations must be safe for concurrent calls.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::provider {

struct LaunchSpec {
  std::string instance_id;  // i- + 17 hex, chosen by the control plane
  std::string cluster_id;
  std::string cluster_name;
  std::string cluster_arn;
  std::string group_name;
  std::string instance_name;  // <group>-<n>
  std::string instance_type;  // ml.c5.xlarge
  // The group's ClusterInstanceGroupSpecification (lifecycle config, storage, ...).
  nlohmann::json group_spec = nlohmann::json::object();
};

enum class NodeState {
  kPending,      // launching or running lifecycle scripts
  kRunning,      // ready
  kFailed,       // launch or lifecycle failed; `message` says why
  kTerminating,  // shutting down
  kTerminated,   // gone; the provider forgets it soon after
};

std::string_view NodeStateName(NodeState s);

struct NodeObservation {
  NodeState state = NodeState::kPending;
  std::string message;
  std::string private_ip;
  std::string hostname;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // Starts creating the node; returns once the request is accepted (the node is
  // then kPending). Launching an id that exists is a no-op. kResourceExhausted
  // when there is no capacity; kUnavailable for transient failures.
  virtual Status Launch(const LaunchSpec& spec) = 0;
  // Starts terminating; terminating an unknown or gone id is a no-op.
  virtual Status Terminate(const std::string& instance_id) = 0;
  // kNotFound when the provider has no such node (never launched, or terminated
  // and forgotten).
  virtual StatusOr<NodeObservation> Describe(const std::string& instance_id) = 0;
  // Ids of every node the provider holds for a cluster (for orphan detection).
  virtual StatusOr<std::vector<std::string>> List(const std::string& cluster_id) = 0;
};

}  // namespace hpod::provider
