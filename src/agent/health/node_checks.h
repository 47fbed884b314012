#pragma once

// The node's own health checks (docs/node-health.md): disks, memory, the Slurm
// daemon, HyperPod's fault flag file and the kernel log's Xids. The GPU check is
// in gpu_check.h.
//
// Thread contract: each check is driven by one HealthChecker worker (Run is
// never called concurrently with itself); the constructors and name() are
// safe anywhere.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "hpod/agent/health/health_checks.h"
#include "hpod/agent/health/xid.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"

namespace hpod::agent::health {

struct DiskCheckOptions {
  std::string path;          // the filesystem watched: "/", "/var/lib/hpod-agent", "/fsx"
  std::string writable_dir;  // where the write test's temp file goes; empty: `path`
  // What a full or unwritable disk means here: Replace for the node's own disks
  // (a fresh node has a clean disk; a reboot keeps the full one), Healthy for a
  // shared /fsx (reported only: replacing a node cannot free it).
  Verdict verdict = Verdict::kReplace;
  uint64_t min_free_bytes = 16ull << 20;
  uint64_t min_free_inodes = 64;
};

// "disk:<path>": statvfs free space and inodes (for unprivileged users, as a job
// sees them), then create + write 4 KiB + fsync + unlink of a temp file.
class DiskCheck final : public Check {
 public:
  explicit DiskCheck(DiskCheckOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "disk:" + options_.path; }
  Outcome Run() override;

 private:
  const DiskCheckOptions options_;
};

// "memory": MemAvailable / MemTotal of `meminfo` below `min_available` on
// `runs` consecutive runs → Reboot. Locally every node shares the host's
// memory; the low threshold keeps a busy CI host from rebooting nodes.
class MemoryCheck final : public Check {
 public:
  explicit MemoryCheck(std::string meminfo = "/proc/meminfo", double min_available = 0.02,
                       int runs = 3)
      : meminfo_(std::move(meminfo)), min_available_(min_available), runs_(runs) {}
  std::string name() const override { return "memory"; }
  Outcome Run() override;

 private:
  const std::string meminfo_;
  const double min_available_;
  const int runs_;
  int low_runs_ = 0;
};

// "slurm": the agent's Slurm daemon (SlurmNode::State()). "failed" → Reboot;
// "restarting" for `restarting_limit` or longer → Reboot; anything else ok (a
// daemon that exits is restarted by the agent, so one crash is no node fault).
class SlurmCheck final : public Check {
 public:
  using StateFn = std::function<api::agentproto::SlurmStatus()>;
  SlurmCheck(StateFn state, const Clock& clock,
             std::chrono::milliseconds restarting_limit = std::chrono::seconds(30))
      : state_(std::move(state)), clock_(clock), restarting_limit_(restarting_limit) {}
  std::string name() const override { return "slurm"; }
  Outcome Run() override;

 private:
  const StateFn state_;
  const Clock& clock_;
  const std::chrono::milliseconds restarting_limit_;
  std::optional<std::chrono::steady_clock::time_point> restarting_since_;
};

// "flag_file": HyperPod's fault flag (`echo "1" >> /var/run/sagemaker_healthcheck_status`)
// exists and is non-empty → Replace.
class FlagFileCheck final : public Check {
 public:
  explicit FlagFileCheck(std::string path = "/var/run/sagemaker_healthcheck_status")
      : path_(std::move(path)) {}
  std::string name() const override { return "flag_file"; }
  Outcome Run() override;

 private:
  const std::string path_;
};

// "kernel_log": `NVRM: Xid` lines logged since the agent started, judged by
// JudgeXid and kept until the agent restarts. `path` is /dev/kmsg (opened
// non-blocking at its end when the check is built, so old messages are not
// judged again) or a regular file (read from its size at construction; a file
// that does not exist yet is read from its start once it appears).
class KernelLogCheck final : public Check {
 public:
  explicit KernelLogCheck(std::string path = "/dev/kmsg");
  ~KernelLogCheck() override;
  std::string name() const override { return "kernel_log"; }
  Outcome Run() override;

 private:
  bool Open(bool at_end);
  void ReadKmsg();
  void ReadFile();

  const std::string path_;
  int fd_ = -1;
  bool kmsg_ = false;
  std::string open_error_;
  uint64_t offset_ = 0;  // regular file only
  std::string partial_;  // an unfinished last line (regular file only)
  XidLedger xids_;
};

}  // namespace hpod::agent::health
