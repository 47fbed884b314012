#include "hpod/provider/fake/fake_provider.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hpod/base/file_util.h"

namespace hpod::provider {

namespace fs = std::filesystem;

FakeProvider::FakeProvider(const Clock& clock, FakeProviderOptions options)
    : clock_(clock), options_(std::move(options)) {
  {
    MutexLock lock(mu_);
    images_ = options_.images;
  }
  if (!options_.agent_dir.empty()) fs::create_directories(options_.agent_dir);
  if (!options_.state_dir.empty()) {
    fs::create_directories(options_.state_dir);
    MutexLock lock(mu_);  // nothing else runs yet; Load requires it all the same
    Load();
  }
}

Status FakeProvider::TransientFailure() {
  if (fail_next_ > 0) {
    --fail_next_;
    return UnavailableError("fake provider: injected transient failure");
  }
  return OkStatus();
}

Status FakeProvider::Launch(const LaunchSpec& spec) {
  MutexLock lock(mu_);
  HPOD_RETURN_IF_ERROR(TransientFailure());
  actions_.push_back({"Launch", spec.instance_id});
  if (nodes_.count(spec.instance_id)) return OkStatus();  // idempotent
  if (static_cast<int>(nodes_.size()) >= options_.capacity) {
    return ResourceExhaustedError("fake provider: no capacity");
  }
  Node n;
  n.instance_id = spec.instance_id;
  n.cluster_id = spec.cluster_id;
  n.group = spec.group_name;
  n.instance_type = spec.instance_type;
  n.launched_at = clock_.NowEpochSeconds();
  // Addresses from 198.18.0.0/15 (reserved for benchmarks): never routed, and the
  // fake provider sends nothing to them anyway.
  uint32_t k = ++next_ip_ + static_cast<uint32_t>(nodes_.size());
  n.ip = "198." + std::to_string(18 + ((k >> 16) & 1)) + "." + std::to_string((k >> 8) & 255) +
         "." + std::to_string(k & 255);
  if (!spec.private_ip.empty()) n.ip = spec.private_ip;  // a replacement keeps its address
  n.image = spec.image_id.empty() && !images_.empty() ? images_.back() : spec.image_id;
  if (!n.image.empty() && std::find(images_.begin(), images_.end(), n.image) == images_.end()) {
    return InvalidArgumentError("fake provider: no image " + n.image);
  }
  n.broken = options_.fail_groups.count(spec.group_name) ||
             options_.fail_instance_types.count(spec.instance_type) ||
             options_.fail_images.count(n.image);
  if (n.broken) n.message = options_.failure_message;
  n.bootstrap_token = spec.bootstrap_token;
  nodes_[n.instance_id] = n;
  Save(n);
  if (!n.broken) WriteAgentConfig(n, spec.bootstrap_token);
  return OkStatus();
}

NodeEnvironment FakeProvider::Environment() const {
  NodeEnvironment e = options_.environment;
  const std::string kUnix = "unix://";
  if (!options_.agent_dir.empty() && options_.agent_endpoint.rfind(kUnix, 0) == 0) {
    // The simulated nodes see hpodd's files, its socket included, where hpodd does.
    e.agent_socket = options_.agent_endpoint.substr(kUnix.size());
  } else if (!options_.agent_dir.empty()) {
    // Network agents: each dials over mutual TLS after joining (Validate checks
    // the scheme).
    e.agent_url = options_.agent_endpoint;
  }
  return e;
}

void FakeProvider::WriteAgentConfig(const Node& n, const std::string& bootstrap_token) {
  if (options_.agent_dir.empty()) return;
  std::string hostname = "ip-" + n.ip;
  std::replace(hostname.begin(), hostname.end(), '.', '-');
  // A network agent joins with its launch's token, as the local provider's do.
  const bool network = options_.agent_endpoint.rfind("https://", 0) == 0;
  nlohmann::json j = {{"instance_id", n.instance_id},
                      {"cluster_id", n.cluster_id},
                      {"endpoint", options_.agent_endpoint},
                      {network ? "join_token" : "bootstrap_token", bootstrap_token},
                      {"hostname", hostname},
                      {"private_ip", n.ip},
                      {"group", n.group},
                      {"instance_type", n.instance_type},
                      {"boot", n.boot}};
  const fs::path path = fs::path(options_.agent_dir) / (n.instance_id + ".json");
  Status s = WriteFileAtomic(path.string(), j.dump(), 0600);
  if (!s.ok()) spdlog::warn("fake provider: agent config of {}: {}", n.instance_id, s.ToString());
}

void FakeProvider::RemoveAgentConfig(const std::string& instance_id) {
  if (options_.agent_dir.empty()) return;
  std::error_code ec;
  fs::remove(fs::path(options_.agent_dir) / (instance_id + ".json"), ec);
}

StatusOr<std::string> FakeProvider::CurrentImage() const {
  MutexLock lock(mu_);
  return images_.empty() ? std::string() : images_.back();
}

bool FakeProvider::HasImage(const std::string& image_id) const {
  MutexLock lock(mu_);
  return std::find(images_.begin(), images_.end(), image_id) != images_.end();
}

Status FakeProvider::SetNodeImage(const std::string& instance_id, const std::string& image_id) {
  MutexLock lock(mu_);
  if (std::find(images_.begin(), images_.end(), image_id) == images_.end()) {
    return InvalidArgumentError("fake provider: no image " + image_id);
  }
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("fake provider: no node " + instance_id);
  it->second.image = image_id;
  return OkStatus();
}

void FakeProvider::ShipImage(const std::string& image) {
  MutexLock lock(mu_);
  images_.push_back(image);
}

std::string FakeProvider::ImageOf(const std::string& instance_id) const {
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  return it == nodes_.end() ? "" : it->second.image;
}

Status FakeProvider::Terminate(const std::string& instance_id) {
  MutexLock lock(mu_);
  HPOD_RETURN_IF_ERROR(TransientFailure());
  actions_.push_back({"Terminate", instance_id});
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return OkStatus();
  if (it->second.terminated_at < 0) {
    it->second.terminated_at = clock_.NowEpochSeconds();
    Save(it->second);
    RemoveAgentConfig(instance_id);  // the machine, and its agent, go down now
  }
  return OkStatus();
}

NodeObservation FakeProvider::Observe(const Node& n) const {
  NodeObservation o;
  o.private_ip = n.ip;
  double now = clock_.NowEpochSeconds();
  if (n.terminated_at >= 0) {
    o.state = (now - n.terminated_at) * 1000 >= options_.terminating_for.count()
                  ? NodeState::kTerminated
                  : NodeState::kTerminating;
    return o;
  }
  if ((now - n.launched_at) * 1000 < options_.pending_for.count()) {
    o.state = NodeState::kPending;
    return o;
  }
  o.state = n.broken ? NodeState::kFailed : NodeState::kRunning;
  o.message = n.message;
  return o;
}

StatusOr<NodeObservation> FakeProvider::Describe(const std::string& instance_id) {
  MutexLock lock(mu_);
  HPOD_RETURN_IF_ERROR(TransientFailure());
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("fake provider: no node " + instance_id);
  NodeObservation o = Observe(it->second);
  if (o.state == NodeState::kTerminated) {
    // Forget terminated nodes, as clouds do after a while.
    Erase(instance_id);
    nodes_.erase(it);
  }
  return o;
}

StatusOr<std::vector<std::string>> FakeProvider::List(const std::string& cluster_id) {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, n] : nodes_) {
    if (n.cluster_id == cluster_id) out.push_back(id);
  }
  return out;
}

Status FakeProvider::Reboot(const std::string& instance_id, const std::string& request_id) {
  MutexLock lock(mu_);
  HPOD_RETURN_IF_ERROR(TransientFailure());
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("fake provider: no node " + instance_id);
  if (!request_id.empty() && it->second.last_reboot == request_id) return OkStatus();
  actions_.push_back({"Reboot", instance_id});
  it->second.last_reboot = request_id;
  ++it->second.reboots;
  it->second.broken = false;
  it->second.message.clear();
  it->second.launched_at = clock_.NowEpochSeconds();
  ++it->second.boot;
  Save(it->second);
  WriteAgentConfig(it->second, it->second.bootstrap_token);
  return OkStatus();
}

std::vector<FakeProvider::Action> FakeProvider::actions() const {
  MutexLock lock(mu_);
  return actions_;
}

size_t FakeProvider::node_count() const {
  MutexLock lock(mu_);
  return nodes_.size();
}

void FakeProvider::FailNextCalls(int n) {
  MutexLock lock(mu_);
  fail_next_ = n;
}

void FakeProvider::BreakNode(const std::string& instance_id, const std::string& message) {
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return;
  it->second.broken = true;
  it->second.message = message;
  Save(it->second);
  RemoveAgentConfig(instance_id);
}

void FakeProvider::Save(const Node& n) {
  if (options_.state_dir.empty()) return;
  nlohmann::json j = {{"instance_id", n.instance_id},
                      {"cluster_id", n.cluster_id},
                      {"group", n.group},
                      {"instance_type", n.instance_type},
                      {"ip", n.ip},
                      {"launched_at", n.launched_at},
                      {"terminated_at", n.terminated_at},
                      {"broken", n.broken},
                      {"last_reboot", n.last_reboot},
                      {"reboots", n.reboots},
                      {"message", n.message}};
  const fs::path path = fs::path(options_.state_dir) / (n.instance_id + ".json");
  // Best effort, like the in-memory state it mirrors: a failed save only costs
  // the node across a restart of the test daemon.
  Status s = WriteFileAtomic(path.string(), j.dump(), 0644);
  if (!s.ok()) spdlog::warn("fake provider: saving {}: {}", n.instance_id, s.ToString());
}

void FakeProvider::Erase(const std::string& instance_id) {
  if (options_.state_dir.empty()) return;
  std::error_code ec;
  fs::remove(fs::path(options_.state_dir) / (instance_id + ".json"), ec);
}

void FakeProvider::Load() {
  for (const auto& entry : fs::directory_iterator(options_.state_dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream f(entry.path());
    auto j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded()) continue;
    Node n;
    n.instance_id = j.value("instance_id", "");
    n.cluster_id = j.value("cluster_id", "");
    n.group = j.value("group", "");
    n.instance_type = j.value("instance_type", "");
    n.ip = j.value("ip", "");
    n.launched_at = j.value("launched_at", 0.0);
    n.terminated_at = j.value("terminated_at", -1.0);
    n.broken = j.value("broken", false);
    n.last_reboot = j.value("last_reboot", "");
    n.reboots = j.value("reboots", 0);
    n.message = j.value("message", "");
    nodes_[n.instance_id] = n;
  }
  next_ip_ = static_cast<uint32_t>(nodes_.size()) * 7;
}

}  // namespace hpod::provider
