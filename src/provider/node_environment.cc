#include "hpod/provider/node_environment.h"

#include <filesystem>

namespace hpod::provider {
namespace {

bool Absolute(const std::string& path) { return !path.empty() && path[0] == '/'; }

// Whether `dir` is `path` or one of its parents, component by component
// (/run is above /run/hpod, not above /running).
bool AtOrAbove(const std::string& dir, std::string_view path) {
  if (dir == "/") return true;
  if (path.substr(0, dir.size()) != dir) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

}  // namespace

Status NodeEnvironment::Validate() const {
  if (!agent_socket.empty() && !agent_url.empty()) {
    return InvalidArgumentError(
        "node environment: agent_socket and agent_url are both set; nodes dial hpodd one way");
  }
  if (!agent_socket.empty() && !Absolute(agent_socket)) {
    return InvalidArgumentError("node environment: agent_socket " + agent_socket +
                                " must be an absolute path inside the node");
  }
  if (!agent_url.empty() && agent_url.rfind("https://", 0) != 0) {
    return InvalidArgumentError("node environment: agent_url " + agent_url +
                                " must be an https:// URL (agents dial over mutual TLS)");
  }
  if (!agent_socket.empty() && !sees_hpodd_files) {
    return InvalidArgumentError(
        "node environment: agent_socket needs nodes that see hpodd's files (a Unix socket is "
        "a file); nodes on other machines dial agent_url");
  }
  if (ships_file_sources && (sees_hpodd_files || agent_url.empty())) {
    return InvalidArgumentError(
        "node environment: ships_file_sources is for network agents (agent_url) of nodes that "
        "see none of hpodd's files");
  }
  if (!sees_hpodd_files && !private_dirs.empty()) {
    return InvalidArgumentError(
        "node environment: private_dirs are declared for nodes that see none of hpodd's files");
  }
  for (const std::string& d : private_dirs) {
    if (!Absolute(d)) {
      return InvalidArgumentError("node environment: private dir " + d + " must be absolute");
    }
  }
  if (!s3_relay_socket.empty() && (agent_socket.empty() || !Absolute(s3_relay_socket))) {
    return InvalidArgumentError(
        "node environment: s3_relay_socket " + s3_relay_socket +
        " needs agent_socket (the relay sits in hpodd's socket directory) and an absolute path");
  }
  if (!s3_relay_socket.empty() && std::filesystem::path(s3_relay_socket).parent_path() !=
                                      std::filesystem::path(agent_socket).parent_path()) {
    return InvalidArgumentError("node environment: s3_relay_socket " + s3_relay_socket +
                                " must be in the directory of agent_socket " + agent_socket +
                                " (hpodd puts the relay beside its agent socket)");
  }
  if (!spank_plugin.empty() && !Absolute(spank_plugin)) {
    return InvalidArgumentError("node environment: spank_plugin " + spank_plugin +
                                " must be an absolute path inside the node");
  }
  if (gpu_stand_ins && !Absolute(gpu_device_dir)) {
    return InvalidArgumentError("node environment: gpu_device_dir " + gpu_device_dir +
                                " must be an absolute path inside the node");
  }
  return OkStatus();
}

std::string NodeEnvironment::PrivateDirOf(std::string_view host_path) const {
  if (!sees_hpodd_files) return "/";
  std::string path = std::filesystem::path(host_path).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::string hidden;
  for (const std::string& d : private_dirs) {
    // The outermost private dir wins: /run hides /run/hpod/x, not /run/hpod.
    if (AtOrAbove(d, path) && (hidden.empty() || d.size() < hidden.size())) hidden = d;
  }
  return hidden;
}

}  // namespace hpod::provider
