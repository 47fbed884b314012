#pragma once

// `heartbeat.host`: the host figures of a node that node_exporter would give for
// it (CPU time by mode, memory, the node disk and /fsx), sampled by the agent
// (src/agent/host_stats.h) and exposed by hpodd's GET /metrics, so that one
// Prometheus scrape target serves a whole cluster. Same conventions as
// agent_protocol.h (FromJson/ToJson; unknown fields ignored; null reads as absent).
// An agent older than the field sends no `host`: hpodd then exports no host
// figures for the node. A `host` hpodd cannot read costs only the figures, never
// the heartbeat (Heartbeat::host_error): a node whose heartbeats were refused
// would be taken for dead and replaced.
//
// Thread contract: plain values and pure functions.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::api::agentproto {

// CPU time since boot, summed over all CPUs, in seconds, by /proc/stat's modes
// (node_exporter's `mode` label). guest time is already inside user and nice, so
// it is not repeated.
struct HostCpuSeconds {
  double user = 0;
  double nice = 0;
  double system = 0;
  double idle = 0;
  double iowait = 0;
  double irq = 0;
  double softirq = 0;
  double steal = 0;

  static StatusOr<HostCpuSeconds> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostCpuSeconds&) const = default;
};

// One filesystem's statvfs, in bytes (node_exporter's size and avail: avail is
// what an unprivileged user may still write).
struct HostFilesystem {
  std::string mountpoint;  // "/", "/fsx"
  int64_t size_bytes = 0;
  int64_t avail_bytes = 0;

  static StatusOr<HostFilesystem> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostFilesystem&) const = default;
};

// The filesystems `host.filesystems` may report: the node disk and /fsx. The
// reader drops any other entry, and all but the first of each mountpoint, so
// that an agent cannot make hpodd keep, or GET /metrics export, more.
inline constexpr std::string_view kHostMountpoints[] = {"/", "/fsx"};
bool IsHostMountpoint(std::string_view mountpoint);

struct HostStats {
  HostCpuSeconds cpu_seconds;
  int64_t memory_total_bytes = 0;      // /proc/meminfo MemTotal
  int64_t memory_available_bytes = 0;  // /proc/meminfo MemAvailable
  // The node disk ("/") and /fsx when it is mounted; a filesystem whose statvfs
  // did not answer recently (a hung /fsx) is left out rather than sent stale.
  // FromJson keeps only kHostMountpoints, the first entry of each (others are
  // still checked: a malformed entry fails the whole object).
  std::vector<HostFilesystem> filesystems;

  static StatusOr<HostStats> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostStats&) const = default;
};

}  // namespace hpod::api::agentproto
