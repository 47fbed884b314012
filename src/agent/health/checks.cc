#include "hpod/agent/health/checks.h"

#include <cstdlib>
#include <filesystem>

#include "hpod/agent/health/gpu_check.h"
#include "hpod/agent/health/network_check.h"
#include "hpod/agent/health/node_checks.h"

namespace hpod::agent::health {
namespace {

std::string EnvOr(const char* name, const std::string& option, const char* fallback) {
  const char* env = std::getenv(name);
  if (env != nullptr && *env != '\0') return env;
  return option.empty() ? fallback : option;
}

bool IsShared(const std::string& path) { return path == "/fsx" || path.rfind("/fsx/", 0) == 0; }

}  // namespace

std::string KernelLogPath(const HealthOptions& options) {
  return EnvOr("HPOD_KERNEL_LOG", options.kernel_log, "/dev/kmsg");
}

std::string NvmlLibrary(const HealthOptions& options) {
  return EnvOr("HPOD_NVML_LIBRARY", options.nvml_library, "libnvidia-ml.so.1");
}

std::vector<std::unique_ptr<Check>> MakeHealthChecks(const HealthOptions& options,
                                                     const NodeProbes& probes, const Clock& clock) {
  std::vector<std::string> paths = options.disk_paths;
  if (paths.empty()) {
    paths = {"/"};
    if (!probes.state_dir.empty()) paths.push_back(probes.state_dir);
    std::error_code ec;
    if (std::filesystem::is_directory("/fsx", ec)) paths.push_back("/fsx");
  }
  std::vector<std::unique_ptr<Check>> checks;
  for (const std::string& path : paths) {
    DiskCheckOptions disk;
    disk.path = path;
    // Not the root directory itself: /var/tmp is the root filesystem's place
    // for scratch files.
    std::error_code ec;
    if (path == "/" && std::filesystem::is_directory("/var/tmp", ec))
      disk.writable_dir = "/var/tmp";
    disk.verdict = IsShared(path) ? Verdict::kHealthy : Verdict::kReplace;
    disk.min_free_bytes = options.min_free_bytes;
    disk.min_free_inodes = options.min_free_inodes;
    checks.push_back(std::make_unique<DiskCheck>(std::move(disk)));
  }
  checks.push_back(std::make_unique<MemoryCheck>(options.meminfo, options.min_memory_available,
                                                 options.memory_low_runs));
  if (probes.slurm_state) {
    checks.push_back(
        std::make_unique<SlurmCheck>(probes.slurm_state, clock, options.slurm_restarting_limit));
  }
  if (probes.slurm_controller) {
    checks.push_back(std::make_unique<NetworkCheck>(probes.slurm_controller));
  }
  checks.push_back(std::make_unique<FlagFileCheck>(options.flag_file));
  checks.push_back(std::make_unique<KernelLogCheck>(KernelLogPath(options)));
  checks.push_back(std::make_unique<GpuCheck>(
      GpuCheckOptions{NvmlLibrary(options), probes.instance_type, options.gpu_max_temperature_c}));
  return checks;
}

}  // namespace hpod::agent::health
