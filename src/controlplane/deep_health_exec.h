#pragma once

// How a deep health check run executes hpod-deep-check on its nodes and what
// each answer means (deep_health.h has the run; this file only the commands).
//
// Every answer becomes an Outcome: the node passed or failed the check, or the
// check said nothing about the node:
//  - inconclusive: the agent was not connected, busy or went away, the command
//    timed out or was killed, the connectivity world did not come together; the
//    check is tried again. Only a node whose own command failed so
//    (`counts`) uses up one of its tries, and is replaced when it has none left;
//    the other ranks of a world that did not form are not judged;
//  - unavailable: the node lacks what the check needs (stress-ng, iperf3 or
//    hpod-deep-check itself); replacing the node would not help, so it is said
//    and the node is left as it is.
// Answers are parsed defensively: whatever a node prints never throws here.
//
// Thread contract: free functions; RunFn must be thread-safe (called from one
// thread per node at once).

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpod/base/status.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/store/records.h"

namespace hpod::controlplane::deep {

enum class Outcome { kPassed, kFailed, kInconclusive, kUnavailable };
const char* OutcomeName(Outcome o);

struct CheckResult {
  Outcome outcome = Outcome::kInconclusive;
  std::string message;
  nlohmann::json detail = nlohmann::json::object();
  bool skipped = false;
  // Inconclusive through this node's own command (its agent away, no answer
  // in time, killed): it uses up one of the node's tries.
  bool counts = false;
};

using RunFn = std::function<StatusOr<CommandResult>(
    const std::string& instance_id, const std::vector<std::string>& argv,
    std::chrono::milliseconds timeout)>;

// hpod-deep-check's one JSON line, classified; `passed` is read from it when
// the command ran.
CheckResult Classify(const StatusOr<CommandResult>& r);

// InstanceStress on each node at once; results in `nodes` order.
std::vector<CheckResult> RunStress(const RunFn& run, const std::string& program, int seconds,
                                   const std::vector<store::NodeRecord>& nodes);

// InstanceConnectivity on `ranks` together (ranked in that order); results in
// that order.
std::vector<CheckResult> RunConnectivity(const RunFn& run, const std::string& program,
                                         int rendezvous_port, int iperf_port,
                                         const std::vector<store::NodeRecord>& ranks);

}  // namespace hpod::controlplane::deep
