#include "hpod/slurm/roles.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace hpod::slurm {
namespace {

using nlohmann::json;

constexpr char kParamsFile[] = "provisioning_parameters.json";

const GroupInput* FindGroup(const std::vector<GroupInput>& groups, const std::string& name) {
  for (const GroupInput& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

// "a, b, c", for errors that should show the user what names exist.
std::string GroupList(const std::vector<GroupInput>& groups) {
  std::string out;
  for (const GroupInput& g : groups) {
    if (!out.empty()) out += ", ";
    out += g.name;
  }
  return out;
}

// Slurm partition names end up unquoted in slurm.conf and in `sinfo` columns, so
// hpod allows only characters that need no quoting. Dots are allowed because
// HyperPod's default partition is the instance type ("ml.c5.2xlarge"). "DEFAULT"
// is Slurm's keyword for partition defaults, not a partition.
bool ValidPartitionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](char c) {
    return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  });
  return upper != "DEFAULT";
}

Status PartitionNameError(const std::string& where, const std::string& name) {
  return InvalidArgumentError(where + " '" + name +
                              "' is not a valid Slurm partition name (1-64 characters from "
                              "A-Z a-z 0-9 _ . -, not DEFAULT)");
}

Status CheckControllerCount(const GroupInput& controller, const std::string& prefix) {
  if (controller.instance_count == 1) return OkStatus();
  return InvalidArgumentError(prefix + "controller group '" + controller.name +
                              "' has InstanceCount " + std::to_string(controller.instance_count) +
                              "; hpod runs one slurmctld, so the controller group must have "
                              "exactly 1 instance");
}

// Orders `partitions` like `groups`, as SlurmRoles promises.
void SortPartitionsByGroupOrder(const std::vector<GroupInput>& groups,
                                std::vector<std::pair<std::string, std::string>>& partitions) {
  std::vector<std::pair<std::string, std::string>> sorted;
  for (const GroupInput& g : groups) {
    for (const auto& p : partitions) {
      if (p.first == g.name) sorted.push_back(p);
    }
  }
  partitions = std::move(sorted);
}

}  // namespace

const char* RoleName(NodeRole role) {
  switch (role) {
    case NodeRole::kController:
      return "controller";
    case NodeRole::kLogin:
      return "login";
    case NodeRole::kCompute:
      return "compute";
  }
  return "compute";
}

NodeRole SlurmRoles::RoleOf(const std::string& group) const {
  if (group == controller_group) return NodeRole::kController;
  if (std::find(login_groups.begin(), login_groups.end(), group) != login_groups.end()) {
    return NodeRole::kLogin;
  }
  return NodeRole::kCompute;
}

std::string SlurmRoles::PartitionOf(const std::string& group) const {
  for (const auto& [g, partition] : partitions) {
    if (g == group) return partition;
  }
  return "";
}

json SlurmRoles::ToProvisioningParameters() const {
  json out = json::object();
  out["version"] = "1.0.0";
  out["workload_manager"] = "slurm";
  out["controller_group"] = controller_group;
  // HyperPod's file has a single optional login_group; SlurmRoles never holds
  // more than one (both parsers reject a second).
  if (!login_groups.empty()) out["login_group"] = login_groups.front();
  json workers = json::array();
  for (const auto& [group, partition] : partitions) {
    workers.push_back({{"instance_group_name", group}, {"partition_name", partition}});
  }
  out["worker_groups"] = std::move(workers);
  return out;
}

StatusOr<std::optional<SlurmRoles>> RolesFromSlurmConfig(const std::vector<GroupInput>& groups) {
  bool any = std::any_of(groups.begin(), groups.end(),
                         [](const GroupInput& g) { return !g.slurm_config.is_null(); });
  if (!any) return std::optional<SlurmRoles>();

  SlurmRoles roles;
  const GroupInput* controller = nullptr;
  const GroupInput* login = nullptr;
  for (const GroupInput& g : groups) {
    const std::string group = "Instance group '" + g.name + "'";
    if (g.slurm_config.is_null()) {
      // Worker groups are the common case; only the controller (and a login
      // group) must say what they are.
      roles.partitions.emplace_back(g.name, g.instance_type);
      continue;
    }
    if (!g.slurm_config.is_object()) {
      return InvalidArgumentError(group + " has a SlurmConfig that is not a JSON object");
    }
    auto type_it = g.slurm_config.find("NodeType");
    std::string type;
    if (type_it != g.slurm_config.end() && type_it->is_string()) type = type_it->get<std::string>();
    if (type != "Controller" && type != "Login" && type != "Compute") {
      std::string shown = type_it == g.slurm_config.end() ? "(missing)"
                          : type_it->is_string()          ? "'" + type + "'"
                                                          : type_it->dump();
      return InvalidArgumentError(group + " has SlurmConfig.NodeType " + shown +
                                  "; it must be Controller, Login or Compute");
    }

    // PartitionNames: absent, null or an array of at most one string.
    std::vector<std::string> names;
    auto parts_it = g.slurm_config.find("PartitionNames");
    if (parts_it != g.slurm_config.end() && !parts_it->is_null()) {
      if (!parts_it->is_array()) {
        return InvalidArgumentError(group + " has SlurmConfig.PartitionNames that is not a list");
      }
      for (const json& p : *parts_it) {
        if (!p.is_string()) {
          return InvalidArgumentError(group + " has a SlurmConfig.PartitionNames entry that is " +
                                      "not a string");
        }
        names.push_back(p.get<std::string>());
      }
    }
    if (names.size() > 1) {
      return InvalidArgumentError(group + " has " + std::to_string(names.size()) +
                                  " SlurmConfig.PartitionNames; at most one is supported");
    }
    if (!names.empty() && type != "Compute") {
      return InvalidArgumentError(group + " has NodeType " + type +
                                  " and SlurmConfig.PartitionNames; only Compute groups belong "
                                  "to a partition");
    }
    if (!names.empty() && !ValidPartitionName(names.front())) {
      return PartitionNameError(group + " SlurmConfig.PartitionNames entry", names.front());
    }

    if (type == "Controller") {
      if (controller != nullptr) {
        return InvalidArgumentError("Instance groups '" + controller->name + "' and '" + g.name +
                                    "' both have SlurmConfig.NodeType Controller; a Slurm "
                                    "cluster needs exactly one controller group");
      }
      controller = &g;
    } else if (type == "Login") {
      if (login != nullptr) {
        return InvalidArgumentError("Instance groups '" + login->name + "' and '" + g.name +
                                    "' both have SlurmConfig.NodeType Login; hpod supports at "
                                    "most one login group");
      }
      login = &g;
    } else {
      // HyperPod's default partition is named after the instance type.
      roles.partitions.emplace_back(g.name, names.empty() ? g.instance_type : names.front());
    }
  }
  if (controller == nullptr) {
    return InvalidArgumentError(
        "No instance group has SlurmConfig.NodeType Controller; a Slurm cluster needs exactly one "
        "controller group");
  }
  HPOD_RETURN_IF_ERROR(CheckControllerCount(*controller, "SlurmConfig: "));
  roles.controller_group = controller->name;
  if (login != nullptr) roles.login_groups.push_back(login->name);
  roles.from_provisioning_parameters = false;
  return std::optional<SlurmRoles>(std::move(roles));
}

StatusOr<SlurmRoles> RolesFromProvisioningParameters(const json& params,
                                                     const std::vector<GroupInput>& groups,
                                                     bool tolerate_gone_groups) {
  const std::string prefix = std::string(kParamsFile) + ": ";
  if (!params.is_object()) {
    return InvalidArgumentError(std::string(kParamsFile) + " must be a JSON object");
  }
  auto unknown_group = [&](const std::string& key, const std::string& name) {
    return InvalidArgumentError(
        prefix + key + " '" + name +
        "' is not an instance group of this cluster (groups: " + GroupList(groups) + ")");
  };

  if (auto it = params.find("workload_manager"); it != params.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "slurm") {
      std::string shown = it->is_string() ? "'" + it->get<std::string>() + "'" : it->dump();
      return InvalidArgumentError(prefix + "workload_manager is " + shown +
                                  "; hpod supports only 'slurm'");
    }
  }

  // Which key named each group, to reject a group named twice.
  std::set<std::string> named;
  auto claim = [&](const std::string& name, const std::string& key) -> Status {
    if (!named.insert(name).second) {
      return InvalidArgumentError(prefix + "instance group '" + name + "' is named twice (again " +
                                  key + "); each group has exactly one role");
    }
    return OkStatus();
  };

  SlurmRoles roles;
  roles.from_provisioning_parameters = true;

  auto ctl_it = params.find("controller_group");
  if (ctl_it == params.end() || !ctl_it->is_string() || ctl_it->get<std::string>().empty()) {
    return InvalidArgumentError(prefix +
                                "controller_group is required (a string naming the instance "
                                "group that runs slurmctld)");
  }
  roles.controller_group = ctl_it->get<std::string>();
  const GroupInput* controller = FindGroup(groups, roles.controller_group);
  if (controller == nullptr) return unknown_group("controller_group", roles.controller_group);
  HPOD_RETURN_IF_ERROR(CheckControllerCount(*controller, prefix));
  HPOD_RETURN_IF_ERROR(claim(roles.controller_group, "as controller_group"));

  // login_group is optional; HyperPod's own samples leave it out or empty.
  if (auto it = params.find("login_group"); it != params.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidArgumentError(prefix + "login_group must be a string");
    }
    std::string login = it->get<std::string>();
    if (!login.empty()) {
      if (FindGroup(groups, login) != nullptr) {
        HPOD_RETURN_IF_ERROR(claim(login, "as login_group"));
        roles.login_groups.push_back(login);
      } else if (!tolerate_gone_groups) {
        return unknown_group("login_group", login);
      }
    }
  }

  if (auto it = params.find("worker_groups"); it != params.end() && !it->is_null()) {
    if (!it->is_array()) {
      return InvalidArgumentError(prefix +
                                  "worker_groups must be a list of "
                                  "{instance_group_name, partition_name}");
    }
    for (const json& w : *it) {
      auto name_it = w.is_object() ? w.find("instance_group_name") : w.end();
      if (!w.is_object() || name_it == w.end() || !name_it->is_string()) {
        return InvalidArgumentError(prefix +
                                    "every worker_groups entry needs a string "
                                    "instance_group_name");
      }
      std::string name = name_it->get<std::string>();
      const GroupInput* group = FindGroup(groups, name);
      if (group == nullptr && tolerate_gone_groups) continue;
      if (group == nullptr) return unknown_group("worker_groups instance_group_name", name);
      HPOD_RETURN_IF_ERROR(claim(name, "in worker_groups"));

      std::string partition;
      if (auto p = w.find("partition_name"); p != w.end() && !p->is_null()) {
        if (!p->is_string()) {
          return InvalidArgumentError(prefix + "worker_groups entry '" + name +
                                      "' has a partition_name that is not a string");
        }
        partition = p->get<std::string>();
      }
      // HyperPod's default partition is named after the instance type.
      if (partition.empty()) {
        partition = group->instance_type;
      } else if (!ValidPartitionName(partition)) {
        return PartitionNameError(prefix + "worker_groups entry '" + name + "' partition_name",
                                  partition);
      }
      roles.partitions.emplace_back(name, partition);
    }
  }

  for (const GroupInput& g : groups) {
    if (named.count(g.name) == 0) {
      return InvalidArgumentError(std::string(kParamsFile) + " does not name instance group '" +
                                  g.name +
                                  "' (add it to worker_groups, or as controller_group/"
                                  "login_group)");
    }
  }
  SortPartitionsByGroupOrder(groups, roles.partitions);
  return roles;
}

}  // namespace hpod::slurm
