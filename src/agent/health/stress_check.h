#pragma once

// The InstanceStress deep health check (docs/node-health.md, "Deep health
// checks"): Debian's stress-ng loads the node's CPUs, memory and disk at once
// for a few seconds with its own verification on, and the node passes when
// stress-ng reports no failure (a verification mismatch, an allocation or write
// that failed) and every stressor kept at least a minimum rate, in
// bogo-operations per second of wall-clock time per stressor instance.
// - CPU: a sixteenth of the worst a healthy node did here while another node's
//   check shared its two cores (docs/node-health.md gives the figures); a node
//   that gets a sliver of its CPU (a throttled or failing machine, or `hpod
//   inject-fault --kind cpu-throttle`) falls far below it.
// - Memory and disk: their rates swung twentyfold between healthy runs on a
//   shared host, so any rate judges nothing but a stall: their minimum is one
//   operation a second, and their verification is what fails a bad one.
//
// Thread contract: free functions, safe anywhere.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent::health {

struct StressOptions {
  int seconds = 5;
  int cpu_workers = 0;  // 0: one per CPU the process may run on
  std::string memory = "256M";
  std::string disk = "64M";
  std::string dir = "/var/tmp";  // where the disk stressor writes
  // Per instance, in bogo-ops per second of wall-clock time.
  double min_cpu_rate = 25;
  double min_vm_rate = 1;
  double min_hdd_rate = 1;
};

// One stressor's line of stress-ng's --yaml metrics.
struct StressorMetrics {
  std::string stressor;
  double bogo_ops = 0;
  double rate_real_time = 0;          // bogo-ops per second of wall-clock time, all instances
  double cpu_usage_per_instance = 0;  // percent
};

struct StressVerdict {
  bool passed = false;
  std::string message;  // one line: what failed, or what was measured
  nlohmann::json detail;
};

// stress-ng's argv for `options` (its metrics go to `yaml_path`).
std::vector<std::string> StressArgv(const StressOptions& options, int cpus,
                                    const std::string& yaml_path);

// The "metrics:" list of stress-ng's --yaml output.
StatusOr<std::vector<StressorMetrics>> ParseStressYaml(const std::string& text);

// Judges one run: stress-ng's exit code and stderr, and its metrics.
StressVerdict JudgeStress(const StressOptions& options, int cpus, int exit_code,
                          const std::string& stderr_text,
                          const std::vector<StressorMetrics>& metrics);

// Runs stress-ng and judges it; an error only when it could not be run at all.
StatusOr<StressVerdict> RunStressCheck(const StressOptions& options);

// CPUs this process may run on (its affinity mask), at least 1.
int UsableCpus();

}  // namespace hpod::agent::health
