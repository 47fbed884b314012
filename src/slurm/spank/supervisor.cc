#include "hpod/slurm/spank/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#if HPOD_SPANK_HAVE_GOODPUT
#include "hpod/base/goodput.h"
#endif

namespace hpod::spank {
namespace {

std::string SignalText(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
  }
  return "signal " + std::to_string(sig);
}

std::string Seconds(std::chrono::steady_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// "ip-10-77-0-12 (Replace, recovery r-abc)".
std::string DescribeNode(const NodeHealth& n) {
  std::string detail = Join({n.action, n.recovery_id.empty() ? "" : "recovery " + n.recovery_id,
                             n.state == NodeState::kFailed ? n.status : ""},
                            ", ");
  return detail.empty() ? n.name : n.name + " (" + detail + ")";
}

std::string DescribeNodes(const HealthAnswer& a, NodeState state) {
  std::vector<std::string> parts;
  for (const auto& n : a.nodes) {
    if (n.state == state) parts.push_back(DescribeNode(n));
  }
  return Join(parts, ", ");
}

// The state of one Supervise call. Not thread-safe (Supervise's thread only).
class Session {
 public:
  Session(const SupervisorConfig& config, AgentClient& agent, StepRunner& runner,
          const Clock& clock, Sleeper& sleeper, Output& out)
      : config_(config),
        agent_(agent),
        runner_(runner),
        clock_(clock),
        sleeper_(sleeper),
        out_(out) {}

  int Run();

 private:
  enum class Next { kRetry, kStop };

  void Info(std::string_view text) {
    out_.Line(FormatLine(Severity::kInfo, config_.job_id, step_id_, text));
  }
  void Error(std::string_view text) {
    out_.Line(FormatLine(Severity::kError, config_.job_id, step_id_, text));
  }

  JobEvent Event(EventKind kind, int attempt) const {
    JobEvent e;
    e.job_id = config_.job_id;
    e.step_id = step_id_;
    e.restart = config_.restart;
    e.attempt = attempt;
    e.event = kind;
    e.time = clock_.NowEpochSeconds();
    e.nodes = config_.nodes;
    e.max_attempts = config_.max_attempts;
    return e;
  }

  // Best effort: reports never change the outcome. The first failure is shown once,
  // at the end, and not at all when the agent was already found unreachable: a
  // cluster without an agent gets one line, not one per event.
  void Report(const JobEvent& e) {
    Status s = agent_.Report(e);
    if (!s.ok() && report_failure_.empty()) report_failure_ = s.message();
  }

  int Finish(int attempt, int rc, std::string message) {
    JobEvent e = Event(EventKind::kFinished, attempt);
    e.exit_code = rc;
    e.message = std::move(message);
    e.recovery_ids = all_recovery_ids_;
    if (!config_.ledger_path.empty()) AttachLedger(config_.ledger_path, e);
    Report(e);
    if (!report_failure_.empty() && !unreachable_shown_) {
      Error("could not report to the cluster agent at " + agent_.Address() + ": " +
            report_failure_);
    }
    return rc;
  }

  StatusOr<HealthAnswer> Ask(double since) {
    return agent_.JobHealth(HealthQuery{config_.job_id, config_.nodes, since});
  }

  // Prints a line for each node whose recovery moved on since the last answer and
  // remembers the answer's node states in seen_.
  void ShowProgress(const HealthAnswer& a, std::chrono::steady_clock::time_point ended) {
    for (const auto& n : a.nodes) {
      auto it = seen_.find(n.name);
      const bool known = it != seen_.end();
      if (known && it->second.state == n.state && it->second.phase == n.phase &&
          it->second.status == n.status && it->second.recovery_id == n.recovery_id) {
        continue;
      }
      if (n.state == NodeState::kRecovered) {
        Info("Node " + n.name + " recovered (" +
             Join({n.recovery_id, Seconds(clock_.SteadyNow() - ended)}, ", ") + ")");
      } else if (n.state == NodeState::kRecovering && known) {
        Info("Node " + n.name + ": " +
             Join({n.action, n.phase, n.status.empty() ? "" : "(" + n.status + ")"}, " ") +
             (n.recovery_id.empty() ? "" : ", recovery " + n.recovery_id));
      }
      seen_[n.name] = n;
    }
  }

  Next OnNodeFailure(int attempt, int rc, double since, HealthAnswer answer,
                     std::chrono::steady_clock::time_point ended, int* exit_code);

  const SupervisorConfig& config_;
  AgentClient& agent_;
  StepRunner& runner_;
  const Clock& clock_;
  Sleeper& sleeper_;
  Output& out_;

  std::string step_id_;             // the current attempt's, empty while unknown
  std::string report_failure_;      // the first failure to report, shown by Finish
  bool unreachable_shown_ = false;  // a line already said the agent cannot be reached
  std::vector<std::string> all_recovery_ids_;
  std::map<std::string, NodeHealth> seen_;  // the current failure's nodes, by name
};

int Session::Run() {
  for (int attempt = 0;; ++attempt) {
    const double start = clock_.NowEpochSeconds();
    step_id_.clear();
    Report(Event(EventKind::kStarted, attempt));
    // Ends the step as soon as hpod has judged a node of it failed: the rest of
    // the decision below then finds the same verdict and retries.
    StepWatch watch;
    if (config_.watch_running_step) {
      watch = [this, since = start - 1] {
        StatusOr<HealthAnswer> a = Ask(since);
        return a.ok() && (a->verdict == Verdict::kRecovering || a->verdict == Verdict::kRecovered);
      };
    }
    StatusOr<RunResult> run = runner_.Run(attempt, watch);
    if (!run.ok()) {
      Error("cannot start the step: " + run.status().message());
      return Finish(attempt, 1, "cannot start the step: " + run.status().message());
    }
    step_id_ = run->step_id;
    const int rc = run->exit_code;
    if (run->ended_by_watch) {
      Info("a node of the step failed and hpod is recovering it: ending the step now");
    }
    JobEvent ended_event = Event(EventKind::kEnded, attempt);
    ended_event.exit_code = rc;
    Report(ended_event);
    if (run->user_signal != 0) {
      Info("step ended after the user's " + SignalText(run->user_signal) +
           " was forwarded to it: not retried");
      return Finish(attempt, rc, "cancelled by " + SignalText(run->user_signal));
    }

    const auto ended = clock_.SteadyNow();
    // One second of slack: the agent's clock and ours may disagree by a little, and
    // a recovery that began as the step started belongs to this attempt.
    const double since = start - 1;
    Info("Initiating communication with cluster agent to diagnose health of nodes");
    StatusOr<HealthAnswer> answer = Ask(since);
    // An agent that is busy, reconnecting to hpodd or slow to answer gets the grace
    // too: giving up at the first error would forgo a resume the job asked for.
    while (!answer.ok() && clock_.SteadyNow() - ended < config_.grace) {
      sleeper_.Sleep(config_.poll_interval);
      answer = Ask(since);
    }
    if (answer.ok() && answer->verdict == Verdict::kHealthy && rc != 0) {
      // The step may have failed because a peer died before the agent flagged it.
      // An error while re-asking keeps the healthy answer: it says nothing new.
      while (answer->verdict == Verdict::kHealthy && clock_.SteadyNow() - ended < config_.grace) {
        sleeper_.Sleep(config_.poll_interval);
        StatusOr<HealthAnswer> again = Ask(since);
        if (again.ok()) answer = std::move(again);
      }
    }
    if (!answer.ok()) {
      unreachable_shown_ = true;
      Error("cannot reach the cluster agent at " + agent_.Address() + ": " +
            answer.status().message() + "; keeping the step's exit code " + std::to_string(rc));
      return Finish(attempt, rc, "agent unreachable: " + answer.status().message());
    }

    const std::string response = "Response from cluster agent: JobId=" + config_.job_id;
    switch (answer->verdict) {
      case Verdict::kHealthy:
        Info(response + ", ResumeAction=NONE");
        if (rc != 0) {
          Info("step exited with " + std::to_string(rc) +
               " and every node is healthy: an application error, not retried");
          return Finish(attempt, rc, "application error on healthy nodes");
        }
        return Finish(attempt, rc, "step succeeded");
      case Verdict::kFailed: {
        Info(response + ", ResumeAction=NONE");
        std::string what =
            Join({DescribeNodes(*answer, NodeState::kFailed), answer->message}, ": ");
        Error("Job failed - nodes could not be recovered" + (what.empty() ? "" : ": " + what) +
              "; not retried");
        return Finish(attempt, rc != 0 ? rc : 1, "recovery failed: " + what);
      }
      case Verdict::kRecovering:
      case Verdict::kRecovered: {
        Info(response + ", ResumeAction=RETRYSTEP");
        int exit_code = 0;
        if (OnNodeFailure(attempt, rc, since, std::move(*answer), ended, &exit_code) ==
            Next::kStop) {
          return exit_code;
        }
        continue;
      }
    }
  }
}

// After the agent said the job's nodes are (being) recovered: wait for the recovery
// and decide whether to retry. On kStop, *exit_code is srun's exit code.
Session::Next Session::OnNodeFailure(int attempt, int rc, double since, HealthAnswer answer,
                                     std::chrono::steady_clock::time_point ended, int* exit_code) {
  const int failed_rc = rc != 0 ? rc : 1;
  std::string nodes = Join(
      {DescribeNodes(answer, NodeState::kRecovering), DescribeNodes(answer, NodeState::kRecovered)},
      ", ");
  Info("Job failed - replacing nodes " + (nodes.empty() ? answer.message : nodes));
  seen_.clear();
  ShowProgress(answer, ended);
  if (attempt >= config_.max_attempts) {
    Error("no attempts left: all " + std::to_string(config_.max_attempts) +
          " retries of --auto-resume=" + std::to_string(config_.max_attempts) +
          " used; not retried");
    *exit_code = Finish(attempt, failed_rc, "attempts exhausted");
    return Next::kStop;
  }
  bool wait_error_shown = false;
  while (answer.verdict == Verdict::kRecovering) {
    if (clock_.SteadyNow() - ended >= config_.recovery_timeout) {
      Error(
          "nodes still recovering after " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(config_.recovery_timeout).count()) +
          " s (HPOD_AUTO_RESUME_TIMEOUT_S); not retried");
      *exit_code = Finish(attempt, failed_rc, "recovery timed out");
      return Next::kStop;
    }
    sleeper_.Sleep(config_.poll_interval);
    StatusOr<HealthAnswer> next = Ask(since);
    if (!next.ok()) {
      // The agent may be restarting; keep waiting until the timeout.
      if (!wait_error_shown) {
        Error("cluster agent at " + agent_.Address() + ": " + next.status().message() +
              "; still waiting for the recovery");
        wait_error_shown = true;
        unreachable_shown_ = true;
      }
      continue;
    }
    answer = std::move(*next);
    ShowProgress(answer, ended);
    if (answer.verdict == Verdict::kFailed) {
      std::string what = Join({DescribeNodes(answer, NodeState::kFailed), answer.message}, ": ");
      Error("Job failed - nodes could not be recovered" + (what.empty() ? "" : ": " + what) +
            "; not retried");
      *exit_code = Finish(attempt, failed_rc, "recovery failed: " + what);
      return Next::kStop;
    }
  }
  // Recovered, or healthy again (the recovery is over and no longer counted).
  std::vector<std::string> ids;
  for (const auto& [name, n] : seen_) {
    if (n.recovery_id.empty()) continue;
    ids.push_back(n.recovery_id);
    all_recovery_ids_.push_back(n.recovery_id);
  }
  Info("Retrying step. Attempt number: " + std::to_string(attempt + 1));
  JobEvent e = Event(EventKind::kRetrying, attempt);
  e.exit_code = rc;
  e.recovery_ids = std::move(ids);
  Report(e);
  return Next::kRetry;
}

// Reads at most `max_bytes` from the end of the file; *whole says whether that was
// all of it.
StatusOr<std::string> ReadEnd(const std::string& path, std::size_t max_bytes, bool* whole) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("no ledger at " + path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return InternalError("cannot size " + path);
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  *whole = from == 0;
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace

int Supervise(const SupervisorConfig& config, AgentClient& agent, StepRunner& runner,
              const Clock& clock, Sleeper& sleeper, Output& out) {
  Session session(config, agent, runner, clock, sleeper, out);
  return session.Run();
}

void RealSleeper::Sleep(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

void StderrOutput::Line(std::string_view line) {
  std::string text(line);
  text += '\n';
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nothing left to tell
    off += static_cast<std::size_t>(n);
  }
}

std::string FormatLine(Severity severity, std::string_view job_id, std::string_view step_id,
                       std::string_view text) {
  std::string line = severity == Severity::kInfo ? "[Auto Resume] Info: " : "[Auto Resume] Error: ";
  line += "JobID: ";
  line += job_id;
  line += ' ';
  if (!step_id.empty()) {
    line += "StepID: ";
    line += step_id;
    line += ' ';
  }
  line += text;
  return line;
}

void AttachLedger(const std::string& path, JobEvent& event) {
  bool whole = false;
  StatusOr<std::string> text = ReadEnd(path, kMaxLedgerBytes, &whole);
  if (!text.ok()) return;
#if HPOD_SPANK_HAVE_GOODPUT
  if (whole) {
    StatusOr<goodput::Summary> summary = goodput::Summarize(*text);
    if (summary.ok()) {
      event.goodput = goodput::ToJson(*summary);
      return;
    }
  }
#endif
  // The raw tail, cut at a line boundary so that the agent never sees half an event.
  std::string& t = *text;
  if (t.size() > kMaxLedgerTailBytes) {
    std::size_t cut = t.size() - kMaxLedgerTailBytes;
    std::size_t nl = t.find('\n', cut == 0 ? 0 : cut - 1);
    t.erase(0, nl == std::string::npos ? t.size() : nl + 1);
  }
  event.ledger_tail = std::move(t);
}

}  // namespace hpod::spank
