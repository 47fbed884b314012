// What a run did, for scripts and dashboards (--summary-json): steps, tokens,
// throughput with the first steps' warm-up reported apart, the final loss,
// and every checkpoint save and load with its stall and throughput.
//
// Thread contract: a plain value owned by the training thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::train {

struct SaveRecord {
  int64_t step = 0;
  double stall_s = 0;     // the training loop blocked for this long
  double snapshot_s = 0;  // copying state into the staging buffer
  double write_s = 0;     // the background write, until durable
  int64_t bytes = 0;
};

struct LoadRecord {
  std::string path;
  int64_t step = 0;
  double load_s = 0;
  int64_t bytes = 0;
};

struct Summary {
  double start_wall_time = 0;
  int64_t start_step = 0;
  int64_t end_step = 0;
  int64_t resumed_from_step = -1;
  int64_t consumed_samples = 0;
  float final_loss = 0;
  double elapsed_s = 0;
  int stop_signal = 0;
  int64_t num_params = 0;
  double flops_per_token = 0;
  int world_size = 1;
  // Seconds of the timed steps spent in collectives (gradient reduce-scatter,
  // the step's scalars, parameter allgather): rank 0's view.
  double comm_s_timed = 0;

  // Steps are split into the first `warmup` of this process (page faults,
  // JIT, caches) and the rest, which tokens/s is computed from.
  int64_t warmup_steps = 0;
  double warmup_s = 0;
  int64_t warmup_tokens = 0;
  int64_t timed_steps = 0;
  double timed_s = 0;
  int64_t timed_tokens = 0;

  // Steps are timed from the first micro-batch to the optimizer update;
  // checkpoint stalls are counted here, apart, so tokens/s is the compute
  // rate and the stall fraction says what saving costs.
  double stall_s_total = 0;  // in-loop (interval) saves only
  int64_t in_loop_saves = 0;
  int64_t save_errors = 0;  // failed saves (each retried; training went on)
  double final_save_s = 0;  // the synchronous save at the end
  std::vector<SaveRecord> saves;
  std::vector<LoadRecord> loads;
  std::vector<std::string> warnings;
  // goodput::ToJson of the whole ledger (every attempt of the job), as the
  // "goodput" key; null (no key) when this run wrote no ledger.
  nlohmann::json goodput;

  // `index` is 1 for the first step this process ran.
  void AddStep(int64_t index, double seconds, int64_t tokens, int64_t warmup);
};

nlohmann::json SummaryToJson(const Summary& s);
// Written to a temporary file and renamed, so readers never see half of it.
Status WriteSummary(const std::string& path, const Summary& s);

}  // namespace hpod::train
