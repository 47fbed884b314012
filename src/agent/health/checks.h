#pragma once

// The agent's set of health checks, built from its options: the one place that
// says which checks a node runs and with what verdicts (docs/node-health.md).
//
// Thread contract: plain values and a factory; not synchronized.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpod/agent/health/health_checks.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"

namespace hpod::agent::health {

struct HealthOptions {
  std::chrono::milliseconds interval{2000};
  std::chrono::milliseconds timeout{5000};
  // Filesystems of the disk:<path> checks; empty: "/", the agent's state dir
  // (the node's own disk) and "/fsx" if it exists. "/fsx" and paths under it
  // are shared: a full one is reported with verdict Healthy.
  std::vector<std::string> disk_paths;
  uint64_t min_free_bytes = 16ull << 20;
  uint64_t min_free_inodes = 64;
  std::string flag_file = "/var/run/sagemaker_healthcheck_status";
  // Empty: env HPOD_KERNEL_LOG, else /dev/kmsg. The env wins over the option
  // (tests inject faults through it).
  std::string kernel_log;
  // Empty: env HPOD_NVML_LIBRARY, else libnvidia-ml.so.1 (the env wins, as above).
  std::string nvml_library;
  unsigned int gpu_max_temperature_c = 90;
  // Not in the config file; tests override them.
  std::string meminfo = "/proc/meminfo";
  double min_memory_available = 0.02;
  int memory_low_runs = 3;
  std::chrono::milliseconds slurm_restarting_limit{30000};
};

// What the checks read from the rest of the agent.
struct NodeProbes {
  std::string state_dir;  // the node's own disk
  std::function<api::agentproto::SlurmStatus()> slurm_state;
  std::function<std::string()> instance_type;  // "" until known
  // "a.b.c.d:port" of the slurmctld this node must reach; "" for none (the
  // controller itself, or no Slurm role yet).
  std::function<std::string()> slurm_controller;
};

// In report order: disk:<path>…, memory, slurm, network, flag_file, kernel_log, gpu.
std::vector<std::unique_ptr<Check>> MakeHealthChecks(const HealthOptions& options,
                                                     const NodeProbes& probes, const Clock& clock);

// The env-or-option-or-default rule above, for kernel_log and nvml_library.
std::string KernelLogPath(const HealthOptions& options);
std::string NvmlLibrary(const HealthOptions& options);

}  // namespace hpod::agent::health
