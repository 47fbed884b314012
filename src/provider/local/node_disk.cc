// LocalProvider's node disks and environment (local_provider.h): what a node finds
// on its own disk at boot — the agent's state directory, the kernel log it reads,
// hpod's SPANK plugin, the fake NVML of GPU nodes — and how it reaches hpodd (the
// declared NodeEnvironment; for network agents, its one route to hpodd's address) —
// and the records on the host's disk that Load reads back after a restart.

#include <spdlog/spdlog.h>

#include <filesystem>

#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/provider/local/local_provider.h"
#include "hpod/provider/local/node_init.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;
using nlohmann::json;

// The provider's, its clusters' and its nodes' records (Load reads them back).
void LocalProvider::SaveProvider() {
  Status s = WriteFileAtomic(options_.state_dir + "/provider.json",
                             json{{"next_node_index", next_index_}}.dump(), 0644);
  if (!s.ok()) spdlog::warn("local provider: {}", s.ToString());
}

Status LocalProvider::SaveCluster(const Cluster& c) {
  std::error_code ec;
  fs::create_directories(ClusterDir(c.id), ec);
  if (ec) return InternalError("creating " + ClusterDir(c.id) + ": " + ec.message());
  return WriteFileAtomic(ClusterDir(c.id) + "/cluster.json",
                         json{{"cluster_id", c.id}, {"subnet", c.subnet}}.dump(), 0644);
}

Status LocalProvider::SaveNode(const Node& n) {
  json j = {{"instance_id", n.instance_id},
            {"cluster_id", n.cluster_id},
            {"cluster_name", n.cluster_name},
            {"group_name", n.group_name},
            {"instance_name", n.instance_name},
            {"instance_type", n.instance_type},
            {"ip", n.ip},
            {"hostname", n.hostname},
            {"index", n.index},
            {"netns", NetnsName(n.index)},
            {"veth_host", VethHost(n.index)},
            {"pid", n.process.pid},
            {"pid_start_time", n.process.start_time},
            {"disk_mb", n.disk_mb},
            {"gpus", n.gpus},
            {"last_reboot_request", n.last_reboot_request},
            {"image_id", n.image_id},
            {"partition_until", n.partition_until}};
  return WriteFileAtomic(NodeDir(n.instance_id) + "/node.json", j.dump(2), 0644);
}

std::string LocalProvider::AgentServiceAddress(const std::string& node_block) {
  auto cidr = ParseCidr(node_block);
  if (!cidr || cidr->second >= 24) return "";
  const uint32_t size = uint32_t{1} << (32 - cidr->second);
  return FormatIpv4(cidr->first + size - 2);
}

bool LocalProvider::network_agents() const {
  return options_.agent_transport == LocalProviderOptions::AgentTransport::kTls;
}

NodeNetwork LocalProvider::NetworkOf(const Node& n, int subnet) const {
  NodeNetwork net{NetnsName(n.index), VethHost(n.index), VethNode(n.index), BridgeName(subnet),
                  n.ip + "/24"};
  if (network_agents()) {
    net.service_address = AgentServiceAddress(options_.node_block);
    net.via = SubnetBase(subnet) + "1";
  }
  return net;
}

NodeEnvironment LocalProvider::Environment() const {
  NodeEnvironment e;
  const std::string kUnix = "unix://";
  if (options_.agent_endpoint.rfind(kUnix, 0) == 0) {
    // node-init binds the socket's directory on /run/hpod (WriteNodeFiles).
    const std::string name =
        fs::path(options_.agent_endpoint.substr(kUnix.size())).filename().string();
    e.agent_socket = std::string(kAgentSocketDirInNode) + "/" + name;
    e.s3_relay_socket = std::string(kAgentSocketDirInNode) + "/s3.sock";
  } else if (options_.agent_endpoint.rfind("https://", 0) == 0) {
    e.agent_url = options_.agent_endpoint;  // WriteNodeFiles passes it on unchanged
  }
  e.sees_hpodd_files = true;
  e.private_dirs = NodePrivateDirs();
  if (!options_.spank_plugin.empty()) {
    e.spank_plugin = std::string(kAgentStateDir) + "/spank_hpod.so";
  }
  e.gpu_stand_ins = true;
  e.cluster_sshd = true;
  e.gpu_device_dir = kGpuStandInDirInNode;
  e.replacement_keeps_address = true;
  return e;
}

Status LocalProvider::PrepareDisk(const Node& n) {
  const std::string disk = NodeDir(n.instance_id) + "/disk";
  std::error_code ec;
  fs::create_directories(disk, ec);
  if (ec) return InternalError("creating " + disk + ": " + ec.message());
  if (n.disk_mb > 0) HPOD_RETURN_IF_ERROR(host_->MountDisk(disk, n.disk_mb));
  fs::create_directories(disk + "/state", ec);
  if (ec) return InternalError("creating " + disk + "/state: " + ec.message());
  if (network_agents() && !fs::exists(disk + "/state/machine-id")) {
    // A network node is a machine of its own, and joins with its own machine id:
    // on its disk, so a reboot keeps it and a replacement (a new disk) differs.
    HPOD_RETURN_IF_ERROR(
        WriteFileAtomic(disk + "/state/machine-id", HexEncode(RandomBytes(16)) + "\n", 0444));
  }
  // Truncating in place needs no free block, and node-init copies agent.json
  // afresh at every start into the space its old copy frees: a node whose disk was
  // filled still boots (and its disk stays full, as a real one would).
  HPOD_RETURN_IF_ERROR(WriteFileInPlace(KernelLogPath(n.instance_id), ""));
  fs::remove(disk + "/state/agent.json", ec);
  // Before slurmd starts (the agent starts it after this node boots): srun and
  // slurmstepd load the plugin from plugstack.conf's path, Environment().spank_plugin,
  // and the plugin runs hpod-container from beside itself, all from the node's
  // image (node_images.cc). A rebooted node keeps its copies unless the image's are newer; a new
  // copy is renamed into place, so a full disk never leaves a truncated plugin that plugstack.conf
  // requires.
  for (const char* name : {"spank_hpod.so", "hpod-container", "hpod-deep-check"}) {
    const std::string from = NodeProgram(n, name);  // its image's copy
    if (from.empty()) continue;
    const std::string dest = disk + "/state/" + name;
    std::error_code newer;
    if (!fs::exists(dest) || fs::last_write_time(from, newer) > fs::last_write_time(dest, newer)) {
      fs::copy_file(from, dest + ".new", fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(dest + ".new", dest, ec);
      if (ec) fs::remove(dest + ".new", newer);
    }
    if (ec)
      return InternalError("copying " + from + " onto node " + n.instance_id + ": " + ec.message());
  }
  if (n.gpus > 0 && !options_.fake_nvml_library.empty()) {
    Status s = WriteFileInPlace(FakeNvmlScriptPath(n.instance_id),
                                json{{"devices", n.gpus}}.dump() + "\n");
    if (!s.ok()) spdlog::warn("local provider: node {}: {}", n.instance_id, s.ToString());
    fs::copy_file(options_.fake_nvml_library, disk + "/state/libhpod_fake_nvml.so",
                  fs::copy_options::overwrite_existing, ec);
    if (ec) {
      spdlog::warn("local provider: node {}: copying {}: {}", n.instance_id,
                   options_.fake_nvml_library, ec.message());
    }
  }
  return OkStatus();
}

}  // namespace hpod::provider::local
