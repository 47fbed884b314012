#include "hpod/api/instance_types.h"

#include <algorithm>
#include <cstdio>

namespace hpod::api {

const std::vector<InstanceTypeInfo>& AllInstanceTypes() {
  // {name, vCPUs, memory MiB, GPUs, GPU type, Neuron devices}, from AWS's instance
  // type pages (GiB x 1024). Families follow fixed ratios (c: 2 GiB/vCPU, m: 4,
  // r/i3en: 8); g7e figures are the least certain (newest family) and worth
  // re-checking when Slurm declarations start to depend on them.
  static const std::vector<InstanceTypeInfo> kTable = {
      {"ml.p4d.24xlarge", 96, 1179648, 8, "A100", 0},
      {"ml.p4de.24xlarge", 96, 1179648, 8, "A100-80GB", 0},
      {"ml.p5.48xlarge", 192, 2097152, 8, "H100", 0},
      {"ml.p5.4xlarge", 16, 262144, 1, "H100", 0},
      {"ml.p6e-gb200.36xlarge", 144, 983040, 4, "GB200", 0},
      {"ml.trn1.32xlarge", 128, 524288, 0, "", 16},
      {"ml.trn1n.32xlarge", 128, 524288, 0, "", 16},
      {"ml.g5.xlarge", 4, 16384, 1, "A10G", 0},
      {"ml.g5.2xlarge", 8, 32768, 1, "A10G", 0},
      {"ml.g5.4xlarge", 16, 65536, 1, "A10G", 0},
      {"ml.g5.8xlarge", 32, 131072, 1, "A10G", 0},
      {"ml.g5.12xlarge", 48, 196608, 4, "A10G", 0},
      {"ml.g5.16xlarge", 64, 262144, 1, "A10G", 0},
      {"ml.g5.24xlarge", 96, 393216, 4, "A10G", 0},
      {"ml.g5.48xlarge", 192, 786432, 8, "A10G", 0},
      {"ml.c5.large", 2, 4096, 0, "", 0},
      {"ml.c5.xlarge", 4, 8192, 0, "", 0},
      {"ml.c5.2xlarge", 8, 16384, 0, "", 0},
      {"ml.c5.4xlarge", 16, 32768, 0, "", 0},
      {"ml.c5.9xlarge", 36, 73728, 0, "", 0},
      {"ml.c5.12xlarge", 48, 98304, 0, "", 0},
      {"ml.c5.18xlarge", 72, 147456, 0, "", 0},
      {"ml.c5.24xlarge", 96, 196608, 0, "", 0},
      {"ml.c5n.large", 2, 5376, 0, "", 0},
      {"ml.c5n.2xlarge", 8, 21504, 0, "", 0},
      {"ml.c5n.4xlarge", 16, 43008, 0, "", 0},
      {"ml.c5n.9xlarge", 36, 98304, 0, "", 0},
      {"ml.c5n.18xlarge", 72, 196608, 0, "", 0},
      {"ml.m5.large", 2, 8192, 0, "", 0},
      {"ml.m5.xlarge", 4, 16384, 0, "", 0},
      {"ml.m5.2xlarge", 8, 32768, 0, "", 0},
      {"ml.m5.4xlarge", 16, 65536, 0, "", 0},
      {"ml.m5.8xlarge", 32, 131072, 0, "", 0},
      {"ml.m5.12xlarge", 48, 196608, 0, "", 0},
      {"ml.m5.16xlarge", 64, 262144, 0, "", 0},
      {"ml.m5.24xlarge", 96, 393216, 0, "", 0},
      {"ml.t3.medium", 2, 4096, 0, "", 0},
      {"ml.t3.large", 2, 8192, 0, "", 0},
      {"ml.t3.xlarge", 4, 16384, 0, "", 0},
      {"ml.t3.2xlarge", 8, 32768, 0, "", 0},
      {"ml.g6.xlarge", 4, 16384, 1, "L4", 0},
      {"ml.g6.2xlarge", 8, 32768, 1, "L4", 0},
      {"ml.g6.4xlarge", 16, 65536, 1, "L4", 0},
      {"ml.g6.8xlarge", 32, 131072, 1, "L4", 0},
      {"ml.g6.16xlarge", 64, 262144, 1, "L4", 0},
      {"ml.g6.12xlarge", 48, 196608, 4, "L4", 0},
      {"ml.g6.24xlarge", 96, 393216, 4, "L4", 0},
      {"ml.g6.48xlarge", 192, 786432, 8, "L4", 0},
      {"ml.gr6.4xlarge", 16, 131072, 1, "L4", 0},
      {"ml.gr6.8xlarge", 32, 262144, 1, "L4", 0},
      {"ml.g6e.xlarge", 4, 32768, 1, "L40S", 0},
      {"ml.g6e.2xlarge", 8, 65536, 1, "L40S", 0},
      {"ml.g6e.4xlarge", 16, 131072, 1, "L40S", 0},
      {"ml.g6e.8xlarge", 32, 262144, 1, "L40S", 0},
      {"ml.g6e.16xlarge", 64, 524288, 1, "L40S", 0},
      {"ml.g6e.12xlarge", 48, 393216, 4, "L40S", 0},
      {"ml.g6e.24xlarge", 96, 786432, 4, "L40S", 0},
      {"ml.g6e.48xlarge", 192, 1572864, 8, "L40S", 0},
      {"ml.p5e.48xlarge", 192, 2097152, 8, "H200", 0},
      {"ml.p5en.48xlarge", 192, 2097152, 8, "H200", 0},
      {"ml.p6-b200.48xlarge", 192, 2097152, 8, "B200", 0},
      {"ml.trn2.3xlarge", 12, 131072, 0, "", 1},
      {"ml.trn2.48xlarge", 192, 2097152, 0, "", 16},
      {"ml.c6i.large", 2, 4096, 0, "", 0},
      {"ml.c6i.xlarge", 4, 8192, 0, "", 0},
      {"ml.c6i.2xlarge", 8, 16384, 0, "", 0},
      {"ml.c6i.4xlarge", 16, 32768, 0, "", 0},
      {"ml.c6i.8xlarge", 32, 65536, 0, "", 0},
      {"ml.c6i.12xlarge", 48, 98304, 0, "", 0},
      {"ml.c6i.16xlarge", 64, 131072, 0, "", 0},
      {"ml.c6i.24xlarge", 96, 196608, 0, "", 0},
      {"ml.c6i.32xlarge", 128, 262144, 0, "", 0},
      {"ml.m6i.large", 2, 8192, 0, "", 0},
      {"ml.m6i.xlarge", 4, 16384, 0, "", 0},
      {"ml.m6i.2xlarge", 8, 32768, 0, "", 0},
      {"ml.m6i.4xlarge", 16, 65536, 0, "", 0},
      {"ml.m6i.8xlarge", 32, 131072, 0, "", 0},
      {"ml.m6i.12xlarge", 48, 196608, 0, "", 0},
      {"ml.m6i.16xlarge", 64, 262144, 0, "", 0},
      {"ml.m6i.24xlarge", 96, 393216, 0, "", 0},
      {"ml.m6i.32xlarge", 128, 524288, 0, "", 0},
      {"ml.r6i.large", 2, 16384, 0, "", 0},
      {"ml.r6i.xlarge", 4, 32768, 0, "", 0},
      {"ml.r6i.2xlarge", 8, 65536, 0, "", 0},
      {"ml.r6i.4xlarge", 16, 131072, 0, "", 0},
      {"ml.r6i.8xlarge", 32, 262144, 0, "", 0},
      {"ml.r6i.12xlarge", 48, 393216, 0, "", 0},
      {"ml.r6i.16xlarge", 64, 524288, 0, "", 0},
      {"ml.r6i.24xlarge", 96, 786432, 0, "", 0},
      {"ml.r6i.32xlarge", 128, 1048576, 0, "", 0},
      {"ml.i3en.large", 2, 16384, 0, "", 0},
      {"ml.i3en.xlarge", 4, 32768, 0, "", 0},
      {"ml.i3en.2xlarge", 8, 65536, 0, "", 0},
      {"ml.i3en.3xlarge", 12, 98304, 0, "", 0},
      {"ml.i3en.6xlarge", 24, 196608, 0, "", 0},
      {"ml.i3en.12xlarge", 48, 393216, 0, "", 0},
      {"ml.i3en.24xlarge", 96, 786432, 0, "", 0},
      {"ml.m7i.large", 2, 8192, 0, "", 0},
      {"ml.m7i.xlarge", 4, 16384, 0, "", 0},
      {"ml.m7i.2xlarge", 8, 32768, 0, "", 0},
      {"ml.m7i.4xlarge", 16, 65536, 0, "", 0},
      {"ml.m7i.8xlarge", 32, 131072, 0, "", 0},
      {"ml.m7i.12xlarge", 48, 196608, 0, "", 0},
      {"ml.m7i.16xlarge", 64, 262144, 0, "", 0},
      {"ml.m7i.24xlarge", 96, 393216, 0, "", 0},
      {"ml.m7i.48xlarge", 192, 786432, 0, "", 0},
      {"ml.r7i.large", 2, 16384, 0, "", 0},
      {"ml.r7i.xlarge", 4, 32768, 0, "", 0},
      {"ml.r7i.2xlarge", 8, 65536, 0, "", 0},
      {"ml.r7i.4xlarge", 16, 131072, 0, "", 0},
      {"ml.r7i.8xlarge", 32, 262144, 0, "", 0},
      {"ml.r7i.12xlarge", 48, 393216, 0, "", 0},
      {"ml.r7i.16xlarge", 64, 524288, 0, "", 0},
      {"ml.r7i.24xlarge", 96, 786432, 0, "", 0},
      {"ml.r7i.48xlarge", 192, 1572864, 0, "", 0},
      {"ml.r5d.16xlarge", 64, 524288, 0, "", 0},
      {"ml.g7e.2xlarge", 8, 65536, 1, "RTX-PRO-6000", 0},
      {"ml.g7e.4xlarge", 16, 131072, 1, "RTX-PRO-6000", 0},
      {"ml.g7e.8xlarge", 32, 262144, 1, "RTX-PRO-6000", 0},
      {"ml.g7e.12xlarge", 48, 393216, 2, "RTX-PRO-6000", 0},
      {"ml.g7e.24xlarge", 96, 786432, 4, "RTX-PRO-6000", 0},
      {"ml.g7e.48xlarge", 192, 1572864, 8, "RTX-PRO-6000", 0},
      {"ml.p6-b300.48xlarge", 192, 4194304, 8, "B300", 0},
  };
  return kTable;
}

std::optional<InstanceTypeInfo> LookupInstanceType(std::string_view name) {
  for (const auto& t : AllInstanceTypes()) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

namespace {

std::string GiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

std::string MachineMisfit(const InstanceTypeInfo& type, const MachineSize& machine) {
  std::string out;
  auto add = [&](const std::string& clause) { out += (out.empty() ? "" : "; ") + clause; };
  if (machine.cpus < type.vcpus) {
    add("it has " + std::to_string(machine.cpus) + " CPUs, " + std::string(type.name) +
        " has " + std::to_string(type.vcpus));
  }
  const int64_t type_bytes = type.memory_mib * 1024 * 1024;
  if (static_cast<double>(machine.memory_bytes) < kMemoryFitShare * static_cast<double>(type_bytes)) {
    add("it has " + GiB(machine.memory_bytes) + " of memory, " + std::string(type.name) + " has " +
        GiB(type_bytes) + " (at least " + std::to_string(static_cast<int>(kMemoryFitShare * 100)) +
        "% of it is needed)");
  }
  if (machine.gpus != type.gpus) {
    add("it has " + std::to_string(machine.gpus) + " GPUs, " + std::string(type.name) + " has " +
        std::to_string(type.gpus));
  }
  return out;
}

std::vector<std::string> TypesThatFit(const MachineSize& machine, size_t limit) {
  std::vector<InstanceTypeInfo> fit;
  for (const InstanceTypeInfo& t : AllInstanceTypes()) {
    if (MachineMisfit(t, machine).empty()) fit.push_back(t);
  }
  std::stable_sort(fit.begin(), fit.end(), [](const InstanceTypeInfo& a, const InstanceTypeInfo& b) {
    return a.vcpus != b.vcpus ? a.vcpus > b.vcpus : a.memory_mib > b.memory_mib;
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < fit.size() && i < limit; ++i) out.emplace_back(fit[i].name);
  return out;
}

}  // namespace hpod::api
