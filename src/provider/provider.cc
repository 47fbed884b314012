#include "hpod/provider/provider.h"

#include <utility>

namespace hpod::provider {

std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kPending:
      return "Pending";
    case NodeState::kRunning:
      return "Running";
    case NodeState::kFailed:
      return "Failed";
    case NodeState::kTerminating:
      return "Terminating";
    case NodeState::kTerminated:
      return "Terminated";
  }
  return "?";
}

namespace {

// The one string table of fault kinds (the CLI's --kind and the API's Kind enum).
constexpr std::pair<FaultSpec::Kind, std::string_view> kFaultKinds[] = {
    {FaultSpec::Kind::kKillNode, "kill-node"},
    {FaultSpec::Kind::kKillAgent, "kill-agent"},
    {FaultSpec::Kind::kKillSlurmd, "kill-slurmd"},
    {FaultSpec::Kind::kPartition, "partition"},
    {FaultSpec::Kind::kHang, "hang"},
    {FaultSpec::Kind::kDiskFull, "disk-full"},
    {FaultSpec::Kind::kGpuXid, "gpu-xid"},
    {FaultSpec::Kind::kFlagFile, "flag-file"},
    {FaultSpec::Kind::kCpuThrottle, "cpu-throttle"},
    {FaultSpec::Kind::kSlowLink, "slow-link"},
};

}  // namespace

std::string_view FaultKindName(FaultSpec::Kind k) {
  for (const auto& [kind, name] : kFaultKinds) {
    if (kind == k) return name;
  }
  return "?";
}

std::optional<FaultSpec::Kind> ParseFaultKind(std::string_view name) {
  for (const auto& [kind, n] : kFaultKinds) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

StatusOr<bool> TerminateAndCheckGone(Provider& provider, const std::string& instance_id) {
  HPOD_RETURN_IF_ERROR(provider.Terminate(instance_id));
  auto d = provider.Describe(instance_id);
  if (!d.ok()) {
    if (d.status().code() == StatusCode::kNotFound) return true;
    return d.status();
  }
  return d->state == NodeState::kTerminated;
}

}  // namespace hpod::provider
