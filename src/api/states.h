#pragma once

// The states of clusters, instance groups and nodes as typed enums, each with one
// string table. The strings are SageMaker's (the botocore model's enum values,
// checked by states_test against the embedded model) and are what the store keeps
// on disk and the API returns; code compares enums, so a misspelt state is a
// compile error instead of a branch that never runs.
//
// Thread contract: everything here is immutable and may be used from any thread.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hpod::api {

// ClusterStatus in the model.
enum class ClusterStatus {
  kCreating,
  kDeleting,
  kFailed,
  kInService,
  kRollingBack,
  kSystemUpdating,
  kUpdating,
};

// InstanceGroupStatus in the model.
enum class InstanceGroupStatus {
  kInService,
  kCreating,
  kUpdating,
  kFailed,
  kDegraded,
  kSystemUpdating,
  kDeleting,
};

// ClusterInstanceStatus in the model: a node's Status.
enum class ClusterInstanceStatus {
  kRunning,
  kFailure,
  kPending,
  kShuttingDown,
  kSystemUpdating,
  kDeepHealthCheckInProgress,
  kNotFound,
};

// ClusterNodeRecovery in the model. Stored and returned; hpod does not act on it
// until node recovery lands (README, "Node recovery").
enum class ClusterNodeRecovery {
  kAutomatic,
  kNone,
};

// A node's lifecycle scripts, as the agent reports them (agent/PROTOCOL.md); not
// in SageMaker's model.
enum class LifecycleState {
  kNotStarted,
  kRunning,
  kSucceeded,
  kFailed,
};

// A host of a pool (issue 26): one machine with one agent and one certificate.
// Joining: it joined and its agent has not connected yet. Spare: connected and
// serving no node. Assigned: serving an instance of a cluster. Rebooting and
// Draining: taken out of work for a reboot or before its release. Quarantined:
// failed and held back until a person releases it (or three failures in 30 days
// retire it). Retired: out of service until a person says otherwise; a revoked
// host is Retired and cannot come back without joining again.
enum class HostState {
  kJoining,
  kSpare,
  kAssigned,
  kRebooting,
  kDraining,
  kQuarantined,
  kRetired,
};

// Where hpod is with a node, derived from its row (launched, remove, status); not
// stored. The reconcilers switch on it.
enum class NodePhase {
  kToLaunch,      // a row exists, the provider has not acknowledged Launch
  kProvisioning,  // launched; booting or running its lifecycle scripts (Pending)
  kRunning,       // Running: in service
  kFailed,        // Failure: stays until removed or recovered
  kRemoving,      // marked for removal: drain, terminate, forget
};

// One table per enum: the model shape it mirrors (empty when hpod's own) and the
// string of each value, in enumerator order.
template <typename E>
struct StateTable;

template <>
struct StateTable<ClusterStatus> {
  static constexpr std::string_view kShape = "ClusterStatus";
  static constexpr std::array<std::string_view, 7> kNames = {
      "Creating", "Deleting", "Failed", "InService", "RollingBack", "SystemUpdating", "Updating"};
};
template <>
struct StateTable<InstanceGroupStatus> {
  static constexpr std::string_view kShape = "InstanceGroupStatus";
  static constexpr std::array<std::string_view, 7> kNames = {
      "InService", "Creating", "Updating", "Failed", "Degraded", "SystemUpdating", "Deleting"};
};
template <>
struct StateTable<ClusterInstanceStatus> {
  static constexpr std::string_view kShape = "ClusterInstanceStatus";
  static constexpr std::array<std::string_view, 7> kNames = {
      "Running",      "Failure",        "Pending",
      "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress",
      "NotFound"};
};
template <>
struct StateTable<ClusterNodeRecovery> {
  static constexpr std::string_view kShape = "ClusterNodeRecovery";
  static constexpr std::array<std::string_view, 2> kNames = {"Automatic", "None"};
};
template <>
struct StateTable<LifecycleState> {
  static constexpr std::string_view kShape = "";
  static constexpr std::array<std::string_view, 4> kNames = {"NotStarted", "Running", "Succeeded",
                                                             "Failed"};
};
template <>
struct StateTable<HostState> {
  static constexpr std::string_view kShape = "HpodHostState";
  static constexpr std::array<std::string_view, 7> kNames = {
      "Joining", "Spare", "Assigned", "Rebooting", "Draining", "Quarantined", "Retired"};
};
template <>
struct StateTable<NodePhase> {
  static constexpr std::string_view kShape = "";
  static constexpr std::array<std::string_view, 5> kNames = {"ToLaunch", "Provisioning", "Running",
                                                             "Failed", "Removing"};
};

// The string of a state ("InService").
template <typename E>
constexpr std::string_view Name(E e) {
  return StateTable<E>::kNames[static_cast<size_t>(e)];
}
template <typename E>
std::string NameString(E e) {
  return std::string(Name(e));
}

// The state a string names, or nullopt for anything else (case-sensitive, as the
// API is).
template <typename E>
constexpr std::optional<E> Parse(std::string_view s) {
  for (size_t i = 0; i < StateTable<E>::kNames.size(); ++i) {
    if (StateTable<E>::kNames[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

// Whether the stored string `s` is the state `e`: for rows the store hands back
// as strings. An unknown string is no state.
template <typename E>
constexpr bool Is(std::string_view s, E e) {
  return s == Name(e);
}

}  // namespace hpod::api
