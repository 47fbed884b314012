#pragma once

// What a machine says about itself when it joins hpodd (hpod-agent join; the
// join request's `facts`, PROTOCOL.md "Network agents"): its machine id and boot
// id, host name, CPUs, memory, GPUs (through NVML when the driver is there),
// block devices, IPv4 addresses, OS and Slurm version. hpodd keeps them as given
// (hpod hpod-list-hosts shows them); only machine_id is required.
//
// Thread contract: free function; reads the machine, safe from any thread.

#include <nlohmann/json.hpp>
#include <string>

#include "hpod/agent/fs_util.h"
#include "hpod/base/status.h"

namespace hpod::agent {

struct FactsOptions {
  // systemd's machine id; tests and containers point it elsewhere.
  std::string machine_id_file = "/etc/machine-id";
  std::string boot_id_file = kBootIdFile;
  std::string os_release_file = "/etc/os-release";
  std::string sys_block_dir = "/sys/block";
  // NVML, dlopened; a machine without it has no GPUs to report.
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string slurmd = "slurmd";
};

// kFailedPrecondition when the machine id is missing or malformed (one line
// saying how to make one); every other fact is best effort and left out when
// unreadable.
StatusOr<nlohmann::json> CollectMachineFacts(const FactsOptions& options);

// The machine's hostname (gethostname(2) in the caller's UTS namespace); ""
// when it cannot be read.
std::string MachineHostname();

}  // namespace hpod::agent
