// LocalProvider's node disks and environment (local_provider.h): what a node finds
// on its own disk at boot — the agent's state directory, the kernel log it reads,
// hpod's SPANK plugin, the fake NVML of GPU nodes — and how it reaches hpodd (the
// declared NodeEnvironment; for network agents, its one route to hpodd's address).

#include <spdlog/spdlog.h>

#include <filesystem>

#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/provider/local/local_provider.h"
#include "hpod/provider/local/node_init.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;
using nlohmann::json;

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
  // and the plugin runs hpod-container from beside itself. A rebooted node keeps
  // its copies unless the build is newer; a new copy is renamed into place, so a
  // full disk never leaves a truncated plugin that plugstack.conf requires.
  for (const auto& [from, name] : {std::pair{&options_.spank_plugin, "spank_hpod.so"},
                                   std::pair{&options_.container_helper, "hpod-container"},
                                   std::pair{&options_.deep_check_program, "hpod-deep-check"}}) {
    if (from->empty()) continue;
    const std::string dest = disk + "/state/" + name;
    std::error_code newer;
    if (!fs::exists(dest) || fs::last_write_time(*from, newer) > fs::last_write_time(dest, newer)) {
      fs::copy_file(*from, dest + ".new", fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(dest + ".new", dest, ec);
      if (ec) fs::remove(dest + ".new", newer);
    }
    if (ec)
      return InternalError("copying " + *from + " onto node " + n.instance_id + ": " +
                           ec.message());
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
