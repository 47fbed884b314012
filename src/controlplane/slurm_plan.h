#pragma once

// What Slurm should look like for one cluster, derived from the store: which
// group plays which role (the API's SlurmConfig, else the provisioning_parameters
// .json an agent reported from the lifecycle prefix), the rendered configuration
// and its hash, and each node's role and Slurm name. The cluster reconciler
// computes it on every pass (it is cheap: a render of a few KB) and compares it
// with what agents report, so Slurm follows the cluster level-triggered.
//
// The cluster's munge key is created here on first need and kept in the store
// (settings `cluster/<id>/munge_key`), so every node, including ones that join
// later or replace others, gets the same key.
//
// Thread contract: free functions; SlurmAgents implementations are thread-safe.

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/controlplane/options.h"
#include "hpod/slurm/config.h"
#include "hpod/slurm/roles.h"
#include "hpod/slurm/scontrol.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct CommandResult;

// Settings keys of a cluster (removed with the cluster).
std::string MungeKeySetting(const std::string& cluster_id);
std::string ProvisioningParametersSetting(const std::string& cluster_id);
// NodeName → its SSH host key (SlurmOptions::cluster_sshd), one JSON object.
std::string SshHostKeysSetting(const std::string& cluster_id);

// The controller's view of Slurm's nodes, as its agent last reported it.
struct SlurmNodesReport {
  std::string reporter;  // instance id of the agent that sent it
  std::vector<slurm::SlurmNodeState> nodes;
  // Name → position in `nodes`, made by Index() (shared: a copy of the report
  // shares it, and `nodes` is never changed after Index). The health pass looks
  // up every node of the cluster once a second: without it, 10,000 nodes cost
  // 50 million string comparisons a pass.
  std::shared_ptr<const std::unordered_map<std::string, size_t>> index;
  void Index();
  // The row named `name`; by the index when there is one, else by a scan.
  const slurm::SlurmNodeState* Find(const std::string& name) const;
};

// hpodd's side of the agents, as the reconciler needs it (AgentService; fakes in
// tests).
class SlurmAgents {
 public:
  virtual ~SlurmAgents() = default;
  // The agent's last `slurm_state` (null when never reported or not connected).
  virtual nlohmann::json SlurmState(const std::string& instance_id) const = 0;
  virtual std::optional<SlurmNodesReport> SlurmNodes(const std::string& cluster_id) const = 0;
  // Queues `message` to the agent; false when it is not connected.
  virtual bool Send(const std::string& instance_id, const nlohmann::json& message) = 0;
  // Send, unless the agent's current connection was sent the same message less
  // than `resend_after` ago (false then too). The Slurm reconciler resends a
  // node's message each pass until the agent reports it applied; during a large
  // cluster's creation passes follow each other faster than agents answer. The
  // default sends every time (fakes record each).
  virtual bool SendUnlessRecent(const std::string& instance_id, const nlohmann::json& message,
                                std::chrono::milliseconds resend_after) {
    (void)resend_after;
    return Send(instance_id, message);
  }
  virtual StatusOr<CommandResult> Run(const std::string& instance_id,
                                      const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout) = 0;
  // When the agent's current connection opened, epoch seconds of hpodd's clock; 0
  // when it is not connected; none when unknown (fakes that do not say).
  virtual std::optional<double> ConnectedSince(const std::string& instance_id) const {
    return std::nullopt;
  }
};

struct SlurmPlan {
  enum class Mode {
    kNone,     // no roles anywhere (no SlurmConfig, no file): a cluster without Slurm
    kWaiting,  // roles come from provisioning_parameters.json, not reported yet
    kError,    // the roles are contradictory; `error` says what to fix
    kSlurm,
  };
  Mode mode = Mode::kNone;
  std::string error;
  slurm::SlurmRoles roles;
  slurm::SlurmFiles files;
  std::string conf_hash;
  std::vector<std::string> node_names;  // compute nodes in slurm.conf, sorted
  // Every node's NodeName → address (controller, login and compute nodes), for
  // the nodes' /etc/hosts where the agent keeps it (pool hosts).
  std::map<std::string, std::string> hosts;
  std::string controller_instance;  // empty until the controller has an address
  std::string controller_name;
  std::string controller_addr;
  std::string munge_key;  // base64url
  // With SlurmOptions::cluster_sshd, once Ready(): every node's (`hosts`) SSH host
  // key (OpenSSH private key; created on first need and kept in the store, so a
  // replacement under the same NodeName gets the same) and the cluster's
  // known_hosts lines; conf_hash then covers those lines too.
  std::map<std::string, std::string> ssh_host_keys;
  std::string ssh_known_hosts;
  // Per instance id (nodes with an address that are not being removed).
  std::map<std::string, slurm::NodeRole> role_of;
  std::map<std::string, int> gpus_of;  // compute nodes' GPU count

  bool Ready() const { return mode == Mode::kSlurm && !controller_instance.empty(); }
};

// Reads the cluster and computes its plan (creating the munge key if needed).
// Nodes being removed are left out of slurm.conf, except those in `draining`
// (still in Slurm and not yet drained: they leave Slurm once drained).
StatusOr<SlurmPlan> BuildSlurmPlan(store::Store& store, const std::string& cluster_id,
                                   const SlurmOptions& options,
                                   const std::set<std::string>& draining = {});

// The roles the API declares (SlurmConfig) for these groups must make sense:
// kInvalidArgument naming the group otherwise (CreateCluster/UpdateCluster answer
// it as a ValidationException). Groups without any SlurmConfig pass: their roles
// come from provisioning_parameters.json, checked when an agent reports it.
Status CheckSlurmConfig(const std::vector<store::GroupRecord>& groups);

// For a cluster whose roles come from a reported provisioning_parameters.json:
// every group in `groups` must still have a role there (kInvalidArgument saying
// which group to add to the file otherwise). OK when the roles come from
// SlurmConfig or nothing was reported.
Status CheckFileRoles(store::ReadTx& tx, const std::string& cluster_id,
                      const std::vector<store::GroupRecord>& groups);

// The controller group's name ("" when unknown yet), from SlurmConfig or the
// reported provisioning_parameters.json.
StatusOr<std::string> ControllerGroup(store::ReadTx& tx, const std::string& cluster_id,
                                      const std::vector<store::GroupRecord>& groups);

// The groups a cluster needs before it serves (continuous provisioning,
// provisioning.h): the controller group and any login groups, from SlurmConfig
// or the reported provisioning_parameters.json; nullopt while neither says (no
// SlurmConfig and no file reported, which a later node may still bring, or a
// file hpodd cannot use).
StatusOr<std::optional<std::set<std::string>>> PriorityGroups(
    store::ReadTx& tx, const std::string& cluster_id,
    const std::vector<store::GroupRecord>& groups);

// The roles the API declares for the cluster's groups, as provisioning_parameters
// .json for the scripts (null when no group has a SlurmConfig).
nlohmann::json ProvisioningParametersFor(const std::vector<store::GroupRecord>& groups);

// The `slurm` message for one node of a ready plan. `avoid_start_time`: for a
// compute node that replaces one a recovery marked, that row's SlurmdStartTime.
// `hold`: configure only, start no slurmd yet (PROTOCOL.md, slurm).
nlohmann::json SlurmMessage(const SlurmPlan& plan, const store::NodeRecord& node,
                            const SlurmOptions& options, const std::string& avoid_start_time = "",
                            bool hold = false);

// For a cluster without Slurm (Mode::kNone): the `slurm` message of role "none"
// (the agent writes this motd and makes Slurm's commands say there is no Slurm),
// and the cluster event that says so once, both naming why and what to do.
extern const char kNoSlurmMotd[];
extern const char kNoSlurmEvent[];
nlohmann::json NoSlurmMessage(const store::NodeRecord& node);

}  // namespace hpod::controlplane
