#include "hpod/agent/health/health_checks.h"

#include <utility>

namespace hpod::agent::health {

namespace proto = api::agentproto;

std::string_view ResultName(Result r) {
  switch (r) {
    case Result::kOk:
      return "ok";
    case Result::kFail:
      return "fail";
    case Result::kTimeout:
      return "timeout";
    case Result::kSkipped:
      return "skipped";
  }
  return "ok";
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kHealthy:
      return "Healthy";
    case Verdict::kReboot:
      return "Reboot";
    case Verdict::kReplace:
      return "Replace";
  }
  return "Healthy";
}

// Shared by the checker and the check's worker thread, so that a worker left
// stuck in Run by Stop() still has its check and its mutex.
struct HealthChecker::Slot {
  Slot(std::unique_ptr<Check> c, const Clock& clk)
      : check(std::move(c)), name(check->name()), clock(clk) {}

  const std::unique_ptr<Check> check;
  const std::string name;
  const Clock& clock;
  std::thread thread;  // the checker's: joined or detached in Stop

  Mutex mu;
  std::condition_variable cv;
  bool run_requested GUARDED_BY(mu) = false;
  bool running GUARDED_BY(mu) = false;
  bool stopping GUARDED_BY(mu) = false;
  uint64_t finished_runs GUARDED_BY(mu) = 0;
  std::chrono::steady_clock::time_point started GUARDED_BY(mu);
  Outcome last GUARDED_BY(mu);  // of the last finished run
  int64_t duration_ms GUARDED_BY(mu) = 0;
  double time GUARDED_BY(mu) = 0;
};

HealthChecker::HealthChecker(HealthCheckerOptions options, const Clock& clock,
                             std::vector<std::unique_ptr<Check>> checks, ReportCallback on_report)
    : options_(options), clock_(clock), on_report_(std::move(on_report)) {
  for (auto& c : checks) {
    auto slot = std::make_shared<Slot>(std::move(c), clock_);
    slot->thread = std::thread(&HealthChecker::Work, slot);
    slots_.push_back(std::move(slot));
  }
}

HealthChecker::~HealthChecker() { Stop(); }

void HealthChecker::Start() {
  loop_ = std::thread([this] { Loop(); });
}

void HealthChecker::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (auto& slot : slots_) {
    if (!slot->thread.joinable()) continue;
    bool stuck;
    {
      MutexLock lock(slot->mu);
      slot->stopping = true;
      slot->cv.notify_all();
      while (slot->running && lock.WaitUntil(slot->cv, deadline) != std::cv_status::timeout) {
      }
      stuck = slot->running;
    }
    if (stuck) {
      slot->thread.detach();  // it holds `slot`; it exits when its Run returns
    } else {
      slot->thread.join();
    }
  }
}

void HealthChecker::Work(std::shared_ptr<Slot> slot) {
  MutexLock lock(slot->mu);
  while (true) {
    while (!slot->run_requested && !slot->stopping) lock.Wait(slot->cv);
    if (slot->stopping) return;
    slot->run_requested = false;
    slot->running = true;
    slot->started = slot->clock.SteadyNow();
    lock.Unlock();
    Outcome outcome = slot->check->Run();
    auto finished = slot->clock.SteadyNow();
    lock.Lock();
    slot->running = false;
    slot->last = std::move(outcome);
    slot->duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(finished - slot->started).count();
    slot->time = slot->clock.NowEpochSeconds();
    ++slot->finished_runs;
    slot->cv.notify_all();
  }
}

proto::HealthReport HealthChecker::RunOnce() {
  MutexLock run(run_mu_);
  // Real time, not clock_: the wait is for threads of this process, and a fake
  // clock in tests must not make a hung check wait forever.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  std::vector<std::optional<uint64_t>> wait_for(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    MutexLock lock(s.mu);
    if (s.running || s.run_requested || s.stopping) continue;  // still stuck from before
    s.run_requested = true;
    wait_for[i] = s.finished_runs + 1;
    s.cv.notify_all();
  }
  proto::HealthReport report;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    MutexLock lock(s.mu);
    if (wait_for[i]) {
      while (s.finished_runs < *wait_for[i] &&
             lock.WaitUntil(s.cv, deadline) != std::cv_status::timeout) {
      }
    }
    proto::HealthCheck c;
    c.name = s.name;
    if (s.running || s.run_requested) {
      c.result = ResultName(Result::kTimeout);
      c.verdict = VerdictName(s.check->TimeoutVerdict());
      c.reason = "check did not finish within " + std::to_string(options_.timeout.count()) + " ms";
      c.duration_ms = s.running ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                      clock_.SteadyNow() - s.started)
                                      .count()
                                : 0;
      c.time = clock_.NowEpochSeconds();
    } else {
      c.result = ResultName(s.last.result);
      c.verdict = VerdictName(s.last.verdict);
      c.reason = s.last.reason;
      c.duration_ms = s.duration_ms;
      c.time = s.time;
    }
    report.checks.push_back(std::move(c));
  }
  bool changed;
  {
    MutexLock lock(mu_);
    changed = current_.seq == 0 || current_.checks.size() != report.checks.size();
    for (size_t i = 0; !changed && i < report.checks.size(); ++i) {
      const auto &a = current_.checks[i], &b = report.checks[i];
      changed = a.name != b.name || a.result != b.result || a.verdict != b.verdict ||
                a.reason != b.reason;
    }
    report.seq = changed ? current_.seq + 1 : current_.seq;
    current_ = report;
  }
  if (changed && on_report_) on_report_(report);
  return report;
}

proto::HealthReport HealthChecker::Current() const {
  MutexLock lock(mu_);
  return current_;
}

void HealthChecker::Loop() {
  while (true) {
    RunOnce();
    MutexLock lock(mu_);
    lock.WaitFor(cv_, options_.interval, [this]() REQUIRES(mu_) { return stopping_; });
    if (stopping_) return;
  }
}

}  // namespace hpod::agent::health
