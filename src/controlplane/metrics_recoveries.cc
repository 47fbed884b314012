#include "hpod/controlplane/metrics_recoveries.h"

#include <optional>
#include <string_view>

#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {
namespace {

const std::vector<double> kRecoveryBuckets = {1,  2,   5,   10,  15,  20,   30,   45,  60,
                                              90, 120, 180, 300, 600, 1200, 1800, 3600};
const std::vector<double> kPhaseBuckets = {0.1, 0.25, 0.5, 1,   2,   5,   10,
                                           20,  30,   60,  120, 300, 600, 1800};

constexpr std::string_view kKinds[] = {"Reboot", "Replace"};
constexpr std::string_view kOutcomes[] = {kRecoverySucceeded, kRecoveryFailed, kRecoveryReported,
                                          kRecoveryCancelled};

// Which phase a timeline step enters (recovery_reconciler.cc writes the steps);
// steps inside a phase (RebootRequested, Launched, LifecycleDone, ...) enter none.
std::optional<RecoveryPhase> PhaseEnteredBy(std::string_view step) {
  if (step == "Detected") return RecoveryPhase::kDetected;
  if (step == "Marked") return RecoveryPhase::kMarked;
  if (step == "Drained" || step == "StepsCancelled") return RecoveryPhase::kDrained;
  if (step == "Rebooted" || step == "Terminated") return RecoveryPhase::kLaunched;
  if (step == "Resumed") return RecoveryPhase::kResumed;
  return std::nullopt;
}

std::string Kind(const store::RecoveryRecord& r) {
  return ParseRecoveryAction(r.action) ? r.action : "unknown";
}

HistogramCounts& Bucketed(std::map<std::string, HistogramCounts>& m, const std::string& key,
                          const std::vector<double>& bounds) {
  return m.try_emplace(key, bounds).first->second;
}

}  // namespace

void RecoveryFigures::Add(const store::RecoveryRecord& r) {
  any = true;
  const std::string kind = Kind(r);
  if (RecoveryActive(r)) {
    ++in_progress[kind];
  } else {
    ++finished[{kind, r.status}];
  }
  if (r.status == kRecoverySucceeded && r.finished >= r.created && r.created > 0) {
    const double took = r.finished - r.created;
    Bucketed(durations, kind, kRecoveryBuckets).Observe(took);
    auto& l = last[kind];
    if (r.finished >= l.first) l = {r.finished, took};
  }
  for (const auto& [phase, seconds] : RecoveryPhaseDurations(r)) {
    Bucketed(phases, phase, kPhaseBuckets).Observe(seconds);
  }
}

void RecoveryFigures::Add(const RecoveryFigures& other) {
  any = any || other.any;
  for (const auto& [key, n] : other.finished) finished[key] += n;
  for (const auto& [kind, n] : other.in_progress) in_progress[kind] += n;
  for (const auto& [kind, h] : other.durations) Bucketed(durations, kind, h.bounds).Add(h);
  for (const auto& [kind, l] : other.last) {
    auto& mine = last[kind];
    if (l.first >= mine.first) mine = l;
  }
  for (const auto& [phase, h] : other.phases) Bucketed(phases, phase, h.bounds).Add(h);
}

StatusOr<RecoveryFigures> ReadRecoveryFigures(store::ReadTx& tx, const std::string& cluster_id) {
  HPOD_ASSIGN_OR_RETURN(auto records, tx.ListRecoveries(cluster_id));
  RecoveryFigures f;
  for (const auto& r : records) f.Add(r);
  return f;
}

void EmitRecoveries(const std::string& cluster, const RecoveryFigures& f, Exposition& out) {
  // Each family whole before the next (Exposition then writes it in place).
  for (std::string_view kind : kKinds) {
    const std::string k(kind);
    for (std::string_view outcome : kOutcomes) {
      auto it = f.finished.find({k, std::string(outcome)});
      out.Counter("hpod_recoveries_total", "Finished node recoveries by kind and outcome",
                  {{"cluster_name", cluster}, {"kind", k}, {"outcome", std::string(outcome)}},
                  it == f.finished.end() ? 0 : it->second);
    }
  }
  for (std::string_view kind : kKinds) {
    const std::string k(kind);
    auto running = f.in_progress.find(k);
    out.Gauge("hpod_recoveries_in_progress", "Node recoveries in progress",
              {{"cluster_name", cluster}, {"kind", k}},
              running == f.in_progress.end() ? 0 : running->second);
  }
  if (!f.any) return;
  for (std::string_view kind : kKinds) {
    const std::string k(kind);
    auto d = f.durations.find(k);
    out.Histogram("hpod_recovery_duration_seconds",
                  "Succeeded node recoveries: from detection to the node back in service",
                  {{"cluster_name", cluster}, {"kind", k}},
                  d == f.durations.end() ? HistogramCounts(kRecoveryBuckets) : d->second);
  }
  for (std::string_view kind : kKinds) {
    const std::string k(kind);
    if (auto last = f.last.find(k); last != f.last.end()) {
      out.Gauge("hpod_recovery_last_duration_seconds",
                "The latest succeeded node recovery's duration (detection to back in service)",
                {{"cluster_name", cluster}, {"kind", k}}, last->second.second);
    }
  }
  for (RecoveryPhase p : {RecoveryPhase::kDetected, RecoveryPhase::kMarked, RecoveryPhase::kDrained,
                          RecoveryPhase::kLaunched}) {
    const std::string name(RecoveryPhaseName(p));
    auto v = f.phases.find(name);
    out.Histogram("hpod_recovery_phase_duration_seconds",
                  "Time node recoveries spent in each phase (recovery.h)",
                  {{"cluster_name", cluster}, {"phase", name}},
                  v == f.phases.end() ? HistogramCounts(kPhaseBuckets) : v->second);
  }
}

std::vector<std::pair<std::string, double>> RecoveryPhaseDurations(const store::RecoveryRecord& r) {
  // The first time each phase was entered, in phase order.
  std::map<RecoveryPhase, double> entered;
  if (r.created > 0) entered[RecoveryPhase::kDetected] = r.created;
  if (r.timeline.is_array()) {
    for (const auto& s : r.timeline) {
      if (!s.is_object() || !s.contains("step") || !s["step"].is_string()) continue;
      auto time = s.find("time");
      if (time == s.end() || !time->is_number()) continue;
      auto phase = PhaseEnteredBy(s["step"].get<std::string>());
      if (phase && !entered.count(*phase)) entered[*phase] = time->get<double>();
    }
  }
  std::vector<std::pair<std::string, double>> out;
  for (auto it = entered.begin(); it != entered.end(); ++it) {
    auto next = std::next(it);
    if (next == entered.end()) break;
    // A phase skipped (a Reboot's Drained → Launched is never skipped, but a
    // record may be cut short) leaves its predecessor's time to the next one.
    if (next->second >= it->second) {
      out.push_back({std::string(RecoveryPhaseName(it->first)), next->second - it->second});
    }
  }
  return out;
}

StatusOr<RecoveryFigures> RecoveryFiguresCache::Figures(store::ReadTx& tx,
                                                        const std::string& cluster_id,
                                                        size_t* records_read) {
  Folded folded;
  {
    MutexLock lock(mu_);
    if (auto it = clusters_.find(cluster_id); it != clusters_.end()) folded = it->second;
  }
  // Read outside the lock: a concurrent scrape reads the same records and
  // folds the same ones, and the further-folded result is kept.
  HPOD_ASSIGN_OR_RETURN(auto written, tx.ListRecoveriesWrittenAfter(cluster_id, folded.position));
  if (records_read != nullptr) *records_read = written.size();
  RecoveryFigures rest;  // from the oldest record in progress on: read again next time
  bool folding = true;
  for (const auto& w : written) {
    folding = folding && !RecoveryActive(w.record);
    if (folding) {
      folded.figures.Add(w.record);
      folded.position = w.position;
    } else {
      rest.Add(w.record);
    }
  }
  RecoveryFigures all = folded.figures;
  all.Add(rest);
  MutexLock lock(mu_);
  Folded& kept = clusters_[cluster_id];
  if (folded.position > kept.position) kept = std::move(folded);
  return all;
}

void RecoveryFiguresCache::Retain(const std::set<std::string>& cluster_ids) {
  MutexLock lock(mu_);
  for (auto it = clusters_.begin(); it != clusters_.end();) {
    it = cluster_ids.count(it->first) ? std::next(it) : clusters_.erase(it);
  }
}

}  // namespace hpod::controlplane
