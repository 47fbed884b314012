#pragma once

// How the control plane gets machines. hpodd's reconcilers ask a Provider to
// launch, terminate and describe nodes; the local provider (Linux namespaces)
// implements it, and providers for machines hpodd does not run on will. Every call
// is idempotent and keyed by instance id, so a reconciler may repeat any call after
// a crash; provider_conformance.h is the suite every provider passes.
//
// Thread contract: implementations must be safe for concurrent calls.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/provider/node_environment.h"

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
  // The software image to put on the node (api/software_image.h): one HasImage
  // accepts. Empty: the provider's CurrentImage(), or its hosts' own software.
  std::string image_id;
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

// A fault to inject into a node (hpod inject-fault, admin only): how the recovery
// path is tested on real parts.
struct FaultSpec {
  enum class Kind {
    kKillNode,     // every process of the node at once (local: SIGKILL of PID 1)
    kKillAgent,    // the node agent only
    kKillSlurmd,   // the node's slurmd only
    kPartition,    // the node's link down for `seconds`, then up again
    kHang,         // every process of the node stopped (SIGSTOP); never resumed
    kDiskFull,     // the node's own disk filled to the last block
    kGpuXid,       // an NVRM Xid `xid` in the node's kernel log and the fake NVML
    kFlagFile,     // "1" appended to the node's /var/run/sagemaker_healthcheck_status
    kCpuThrottle,  // every process of the node held to 2% of one CPU (a failing stress check)
    kSlowLink,     // the node's egress shaped to 100 Mbit/s (a failing connectivity check)
  };
  Kind kind = Kind::kKillNode;
  int seconds = 0;  // kPartition: how long the link stays down (> 0)
  int xid = 0;      // kGpuXid
};
// "kill-node", "kill-agent", ... (the CLI's --kind values).
std::string_view FaultKindName(FaultSpec::Kind k);
std::optional<FaultSpec::Kind> ParseFaultKind(std::string_view name);

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
  // Whether capacity comes by itself (hosts joining a pool): then a launch
  // refused with kResourceExhausted waits and is tried again, and the node stays
  // Pending with the provider's message; otherwise that launch fails the node.
  virtual bool CapacityArrives() const { return false; }
  // Whether nodes run hpod-agent: then a node is Running only once its agent
  // reported successful lifecycle scripts, not merely when the machine is up.
  virtual bool RunsAgents() const { return false; }
  // How the provider's nodes relate to hpodd: how their agents dial it, which of
  // hpodd's files they see, where the SPANK plugin and the S3 relay are, GPU
  // stand-ins, whether a replacement keeps its address (node_environment.h). The
  // control plane reads this, never a literal. Constant for the provider's life.
  // The default is the conservative declaration of nodes on other machines that
  // run no agent and see nothing of hpodd's; every real provider overrides it
  // (and the conformance suite, provider_conformance.h, checks it is consistent).
  virtual NodeEnvironment Environment() const { return NodeEnvironment{}; }
  // Restarts the node's processes, keeping its identity, address and local disk
  // (EC2 RebootInstances). The node is kPending until it is up again. Idempotent
  // per `request_id`: a second call with the id of the last reboot does nothing
  // (the control plane repeats calls after a crash; it must not reboot twice).
  virtual Status Reboot(const std::string& instance_id, const std::string& request_id) {
    return UnimplementedError("this provider cannot reboot nodes");
  }
  // Injects a fault (FaultSpec). kUnimplemented for kinds the provider cannot
  // inject; kNotFound for an unknown node.
  virtual Status InjectFault(const std::string& instance_id, const FaultSpec& fault) {
    return UnimplementedError("this provider cannot inject faults");
  }
  // The software image (api/software_image.h) this provider puts on the nodes it
  // launches now; "" when it ships none (its nodes run their hosts' own software,
  // as pool hosts do). May take a moment: a provider keeps a copy of each image
  // it names, so that nodes launched later with it get the same programs.
  virtual StatusOr<std::string> CurrentImage() const { return std::string(); }
  // Whether LaunchSpec::image_id may name `image_id` (the provider still holds it).
  virtual bool HasImage(const std::string& image_id) const { return false; }
  // The image the node runs from its next start (a Reboot), for a node that is
  // updated in place (a controller, which is never replaced). Idempotent.
  // kInvalidArgument for an image HasImage refuses; kUnimplemented where the
  // provider ships no images.
  virtual Status SetNodeImage(const std::string& instance_id, const std::string& image_id) {
    return UnimplementedError("this provider ships no software images");
  }
};

// Terminates the node (idempotent) and says whether it is gone: Describe says
// Terminated or NotFound. false while it is still terminating; another error
// of Describe or Terminate is returned.
StatusOr<bool> TerminateAndCheckGone(Provider& provider, const std::string& instance_id);

}  // namespace hpod::provider
