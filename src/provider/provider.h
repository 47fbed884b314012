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
  // One-time token the node's agent presents when it first registers with hpodd
  // (the provider delivers it into the node; hpodd keeps only its hash).
  std::string bootstrap_token;
  // Keep this address (and so the hostname ip-a-b-c-d) instead of allocating one:
  // a replacement node takes over the failed node's name. Empty: allocate.
  std::string private_ip;
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
  // Whether nodes run hpod-agent: then a node is Running only once its agent
  // reported successful lifecycle scripts, not merely when the machine is up.
  virtual bool RunsAgents() const { return false; }
  // Restarts the node's processes, keeping its identity, address and local disk
  // (EC2 RebootInstances). The node is kPending until it is up again.
  virtual Status Reboot(const std::string& instance_id) {
    return UnimplementedError("this provider cannot reboot nodes");
  }
};

}  // namespace hpod::provider
