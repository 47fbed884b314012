#pragma once

// One simulated cluster's slurmctld, as the node simulator's controller agent
// reports it (`slurm_nodes`, PROTOCOL.md) and answers hpodd's commands to it
// (`scontrol update nodename=… state=…`, `squeue …`). A node is registered while
// a simulated agent holding its NodeName runs a slurmd; the drain/fail marks and
// their reason are kept as slurmctld keeps them, across the node's replacement,
// until `state=resume`. Nothing else of Slurm is simulated: no jobs (squeue
// prints nothing).
//
// Thread contract: not synchronized; the simulator's one I/O thread uses it.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hpod/api/agent_protocol.h"

namespace hpod::nodesim {

class SlurmSim {
 public:
  // `instance_id`'s slurmd registered as `name`, started at `started` (epoch
  // seconds). Returns the start time as slurmctld prints it; never `avoid`
  // (the row a recovery marked: a real slurmd restarted within the same second
  // shows the next one).
  std::string SlurmdStarted(const std::string& name, const std::string& instance_id, double started,
                            const std::string& avoid);
  // `instance_id`'s slurmd is gone (its machine died or was terminated); a row
  // another instance registered since is left alone.
  void SlurmdStopped(const std::string& name, const std::string& instance_id);
  // Runs a command hpodd sent the controller; fills the result's exit code and
  // output.
  void Run(const std::vector<std::string>& argv, api::agentproto::CommandResult* result);
  // `scontrol -o show nodes` for `names` (slurm.conf's nodes).
  std::vector<api::agentproto::SlurmNodeEntry> Report(const std::vector<std::string>& names) const;
  // Changes with every change of what Report shows.
  uint64_t version() const { return version_; }

 private:
  struct Row {
    std::string owner;       // instance id of the slurmd; "" when none runs
    std::string start_time;  // SlurmdStartTime; "None" before the first
    std::string flag;        // "", "DRAIN" or "FAIL"
    std::string reason;
  };
  Row& RowOf(const std::string& name);
  std::map<std::string, Row> rows_;
  uint64_t version_ = 0;
};

// Local time as slurmctld prints it ("2026-12-06T10:22:33").
std::string SlurmTime(double epoch);

}  // namespace hpod::nodesim
