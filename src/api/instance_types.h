#pragma once

// The hardware each SageMaker HyperPod instance type (ClusterInstanceType in the
// API model) stands for, from AWS's published instance specifications. The local
// provider does not enforce these sizes (every node shares the host); they are
// what nodes declare to Slurm (CPUs=, RealMemory=, Gres=gpu:N) and what the API
// reports, so a cluster looks like its AWS twin.
//
// Thread contract: the table is immutable; LookupInstanceType is thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpod::api {

struct InstanceTypeInfo {
  std::string_view name;      // "ml.p5.48xlarge"
  int vcpus = 0;              // 192
  int64_t memory_mib = 0;     // 2048 GiB = 2097152
  int gpus = 0;               // NVIDIA GPUs (0 for Trainium and CPU types)
  std::string_view gpu_type;  // "H100"; empty when gpus == 0
  int neuron_devices = 0;     // AWS Trainium devices (trn1/trn2)
};

// nullopt for a name that is not a HyperPod instance type.
std::optional<InstanceTypeInfo> LookupInstanceType(std::string_view name);

// Every entry, in the API model's enum order.
const std::vector<InstanceTypeInfo>& AllInstanceTypes();

// What a machine has, as its agent reports it (agent/machine_facts.h).
struct MachineSize {
  int64_t cpus = 0;
  int64_t memory_bytes = 0;
  int64_t gpus = 0;
};

// A machine's memory as the kernel reports it (MemTotal) is below its nominal
// size by what firmware and the kernel keep (about 3-8%); a machine fits a type
// with at least this share of the type's memory.
inline constexpr double kMemoryFitShare = 0.90;

// How `machine` falls short of `type`, one clause per difference ("it has 2 CPUs,
// the type 8"), joined by "; "; empty when it fits. A machine fits with at least
// the type's vCPUs, kMemoryFitShare of its memory, and exactly its GPUs (a type
// names how many GPUs Slurm may hand out).
std::string MachineMisfit(const InstanceTypeInfo& type, const MachineSize& machine);

// The names of the types `machine` fits, largest first (by vCPUs, then memory),
// at most `limit` of them: what to suggest to a person who named none.
std::vector<std::string> TypesThatFit(const MachineSize& machine, size_t limit);

}  // namespace hpod::api
