#pragma once

// Which instance group plays which Slurm role, from either of the two ways
// HyperPod lets users say it (reference contract §3, §10):
//  - the API's per-group `SlurmConfig` ({"NodeType": "Controller"|"Login"|"Compute",
//    "PartitionNames": ["dev"]}, at most one name), the 2026 form;
//  - the classic `provisioning_parameters.json` in the lifecycle prefix
//    ({"controller_group": …, "login_group": …, "worker_groups":
//    [{"instance_group_name": …, "partition_name": …}]}).
// Rules (hpod's, stated in every error): exactly one controller group holding
// exactly one instance; at most one login group; every group has a role (with
// SlurmConfig, a group that sets none is a compute group); a
// compute group without a partition name gets HyperPod's default, the instance
// type ("ml.c5.2xlarge"). Errors are kInvalidArgument with one line that names the
// group or key to fix.
//
// Thread contract: pure functions.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::slurm {

enum class NodeRole { kController, kLogin, kCompute };

// "controller" | "login" | "compute" (the agent protocol's spelling).
const char* RoleName(NodeRole role);

struct GroupInput {
  std::string name;
  std::string instance_type;
  int instance_count = 0;
  nlohmann::json slurm_config;  // the group's `SlurmConfig`, or null
};

struct SlurmRoles {
  std::string controller_group;
  std::vector<std::string> login_groups;
  // Compute group name → its partition, in the groups' order.
  std::vector<std::pair<std::string, std::string>> partitions;
  bool from_provisioning_parameters = false;

  // kCompute for a group that is neither controller nor login.
  NodeRole RoleOf(const std::string& group) const;
  // The partition of a compute group ("" for other groups).
  std::string PartitionOf(const std::string& group) const;
  // provisioning_parameters.json as HyperPod's scripts read it (version,
  // workload_manager, controller_group, login_group, worker_groups).
  nlohmann::json ToProvisioningParameters() const;
};

// nullopt when no group has a SlurmConfig (roles then come from the file). When
// some do, a group without one is a compute group in the default partition.
StatusOr<std::optional<SlurmRoles>> RolesFromSlurmConfig(const std::vector<GroupInput>& groups);

// Roles from provisioning_parameters.json. Every group named must exist in
// `groups`, and every group in `groups` must be named. Once a cluster is running,
// its file may still name login or worker groups since deleted:
// `tolerate_gone_groups` skips those (the controller group must always exist).
StatusOr<SlurmRoles> RolesFromProvisioningParameters(const nlohmann::json& params,
                                                     const std::vector<GroupInput>& groups,
                                                     bool tolerate_gone_groups = false);

}  // namespace hpod::slurm
