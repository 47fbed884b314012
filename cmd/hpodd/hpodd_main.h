#pragma once

// hpodd's command line (flags → Options → Run), shared by the real daemon and the
// test-only daemon that swaps in the fake provider.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/provider/provider.h"

namespace hpod::cmd {

// What `hpodd serve` knows when it makes its provider (flags and paths).
struct ProviderContext {
  std::string data_dir;
  std::string agent_socket;       // hpodd's agent listener (a Unix socket path)
  std::string node_block;         // --node-block
  std::string fsx_root;           // --fsx-root (empty: <data_dir>/local/fsx)
  std::string link_prefix;        // --link-prefix (names of bridges, veths, netns)
  int node_disk_mb = 0;           // --node-disk-mb (0: node disks are plain directories)
  std::string node_software;      // --node-software (empty: the programs beside hpodd)
  std::string fake_nvml_library;  // --fake-nvml-library (empty: no NVML seam)
  std::map<std::string, int> fake_clock_skew_s;  // --fake-clock-skew GROUP=SECONDS
  // --agent-transport: "unix" (agents dial agent_socket) or "tls" (over the node
  // network with mutual TLS; the provider declares the URL, hpodd listens there).
  std::string agent_transport = "unix";
};

// Makes the provider hpodd runs with; may return null (no provider), or an error
// that stops hpodd with its message.
using ProviderFactory = std::function<StatusOr<std::unique_ptr<provider::Provider>>(
    const Clock&, const ProviderContext&)>;

// One provider `hpodd --provider NAME` may pick.
struct ProviderChoice {
  std::string name;         // "local"
  std::string description;  // "local (Linux namespaces on this machine)", logged at start
  ProviderFactory make;
};

// `providers` lists what this binary offers, the default first; the providers are
// chosen by the binary's main and only there (docs/architecture.md: cmd/hpodd picks
// implementations).
int HpoddMain(int argc, char** argv, const std::vector<ProviderChoice>& providers);

}  // namespace hpod::cmd
