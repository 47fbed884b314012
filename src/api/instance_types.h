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

}  // namespace hpod::api
