#pragma once

// Cluster specs for the slurm.conf tests (config_test.cc, slurmctld_test.cc):
// nodes named after their addresses as hpod's providers name them, and a large
// cluster shaped like issue 30's 10,000 nodes.
//
// Thread contract: pure functions.

#include <algorithm>
#include <string>

#include "hpod/slurm/config.h"

namespace hpod::slurm::config_testing {

// "10.77.1.11" → "ip-10-77-1-11".
inline std::string NameOf(const std::string& ip) {
  std::string name = "ip-" + ip;
  for (char& c : name) c = c == '.' ? '-' : c;
  return name;
}

inline SlurmNodeSpec CpuNode(const std::string& ip, const std::string& group = "workers") {
  SlurmNodeSpec n;
  n.addr = ip;
  n.name = NameOf(ip);
  n.group = group;
  n.cpus = 8;  // ml.c5.2xlarge
  n.memory_mib = 16384;
  return n;
}

inline SlurmNodeSpec GpuNode(const std::string& ip) {
  SlurmNodeSpec n = CpuNode(ip, "gpu");
  n.cpus = 192;  // ml.p5.48xlarge
  n.memory_mib = 2097152;
  n.gpus = 8;
  n.gpu_type = "h100";
  return n;
}

inline SlurmClusterSpec BaseSpec() {
  SlurmClusterSpec spec;
  spec.cluster_name = "ml-cluster";
  spec.controller_name = "ip-10-77-0-10";
  spec.controller_addr = "10.77.0.10";
  spec.roles.controller_group = "controller-machine";
  return spec;
}

// `count` compute nodes from 10.77.1.1 up, .1-.254 of each /24, every 97th
// address skipped (a gap, as terminated nodes leave); the last fifth are GPU
// nodes in their own group and partition. The first node was replaced: it keeps
// its name, ip-10-77-1-1, at an address in another /24. Given in reverse order:
// the renderer sorts.
inline SlurmClusterSpec LargeSpec(int count) {
  SlurmClusterSpec spec = BaseSpec();
  spec.roles.partitions = {{"workers", "dev"}, {"gpu", "train"}};
  int address = 0;
  for (int i = 0; i < count; ++i, ++address) {
    if (address % 97 == 96) ++address;
    const std::string ip =
        "10.77." + std::to_string(1 + address / 254) + "." + std::to_string(1 + address % 254);
    spec.compute.push_back(i < count - count / 5 ? CpuNode(ip) : GpuNode(ip));
  }
  if (count > 0) spec.compute[0].addr = "10.77.250.7";
  std::reverse(spec.compute.begin(), spec.compute.end());
  return spec;
}

}  // namespace hpod::slurm::config_testing
