#pragma once

// The agent's health checks (docs/node-health.md has the verdict table): a
// HealthChecker runs a fixed set of Checks every `interval`, each on its own
// worker thread with a `timeout`, and hands a full HealthReport to a callback
// whenever any check's result, verdict or reason changed. hpodd acts on the
// report's worst verdict; the agent only detects.
//
// A check that is still running when its timeout passes is reported as
// "timeout" (with the check's verdict for a hang, e.g. Replace for the node's
// own disk) and is not started again until its run returns: a statvfs of a hung
// NFS/Lustre mount sits in the kernel and cannot be cancelled, so starting
// another would only pile up stuck threads.
//
// Thread contract: HealthChecker is thread-safe. RunOnce calls are serialized
// (the interval thread, or a test, calls it); the report callback runs on the
// thread that called RunOnce and never concurrently with itself. Each Check's
// Run is called from its own worker thread, never concurrently with itself.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::agent::health {

// The wire's `HealthCheck.result` and `.verdict`, as enums (one string table each).
enum class Result { kOk, kFail, kTimeout, kSkipped };
enum class Verdict { kHealthy, kReboot, kReplace };  // ordered: worse is greater
std::string_view ResultName(Result r);               // "ok" | "fail" | "timeout" | "skipped"
std::string_view VerdictName(Verdict v);             // "Healthy" | "Reboot" | "Replace"

// What one run of a check found.
struct Outcome {
  Result result = Result::kOk;
  Verdict verdict = Verdict::kHealthy;
  // One line. Keep it stable while the condition lasts (no live counters): a
  // changed reason is a changed report, sent to hpodd.
  std::string reason;

  static Outcome Ok(std::string reason = "") { return {Result::kOk, Verdict::kHealthy, reason}; }
  static Outcome Fail(Verdict v, std::string reason) { return {Result::kFail, v, reason}; }
  static Outcome Skipped(std::string reason) {
    return {Result::kSkipped, Verdict::kHealthy, reason};
  }
  bool operator==(const Outcome&) const = default;
};

// One health check. Run may block (the checker times it out) and may keep state
// between runs (consecutive lows, a log offset); it must not throw.
class Check {
 public:
  virtual ~Check() = default;
  // "disk:/fsx", "memory", ...: the report's `name`, unique within a checker.
  virtual std::string name() const = 0;
  virtual Outcome Run() = 0;
  // The verdict of a run that timed out: what a hang of this check means.
  virtual Verdict TimeoutVerdict() const { return Verdict::kHealthy; }
};

struct HealthCheckerOptions {
  // How often Start()'s thread calls RunOnce.
  std::chrono::milliseconds interval{2000};
  // How long RunOnce waits for each check it started.
  std::chrono::milliseconds timeout{5000};
};

class HealthChecker {
 public:
  using ReportCallback = std::function<void(const api::agentproto::HealthReport& report)>;

  // `clock` stamps each check's `time` and `duration_ms` and must outlive the
  // checker and any worker Stop() left stuck (RealClock::Get() does); `on_report` gets every
  // changed report (seq 1, 2, …).
  HealthChecker(HealthCheckerOptions options, const Clock& clock,
                std::vector<std::unique_ptr<Check>> checks, ReportCallback on_report);
  // Stop().
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // Starts the interval thread (first round at once). At most once; tests that
  // drive rounds with RunOnce do not call it.
  void Start();
  // Stops the interval thread and the workers. A check still stuck in its run
  // after `timeout` is left behind (its thread is detached and keeps the check
  // alive) so that Stop returns: it may be in an uninterruptible syscall.
  void Stop();

  // One round, now: starts every check that is not still running from an
  // earlier round, waits up to `timeout` for them, and judges each (a check
  // still running past its timeout: "timeout"). Calls the callback if any
  // check's result, verdict or reason differs from the last report (always for
  // the first round). Returns the round's report.
  api::agentproto::HealthReport RunOnce();

  // The latest report (seq of the last one sent to the callback; 0 and no checks
  // before the first round). The agent re-sends it after a reconnect.
  api::agentproto::HealthReport Current() const;

 private:
  struct Slot;  // one check, its worker thread and its latest outcome
  void Loop();
  static void Work(std::shared_ptr<Slot> slot);

  const HealthCheckerOptions options_;
  const Clock& clock_;
  const ReportCallback on_report_;
  std::vector<std::shared_ptr<Slot>> slots_;

  Mutex run_mu_;  // serializes RunOnce (and so the callback)
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  api::agentproto::HealthReport current_ GUARDED_BY(mu_);
  std::thread loop_;
};

}  // namespace hpod::agent::health
