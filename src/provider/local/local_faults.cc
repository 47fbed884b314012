// LocalProvider::InjectFault and the partition timer (local_provider.h). Each
// fault acts on the node's real parts through NodeHost, so the control plane's
// recovery is exercised exactly as a real failure would exercise it. Also the
// agent's environment that points its health checks at the node's own fault
// seams (kernel log, fake NVML).

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "hpod/base/file_util.h"
#include "hpod/provider/local/fake_clock.h"
#include "hpod/provider/local/local_provider.h"
#include "hpod/provider/local/node_init.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr auto kKillTimeout = 10s;
// How long a kill waits to see its processes gone (they are reaped by the node's
// PID 1); past it the fault still counts as injected.
constexpr auto kGoneTimeout = 5s;
// The longest the timer sleeps while a partition is pending, so a wall-clock
// jump or a fake clock's advance is noticed soon.
constexpr auto kTimerTick = 1s;

double EpochSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

Status AppendToFile(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("opening " + path + ": " + ::strerror(errno));
  ssize_t n = ::write(fd, data.data(), data.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(data.size())) {
    return InternalError("appending to " + path + ": " + (n < 0 ? ::strerror(err) : "short write"));
  }
  return OkStatus();
}

}  // namespace

Status LocalProvider::InjectFault(const std::string& instance_id, const FaultSpec& fault) {
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("local provider has no node " + instance_id);
  Node& n = it->second;
  if (n.vanished || !host_->IsAlive(n.process)) {
    return FailedPreconditionError("node " + instance_id +
                                   " is not running (its first process, pid " +
                                   std::to_string(n.process.pid) + ", is gone)");
  }
  Status s;
  switch (fault.kind) {
    case FaultSpec::Kind::kKillNode:
      // Only PID 1: the kernel takes every process of the node with it. Its netns
      // and files stay, as a crashed machine's disk and NIC do.
      s = host_->Kill(n.process, kKillTimeout);
      break;
    case FaultSpec::Kind::kKillAgent: {
      const std::string& program =
          options_.node_program.empty() ? options_.agent_binary : options_.node_program[0];
      s = KillNamed(n, fs::path(program).filename().string());
      break;
    }
    case FaultSpec::Kind::kKillSlurmd:
      s = KillNamed(n, "slurmd");
      break;
    case FaultSpec::Kind::kPartition:
      s = Partition(n, fault.seconds);
      break;
    case FaultSpec::Kind::kHang:
      s = Hang(n);
      break;
    case FaultSpec::Kind::kDiskFull:
      if (n.disk_mb == 0) {
        return FailedPreconditionError(
            "node " + instance_id +
            " has no sized disk to fill; start hpodd with a sized node disk (--node-disk-mb N) "
            "and launch a new node");
      }
      s = host_->FillDisk(NodeDir(instance_id) + "/disk");
      break;
    case FaultSpec::Kind::kGpuXid:
      s = GpuXid(n, fault.xid);
      break;
    case FaultSpec::Kind::kFlagFile:
      // /run is the node's private tmpfs: only its mount namespace has the file.
      s = host_->RunInNodeMounts(n.process,
                                 {"sh", "-c", "echo 1 >> /var/run/sagemaker_healthcheck_status"});
      break;
    case FaultSpec::Kind::kCpuThrottle:
      s = host_->ThrottleCpu(n.process, CpuThrottleName(instance_id), kThrottlePercent);
      break;
    case FaultSpec::Kind::kSlowLink:
      // Inside the node's namespace, on its side of the link: what it sends is slow.
      s = host_->ShapeEgress(NetnsName(n.index), "eth0", kSlowLinkKbit);
      break;
  }
  if (s.ok()) {
    spdlog::warn("local provider: injected fault {} into {} ({})", FaultKindName(fault.kind),
                 instance_id, n.hostname);
  }
  return s;
}

Status LocalProvider::KillNamed(const Node& n, const std::string& name) {
  HPOD_ASSIGN_OR_RETURN(std::vector<NodeProcessInfo> procs, host_->NodeProcesses(n.process));
  // comm holds at most 15 characters of the name.
  const std::string comm = name.substr(0, 15);
  std::vector<ProcessId> victims;
  for (const NodeProcessInfo& p : procs) {
    if (p.id == n.process) continue;  // PID 1 is hpod-node-init, never the target
    if (p.exe == name || p.name == comm) victims.push_back(p.id);
  }
  if (victims.empty()) {
    return FailedPreconditionError("node " + n.instance_id + " runs no " + name + " process");
  }
  for (const ProcessId& v : victims) HPOD_RETURN_IF_ERROR(host_->Signal(v, SIGKILL));
  // Wait (bounded) until PID 1 has reaped them, so the caller observes the fault.
  auto deadline = std::chrono::steady_clock::now() + kGoneTimeout;
  for (const ProcessId& v : victims) {
    while (host_->IsAlive(v) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
  }
  return OkStatus();
}

Status LocalProvider::Hang(const Node& n) {
  // PID 1 first (NodeProcesses lists it first), so it cannot react to its
  // children stopping; then again until no new process has appeared (one may have
  // forked between the listing and its parent's SIGSTOP).
  std::set<pid_t> stopped;
  for (int round = 0; round < 10; ++round) {
    HPOD_ASSIGN_OR_RETURN(std::vector<NodeProcessInfo> procs, host_->NodeProcesses(n.process));
    bool any = false;
    for (const NodeProcessInfo& p : procs) {
      if (!stopped.insert(p.id.pid).second) continue;
      HPOD_RETURN_IF_ERROR(host_->Signal(p.id, SIGSTOP));
      any = true;
    }
    if (!any) break;
  }
  return OkStatus();
}

Status LocalProvider::Partition(Node& n, int seconds) {
  if (seconds <= 0) return InvalidArgumentError("a partition needs a duration of 1 s or more");
  // The end is persisted before the link goes down: a crash in between leaves a
  // link that the next Create finds up and a deadline it clears, never a link
  // down for good.
  n.partition_until = EpochSeconds(options_.clock->Now()) + seconds;
  HPOD_RETURN_IF_ERROR(SaveNode(n));
  HPOD_RETURN_IF_ERROR(host_->SetLinkUp(VethHost(n.index), false));
  timer_cv_.notify_all();
  return OkStatus();
}

Status LocalProvider::GpuXid(const Node& n, int xid) {
  // As the NVIDIA driver logs it; the agent's health check greps the node's
  // kernel log for it.
  HPOD_RETURN_IF_ERROR(AppendToFile(KernelLogPath(n.instance_id),
                                    "NVRM: Xid (PCI:0000:00:1e): " + std::to_string(xid) +
                                        ", pid=0, name=hpod-inject-fault, Ch 00000000\n"));
  const std::string script = FakeNvmlScriptPath(n.instance_id);
  if (!fs::exists(script)) return OkStatus();  // no fake NVML on this node
  StatusOr<std::string> text = hpod::ReadFile(script);
  json j = text.ok() ? json::parse(*text, nullptr, false) : json();
  if (!j.is_object()) j = {{"devices", n.gpus}};  // unreadable: start from a healthy one
  if (!j.contains("xids") || !j["xids"].is_array()) j["xids"] = json::array();
  j["xids"].push_back(xid);
  // Atomic: the fake library never reads half a script.
  return hpod::WriteFileAtomic(script, j.dump() + "\n", 0644);
}

std::optional<std::chrono::system_clock::time_point> LocalProvider::RestoreExpiredPartitions() {
  MutexLock lock(mu_);
  const double now = EpochSeconds(options_.clock->Now());
  std::optional<double> next;
  for (auto& [id, n] : nodes_) {
    if (n.partition_until <= 0) continue;
    if (n.partition_until > now) {
      next = std::min(next.value_or(n.partition_until), n.partition_until);
      continue;
    }
    Status s = host_->SetLinkUp(VethHost(n.index), true);
    // A link that is gone (its node removed by hand, a host reboot) cannot come
    // up; the deadline is cleared either way, or it would be retried forever.
    if (!s.ok()) spdlog::warn("local provider: ending the partition of {}: {}", id, s.ToString());
    n.partition_until = 0;
    Status saved = SaveNode(n);
    if (!saved.ok()) spdlog::warn("local provider: {}", saved.ToString());
    if (s.ok()) spdlog::info("local provider: partition of {} ({}) ended", id, n.hostname);
  }
  if (!next) return std::nullopt;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(*next)));
}

void LocalProvider::StartTimer() {
  timer_ = std::thread([this] { TimerLoop(); });
}

void LocalProvider::StopTimer() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void LocalProvider::TimerLoop() {
  while (true) {
    auto next = RestoreExpiredPartitions();
    MutexLock lock(mu_);
    if (stopping_) return;
    if (!next) {
      // Nothing pending: sleep until Partition() or StopTimer() wakes us. Checked
      // under the lock that Partition() notifies under, so no wake-up is lost.
      bool pending = std::any_of(nodes_.begin(), nodes_.end(),
                                 [](const auto& kv) { return kv.second.partition_until > 0; });
      if (!pending) lock.Wait(timer_cv_);
      continue;
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*next - options_.clock->Now());
    lock.WaitFor(timer_cv_, std::clamp<std::chrono::milliseconds>(left, 10ms, kTimerTick));
  }
}

std::map<std::string, std::string> LocalProvider::AgentEnv(const Node& n) const {
  std::map<std::string, std::string> env = {{"HPOD_KERNEL_LOG", kKernelLogInNode}};
  if (n.gpus > 0 && !options_.fake_nvml_library.empty()) {
    env["HPOD_NVML_LIBRARY"] = kFakeNvmlLibraryInNode;
    env["HPOD_FAKE_NVML_SCRIPT"] = kFakeNvmlScriptInNode;
  } else if (n.gpus > 0) {
    // A node's GPUs are stand-ins; on a host with GPUs the real NVML would count
    // the host's and reboot the node forever over a mismatch.
    env["HPOD_NVML_LIBRARY"] = "none";
  }
  if (auto skew = options_.fake_clock_skew_s.find(n.group_name);
      skew != options_.fake_clock_skew_s.end()) {
    env.merge(FakeClockEnv(options_.faketime_library, skew->second,
                           FakeClockShared(options_.link_prefix)));
  }
  return env;
}

}  // namespace hpod::provider::local
