#pragma once

// The node's host figures for `heartbeat.host` (api/agent_protocol_host.h): what
// node_exporter would report for the node — CPU seconds by mode from /proc/stat,
// MemTotal/MemAvailable from /proc/meminfo, and statvfs of the node disk ("/")
// and of /fsx when it is mounted. hpodd exports them on GET /metrics.
//
// A statvfs of a hung NFS/Lustre /fsx blocks in the kernel and cannot be
// cancelled, so it must never run on the heartbeat thread (a node whose
// heartbeats stop is taken for dead and recovered). HostSampler therefore runs
// the statvfs calls on a thread of its own and Sample() reads /proc (which never
// blocks) and the latest filesystem figures: a filesystem whose statvfs has not
// answered for `stale_intervals` intervals is left out of the sample instead of
// being reported stale; the `disk:/fsx` health check reports the hang.
//
// Thread contract: HostSampler is thread-safe (Sample from the heartbeat thread,
// Start/Stop from the agent's). The parsers are pure functions.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hpod/api/agent_protocol_host.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"

namespace hpod::agent {

// The aggregate "cpu " line of /proc/stat in seconds: its fields are in USER_HZ
// ticks (`ticks_per_second`, sysconf(_SC_CLK_TCK)), in the order user nice system
// idle iowait irq softirq steal [guest guest_nice]; older kernels stop earlier
// (the missing modes read 0). kInvalidArgument when there is no such line or a
// field is not a number.
StatusOr<api::agentproto::HostCpuSeconds> ParseProcStat(std::string_view text,
                                                        double ticks_per_second);

struct MemInfo {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};
// MemTotal and MemAvailable of /proc/meminfo ("MemTotal:  16318060 kB"), in
// bytes. kInvalidArgument when either is missing (MemAvailable exists since Linux
// 3.14) or malformed.
StatusOr<MemInfo> ParseMeminfo(std::string_view text);

// `blocks` × `fragment_size` (statvfs's f_blocks or f_bavail × f_frsize) in bytes,
// saturated at INT64_MAX: FUSE and object-store mounts report 8 EiB and more, and
// the wire's integers (and Prometheus's precision) end there.
int64_t StatvfsBytes(uint64_t blocks, uint64_t fragment_size);

// Whether `path` is a mount point in /proc/self/mountinfo's text (field 5, with
// the kernel's octal escapes such as "\040" for a space undone).
bool IsMountPoint(std::string_view mountinfo, std::string_view path);

struct HostSamplerOptions {
  // Where /proc is read from (a test points it at fixture files).
  std::string proc_dir = "/proc";
  // Always sampled: the node disk.
  std::vector<std::string> filesystems = {"/"};
  // Sampled while /proc/self/mountinfo shows them mounted.
  std::vector<std::string> filesystems_if_mounted = {"/fsx"};
  // How often the filesystem thread runs its statvfs calls (the agent's
  // heartbeat interval).
  std::chrono::milliseconds interval{2000};
  // A filesystem whose last answer is older than this many intervals is left out.
  int stale_intervals = 3;
};

class HostSampler {
 public:
  HostSampler(HostSamplerOptions options, const Clock& clock);
  // Stop().
  ~HostSampler();
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  // Starts the filesystem thread (its first pass runs at once).
  void Start();
  // Ends the thread: joined, or, when a statvfs is stuck in the kernel, detached
  // (it owns only shared state, and exits once the call returns).
  void Stop();

  // CPU and memory read now, plus the fresh filesystem figures; nullopt when
  // /proc could not be read (the heartbeat then carries no `host`).
  std::optional<api::agentproto::HostStats> Sample() const;

  // One filesystem pass on the calling thread (what the thread does each
  // interval); for tests, which do not Start().
  void SampleFilesystemsOnce();

 private:
  struct Shared;
  // One round of statvfs calls into `s.latest`; false once stopping.
  static bool Pass(Shared& s);
  static void Loop(std::shared_ptr<Shared> s);

  const Clock& clock_;
  const std::shared_ptr<Shared> shared_;
  const double ticks_per_second_;
  std::thread thread_;
};

}  // namespace hpod::agent
