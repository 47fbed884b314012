#pragma once

// The recovery families of GET /metrics (metrics_state.h lists them): what a
// cluster's recovery records add up to, and a cache that keeps the scrape's cost
// from growing with the cluster's history.
//
// Records are never pruned, so reading every one at each scrape costs more every
// month (10,000 records: ~300 ms a scrape). A finished recovery never changes
// (the recovery reconciler and the Batch APIs write only InProgress records), so
// RecoveryFiguresCache folds finished records into running totals once, and a
// scrape reads only the records written since the oldest one still in progress
// (store::ReadTx::ListRecoveriesWrittenAfter).
//
// Thread contract: RecoveryFigures is a plain value; RecoveryFiguresCache is
// thread-safe (concurrent scrapes).

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// What a cluster's recoveries add up to.
struct RecoveryFigures {
  // Counts one record: a finished one by outcome, with its durations; one in
  // progress as in progress, with the phases it has left.
  void Add(const store::RecoveryRecord& r);
  // Both sets of records together.
  void Add(const RecoveryFigures& other);

  std::map<std::pair<std::string, std::string>, int> finished;  // (kind, outcome)
  std::map<std::string, int> in_progress;                       // by kind
  std::map<std::string, HistogramCounts> durations;             // by kind, succeeded ones
  std::map<std::string, std::pair<double, double>> last;        // kind → (finished, duration)
  std::map<std::string, HistogramCounts> phases;                // by phase
  bool any = false;                                             // a record was counted
};

// Every recovery of the cluster, read now (no cache).
StatusOr<RecoveryFigures> ReadRecoveryFigures(store::ReadTx& tx, const std::string& cluster_id);

// hpod_recoveries_total, _in_progress, hpod_recovery_duration_seconds,
// _last_duration_seconds and hpod_recovery_phase_duration_seconds of a cluster.
void EmitRecoveries(const std::string& cluster_name, const RecoveryFigures& f, Exposition& out);

// A recovery's time in each phase it left, from its timeline (the first step that
// enters each phase: Detected, Marked, Drained|StepsCancelled, Rebooted|Terminated,
// Resumed), in phase order.
std::vector<std::pair<std::string, double>> RecoveryPhaseDurations(const store::RecoveryRecord& r);

class RecoveryFiguresCache {
 public:
  // The same figures as ReadRecoveryFigures(tx, cluster_id), reading only the
  // records written after the last finished one folded before (all of them the
  // first time), and folding the finished ones written before the oldest record
  // still in progress. `records_read` (optional) is set to how many records this
  // call read.
  StatusOr<RecoveryFigures> Figures(store::ReadTx& tx, const std::string& cluster_id,
                                    size_t* records_read = nullptr);
  // Forgets the clusters not in `cluster_ids` (deleted, with their records).
  void Retain(const std::set<std::string>& cluster_ids);

 private:
  struct Folded {
    // Every record of the cluster at or below this write position was finished
    // when read, and is in `figures`; none above it is.
    int64_t position = 0;
    RecoveryFigures figures;
  };
  Mutex mu_;
  std::map<std::string, Folded> clusters_ GUARDED_BY(mu_);
};

}  // namespace hpod::controlplane
