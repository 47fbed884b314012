#include "hpod/controlplane/slurm_plan.h"

#include <algorithm>

#include "hpod/api/agent_protocol.h"
#include "hpod/api/instance_types.h"
#include "hpod/api/states.h"
#include "hpod/base/crypto.h"
#include "hpod/base/ssh_key.h"
#include "hpod/controlplane/agent_service.h"

namespace hpod::controlplane {

using nlohmann::json;
using store::GroupRecord;
using store::NodeRecord;

namespace {

// munge's own default key size (`mungekey` writes 1024 bytes).
constexpr size_t kMungeKeyBytes = 1024;

std::vector<slurm::GroupInput> GroupInputs(const std::vector<GroupRecord>& groups) {
  std::vector<slurm::GroupInput> out;
  for (const auto& g : groups) {
    if (g.deleting) continue;
    slurm::GroupInput in;
    in.name = g.name;
    in.instance_type = g.spec.value("InstanceType", "");
    in.instance_count = g.target_count;
    if (auto it = g.spec.find("SlurmConfig"); it != g.spec.end()) in.slurm_config = *it;
    out.push_back(std::move(in));
  }
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Claims auto-resume only where the plugin is installed (`auto_resume`).
std::string Motd(const std::string& role, const std::string& controller_name, bool auto_resume) {
  std::string text =
      "\n"
      "  hpod cluster node (Slurm " +
      role + "; controller " + controller_name +
      ")\n"
      "\n"
      "  Jobs:      sinfo; sbatch --nodes 2 job.sh; squeue; srun -N2 hostname\n"
      "  Shared:    /fsx is on every node; put code, data and checkpoints there.\n"
      "  Training:  copy hpod-train to /fsx/bin, then\n"
      "             srun --nodes N /fsx/bin/hpod-train --checkpoint-dir /fsx/ckpt ...\n"
      "             trains one model across the nodes (one rank each); the same\n"
      "             command again resumes from the newest checkpoint.\n"
      "  Faulty node: hpod replaces it (same hostname) or reboots it:\n"
      "             scontrol update node=<name> state=fail reason=\"Action:Replace\"\n"
      "             scontrol update node=<name> state=fail reason=\"Action:Reboot\"\n"
      "             (it waits for the node's jobs to end; state=down kills them now).\n" +
      std::string(auto_resume
                      ? "  Auto-resume: sbatch --nodes N --auto-resume=1 job.sh (or srun\n"
                        "             --auto-resume=1 inside an allocation): when a node fails,\n"
                        "             hpod replaces it and srun re-runs the step in the same\n"
                        "             allocation; resume from your newest checkpoint.\n"
                        "             Its goodput: hpod describe-job-goodput (where you\n"
                        "             run hpod) --cluster-name <name> --job-id <id>.\n"
                      : "") +
      "  Your own Slurm settings: /opt/slurm/etc/slurm.user.conf on the controller\n"
      "  (hpod rewrites slurm.conf, never that file).\n"
      "\n";
  return text;
}

}  // namespace

// What a user meets on a node of a cluster whose groups declare no Slurm role,
// where `sinfo` would otherwise fail with Slurm's own "DNS SRV lookup failed".
const char kNoSlurmMotd[] =
    "\n"
    "  hpod cluster node: this cluster has no Slurm (no sinfo, sbatch or srun here).\n"
    "  Why: no instance group has a SlurmConfig, and the lifecycle source has no\n"
    "       provisioning_parameters.json naming controller_group and worker_groups.\n"
    "  To get Slurm: add provisioning_parameters.json to the lifecycle source (as in\n"
    "       hpod's examples/lifecycle/base-config/), or a SlurmConfig to each instance\n"
    "       group; then recreate the cluster.\n"
    "\n";

const char kNoSlurmEvent[] =
    "This cluster has no Slurm: no instance group has a SlurmConfig, and the lifecycle source "
    "has no provisioning_parameters.json naming controller_group and worker_groups. To get "
    "Slurm, add that file (as in examples/lifecycle/base-config/) or a SlurmConfig to each "
    "instance group, and recreate the cluster.";

std::string MungeKeySetting(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/munge_key";
}
std::string ProvisioningParametersSetting(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/provisioning_parameters";
}
std::string SshHostKeysSetting(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/ssh_host_keys";
}

namespace {

// Gives every node of the plan (plan.hosts) its host key, making the missing ones
// (and storing them: one JSON object, NodeName → {key, pub}, so a pass reads one
// setting), then the cluster's known_hosts lines and the conf hash that covers
// them. `stored`: the setting as the pass read it ("" when absent).
Status AddSshHostKeys(store::Store& store, const std::string& cluster_id, const std::string& stored,
                      SlurmPlan& plan) {
  json keys = stored.empty() ? json::object() : json::parse(stored, nullptr, false);
  if (!keys.is_object()) keys = json::object();  // unreadable: made anew, as a lost key is
  // An entry is usable when both its keys are strings; anything else (a damaged
  // setting) is made anew, as a lost key would be.
  auto usable = [](const json& all, const std::string& name) {
    auto it = all.find(name);
    return it != all.end() && it->is_object() && it->contains("key") && (*it)["key"].is_string() &&
           it->contains("pub") && (*it)["pub"].is_string();
  };
  json fresh = json::object();
  for (const auto& [name, addr] : plan.hosts) {
    if (usable(keys, name)) continue;
    HPOD_ASSIGN_OR_RETURN(SshKeyPair k, GenerateEd25519SshKey(name));
    fresh[name] = {{"key", k.private_key}, {"pub", k.public_key}};
  }
  if (!fresh.empty()) {
    HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) -> Status {
      HPOD_RETURN_IF_ERROR(tx.GetCluster(cluster_id).status());  // not deleted meanwhile
      auto now = tx.GetSetting(SshHostKeysSetting(cluster_id));
      if (!now.ok() && now.status().code() != StatusCode::kNotFound) return now.status();
      json merged = now.ok() ? json::parse(*now, nullptr, false) : json::object();
      if (!merged.is_object()) merged = json::object();
      // A concurrent pass's keys win: a name keeps the first key it got.
      for (const auto& [name, k] : fresh.items()) {
        if (!usable(merged, name)) merged[name] = k;
      }
      keys = merged;
      return tx.PutSetting(SshHostKeysSetting(cluster_id), merged.dump());
    }));
  }
  for (const auto& [name, addr] : plan.hosts) {
    if (!usable(keys, name)) return InternalError("no SSH host key was kept for " + name);
    plan.ssh_host_keys[name] = keys[name]["key"].get<std::string>();
    // known_hosts without the key's comment: name and address are the line's.
    std::string pub = keys[name]["pub"].get<std::string>();
    pub = pub.substr(0, pub.find(' ', pub.find(' ') + 1));
    plan.ssh_known_hosts += name + "," + addr + " " + pub + "\n";
  }
  return OkStatus();
}

}  // namespace

void SlurmNodesReport::Index() {
  auto m = std::make_shared<std::unordered_map<std::string, size_t>>();
  m->reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); i++) m->emplace(nodes[i].name, i);  // the first wins
  index = std::move(m);
}

const slurm::SlurmNodeState* SlurmNodesReport::Find(const std::string& name) const {
  if (index != nullptr) {
    auto it = index->find(name);
    return it == index->end() || it->second >= nodes.size() ? nullptr : &nodes[it->second];
  }
  for (const auto& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

Status CheckSlurmConfig(const std::vector<GroupRecord>& groups) {
  return slurm::RolesFromSlurmConfig(GroupInputs(groups)).status();
}

Status CheckFileRoles(store::ReadTx& tx, const std::string& cluster_id,
                      const std::vector<GroupRecord>& groups) {
  auto api_roles = slurm::RolesFromSlurmConfig(GroupInputs(groups));
  if (!api_roles.ok() || api_roles->has_value()) return OkStatus();
  auto text = tx.GetSetting(ProvisioningParametersSetting(cluster_id));
  if (!text.ok()) {
    return text.status().code() == StatusCode::kNotFound ? OkStatus() : text.status();
  }
  json params = json::parse(*text, nullptr, false);
  if (!params.is_object() || params.contains("unparsable")) return OkStatus();
  Status s = slurm::RolesFromProvisioningParameters(params, GroupInputs(groups),
                                                    /*tolerate_gone_groups=*/true)
                 .status();
  if (s.ok()) return s;
  return InvalidArgumentError(std::string(s.message()) +
                              " (this cluster's Slurm roles come from the "
                              "provisioning_parameters.json its nodes reported)");
}

StatusOr<std::string> ControllerGroup(store::ReadTx& tx, const std::string& cluster_id,
                                      const std::vector<GroupRecord>& groups) {
  auto api_roles = slurm::RolesFromSlurmConfig(GroupInputs(groups));
  if (api_roles.ok() && api_roles->has_value()) return (*api_roles)->controller_group;
  auto text = tx.GetSetting(ProvisioningParametersSetting(cluster_id));
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::string();
    return text.status();
  }
  json params = json::parse(*text, nullptr, false);
  if (!params.is_object()) return std::string();
  auto it = params.find("controller_group");
  return it != params.end() && it->is_string() ? it->get<std::string>() : std::string();
}

StatusOr<std::optional<std::set<std::string>>> PriorityGroups(
    store::ReadTx& tx, const std::string& cluster_id, const std::vector<GroupRecord>& groups) {
  std::optional<slurm::SlurmRoles> roles;
  auto api_roles = slurm::RolesFromSlurmConfig(GroupInputs(groups));
  if (api_roles.ok() && api_roles->has_value()) {
    roles = **api_roles;
  } else {
    auto text = tx.GetSetting(ProvisioningParametersSetting(cluster_id));
    if (!text.ok()) {
      if (text.status().code() == StatusCode::kNotFound)
        return std::optional<std::set<std::string>>();
      return text.status();
    }
    json params = json::parse(*text, nullptr, false);
    // "null" (no file so far) too: a later node's scripts may still bring one
    // (groups may use different sources; agent_service.cc).
    if (!params.is_object() || params.contains("unparsable")) {
      return std::optional<std::set<std::string>>();
    }
    auto file_roles = slurm::RolesFromProvisioningParameters(params, GroupInputs(groups),
                                                             /*tolerate_gone_groups=*/true);
    if (!file_roles.ok()) return std::optional<std::set<std::string>>();
    roles = *file_roles;
  }
  std::set<std::string> out(roles->login_groups.begin(), roles->login_groups.end());
  if (!roles->controller_group.empty()) out.insert(roles->controller_group);
  return std::optional<std::set<std::string>>(std::move(out));
}

json ProvisioningParametersFor(const std::vector<GroupRecord>& groups) {
  auto roles = slurm::RolesFromSlurmConfig(GroupInputs(groups));
  if (!roles.ok() || !roles->has_value()) return nullptr;
  return (*roles)->ToProvisioningParameters();
}

StatusOr<SlurmPlan> BuildSlurmPlan(store::Store& store, const std::string& cluster_id,
                                   const SlurmOptions& options,
                                   const std::set<std::string>& draining) {
  SlurmPlan plan;
  store::ClusterRecord c;
  std::vector<GroupRecord> groups;
  std::vector<NodeRecord> nodes;
  std::optional<std::string> params_text;
  std::string ssh_keys;
  // A read on every pass; the one write (the munge key) happens once per cluster.
  HPOD_RETURN_IF_ERROR(store.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(cluster_id));
    auto p = tx.GetSetting(ProvisioningParametersSetting(cluster_id));
    if (p.ok()) params_text = *p;
    auto key = tx.GetSetting(MungeKeySetting(cluster_id));
    if (key.ok()) plan.munge_key = *key;
    if (options.cluster_sshd) {
      auto ssh = tx.GetSetting(SshHostKeysSetting(cluster_id));
      if (ssh.ok()) ssh_keys = *ssh;
    }
    return OkStatus();
  }));

  auto api_roles = slurm::RolesFromSlurmConfig(GroupInputs(groups));
  if (!api_roles.ok()) {
    plan.mode = SlurmPlan::Mode::kError;
    plan.error = api_roles.status().message();
    return plan;
  }
  if (api_roles->has_value()) {
    plan.roles = **api_roles;
  } else if (!params_text) {
    plan.mode = SlurmPlan::Mode::kWaiting;
    return plan;
  } else {
    json params = json::parse(*params_text, nullptr, false);
    if (params.is_null()) {
      plan.mode = SlurmPlan::Mode::kNone;  // no SlurmConfig, no file: plain nodes
      return plan;
    }
    if (params.is_object() && params.contains("unparsable")) {
      plan.mode = SlurmPlan::Mode::kError;
      plan.error = "provisioning_parameters.json in the lifecycle source is not valid JSON";
      return plan;
    }
    // Groups being deleted still have nodes to drain; once a cluster has been
    // created its file may name groups deleted since (UpdateCluster refuses a new
    // group the file does not name).
    std::vector<GroupRecord> all = groups;
    for (auto& g : all) g.deleting = false;
    auto roles = slurm::RolesFromProvisioningParameters(
        params, GroupInputs(all),
        /*tolerate_gone_groups=*/!api::Is(c.status, api::ClusterStatus::kCreating));
    if (!roles.ok()) {
      plan.mode = SlurmPlan::Mode::kError;
      plan.error = roles.status().message();
      return plan;
    }
    plan.roles = *roles;
  }
  if (plan.munge_key.empty()) {
    std::string fresh = Base64UrlEncode(RandomBytes(kMungeKeyBytes));
    HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) -> Status {
      auto key = tx.GetSetting(MungeKeySetting(cluster_id));
      if (key.ok()) {
        plan.munge_key = *key;  // a concurrent pass made it first
        return OkStatus();
      }
      if (key.status().code() != StatusCode::kNotFound) return key.status();
      HPOD_RETURN_IF_ERROR(tx.GetCluster(cluster_id).status());  // not deleted meanwhile
      plan.munge_key = fresh;
      return tx.PutSetting(MungeKeySetting(cluster_id), fresh);
    }));
  }
  plan.mode = SlurmPlan::Mode::kSlurm;

  slurm::SlurmClusterSpec spec;
  spec.cluster_name = c.name;
  spec.roles = plan.roles;
  spec.gpu_device_dir = options.gpu_device_dir;
  spec.slurmd_timeout_s = options.slurmd_timeout_s;
  spec.spank_plugin = options.spank_plugin;
  spec.accounting = options.accounting;
  std::map<std::string, std::string> type_of;
  for (const auto& g : groups) type_of[g.name] = g.spec.value("InstanceType", "");
  for (const auto& n : nodes) {
    // A node in Failure keeps its place in slurm.conf: it is recovered under the
    // same NodeName, and a changed node set would restart slurmctld (slurm_node.h).
    if ((n.remove && !draining.count(n.instance_id)) || n.private_ip.empty() ||
        n.hostname.empty()) {
      continue;
    }
    slurm::NodeRole role = plan.roles.RoleOf(n.group_name);
    if (!n.remove) plan.role_of[n.instance_id] = role;
    plan.hosts[n.hostname] = n.private_ip;
    if (role == slurm::NodeRole::kController) {
      plan.controller_instance = n.instance_id;
      plan.controller_name = n.hostname;
      plan.controller_addr = n.private_ip;
      spec.controller_name = n.hostname;
      spec.controller_addr = n.private_ip;
    } else if (role == slurm::NodeRole::kCompute) {
      slurm::SlurmNodeSpec s;
      s.name = n.hostname;
      s.addr = n.private_ip;
      s.group = n.group_name;
      if (auto info = api::LookupInstanceType(type_of[n.group_name])) {
        s.cpus = info->vcpus;
        s.memory_mib = info->memory_mib;
        s.gpus = info->gpus;
        s.gpu_type = Lower(std::string(info->gpu_type));
        plan.gpus_of[n.instance_id] = info->gpus;
      }
      spec.compute.push_back(std::move(s));
    }
  }
  if (plan.controller_instance.empty()) return plan;  // not Ready() yet
  plan.files = slurm::RenderSlurmFiles(spec);
  plan.conf_hash = slurm::FilesHash(plan.files);
  if (options.cluster_sshd) {
    HPOD_RETURN_IF_ERROR(AddSshHostKeys(store, cluster_id, ssh_keys, plan));
    plan.conf_hash = HexEncode(Sha256(plan.conf_hash + '\0' + plan.ssh_known_hosts));
  }
  plan.node_names = slurm::NodeNames(spec);
  return plan;
}

json SlurmMessage(const SlurmPlan& plan, const NodeRecord& node, const SlurmOptions& options,
                  const std::string& avoid_start_time, bool hold) {
  auto it = plan.role_of.find(node.instance_id);
  slurm::NodeRole role = it == plan.role_of.end() ? slurm::NodeRole::kCompute : it->second;
  std::string role_name = slurm::RoleName(role);
  api::agentproto::SlurmRole m;
  m.role = role_name;
  m.node_name = node.hostname;
  m.controller_addr = plan.controller_addr;
  m.munge_key = plan.munge_key;
  m.conf_hash = plan.conf_hash;
  // Only the controller reads the node set (a changed set restarts slurmctld):
  // sent to every node it made each pass of a 10,000-node cluster's creation
  // carry 10,000 x 10,000 names.
  if (role == slurm::NodeRole::kController) m.node_names = plan.node_names;
  if (options.send_hosts) m.hosts = plan.hosts;
  if (auto k = plan.ssh_host_keys.find(node.hostname); k != plan.ssh_host_keys.end()) {
    // The agent checks the key's name against the node's own entry.
    if (auto own = plan.hosts.find(node.hostname); own != plan.hosts.end()) {
      m.hosts.insert(*own);
    }
    m.ssh_host_key = k->second;
    m.ssh_known_hosts = plan.ssh_known_hosts;
  }
  m.motd = Motd(role_name, plan.controller_name, !options.spank_plugin.empty());
  if (role == slurm::NodeRole::kCompute) m.avoid_start_time = avoid_start_time;
  m.accounting = options.accounting && role == slurm::NodeRole::kController;
  m.hold = hold;
  if (role != slurm::NodeRole::kCompute) {
    m.files = {{"slurm.conf", plan.files.slurm_conf},
               {"plugstack.conf", plan.files.plugstack_conf}};
    if (!plan.files.gres_conf.empty()) m.files["gres.conf"] = plan.files.gres_conf;
  } else if (auto g = plan.gpus_of.find(node.instance_id);
             options.stand_in_gpus && g != plan.gpus_of.end() && g->second > 0) {
    m.stand_in_gpus = g->second;
    m.gpu_device_dir = options.gpu_device_dir;
  }
  return m.ToJson();
}

json NoSlurmMessage(const NodeRecord& node) {
  api::agentproto::SlurmRole m;
  m.role = "none";  // controller_addr, munge_key: empty (nothing to run)
  m.node_name = node.hostname;
  m.motd = kNoSlurmMotd;
  return m.ToJson();
}

}  // namespace hpod::controlplane
