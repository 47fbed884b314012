#pragma once

// Parsing of `scontrol -o show nodes` (one line per node, space-separated
// Key=Value pairs; Reason= runs to the end of its value, which may hold spaces,
// up to the next known key) into what hpod needs to follow nodes.
//
// Thread contract: pure functions.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace hpod::slurm {

struct SlurmNodeState {
  std::string name;
  std::string state;              // State=, e.g. "IDLE", "IDLE+DRAIN", "DOWN+NOT_RESPONDING"
  std::string reason;             // Reason= without the "[user@time]" suffix; "" when none
  std::string slurmd_start_time;  // SlurmdStartTime=, "None" before it registered

  // Registered with slurmctld and usable or in use: not DOWN, not UNKNOWN/FUTURE,
  // not NOT_RESPONDING, not NO_RESPOND (`*`).
  bool Registered() const;
  bool Drained() const;  // DRAIN, DRAINING, DRAINED or FAIL flag set
  // SlurmdStartTime as epoch seconds (slurmctld prints local time, to the
  // second); 0 when "None" or unreadable.
  double SlurmdStartEpoch() const;
  nlohmann::json ToJson() const;  // {"name","state","reason","slurmd_start_time"}
  static SlurmNodeState FromJson(const nlohmann::json& j);
  bool operator==(const SlurmNodeState&) const = default;
};

// A time as scontrol prints it ("2026-12-04T19:37:47", local time, to the
// second) in epoch seconds; 0 when "None" or unreadable.
double SlurmTimeEpoch(const std::string& printed);

// Lines that do not start with NodeName= are skipped ("No nodes in the system").
std::vector<SlurmNodeState> ParseShowNodes(std::string_view output);

}  // namespace hpod::slurm
