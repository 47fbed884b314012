#pragma once

// "network": whether the node reaches its Slurm controller (a TCP connect to
// slurmctld's port within `connect_timeout`). A node whose link is down is cut
// off from its cluster while its agent, which talks to hpodd over a Unix socket
// on the shared filesystem locally, still heartbeats: this is the check that sees
// it. `failures` consecutive failed connects → Replace (hpod's choice: a fresh
// node gets a fresh link; a reboot keeps a broken one). Skipped on the controller
// itself and before the node has a Slurm role.
//
// Thread contract: Run is called by one HealthChecker round at a time.

#include <chrono>
#include <functional>
#include <string>

#include "hpod/agent/health/health_checks.h"

namespace hpod::agent::health {

class NetworkCheck final : public Check {
 public:
  // `target` gives "a.b.c.d:port" of slurmctld, or "" when there is none to reach.
  NetworkCheck(std::function<std::string()> target,
               std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(1500),
               int failures = 2)
      : target_(std::move(target)), timeout_(connect_timeout), failures_(failures) {}
  std::string name() const override { return "network"; }
  Outcome Run() override;

 private:
  const std::function<std::string()> target_;
  const std::chrono::milliseconds timeout_;
  const int failures_;
  int failed_runs_ = 0;
};

// Connects to "a.b.c.d:port" within `timeout`; OK or why not.
Status TcpReachable(const std::string& target, std::chrono::milliseconds timeout);

}  // namespace hpod::agent::health
