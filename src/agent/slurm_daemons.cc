// SlurmNode: one supervised daemon's life (slurm_node.h, Daemon): start, stop,
// the pause before a restart, and the readiness each daemon is judged by.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "hpod/agent/slurm_node.h"
#include "hpod/base/subprocess.h"
#include "hpod/slurm/scontrol.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

// A daemon that ran this long before dying is restarted after the shortest pause.
constexpr std::chrono::seconds kStableRun{10};

}  // namespace

std::chrono::milliseconds SlurmNode::WaitToAvoid(const std::string& start_time) const {
  const double avoid = slurm::SlurmTimeEpoch(start_time);  // as slurmctld prints: local time
  if (avoid <= 0) return std::chrono::milliseconds(0);
  // slurmd stamps its start a few milliseconds after the fork, to the second: a
  // start in [avoid - 1, avoid + 1) could show `start_time` (the old row's), which
  // hpodd would take for the old slurmd's registration and wait on for ever.
  const double now = clock_.NowEpochSeconds();
  if (now < avoid - 1 || now >= avoid + 1) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(static_cast<int64_t>((avoid + 1 - now) * 1000) + 1);
}

Status SlurmNode::StartDaemon(Daemon& d) {
  // Before the fork: slurmd stamps its own start (SlurmdStartTime) later, when it
  // first registers, so on this clock this is never after it.
  const double epoch = clock_.NowEpochSeconds();
  auto p = Subprocess::Start(d.options);
  if (!p.ok()) return p.status();
  d.proc = std::move(*p);
  d.ready = false;
  d.failure.clear();
  d.started_at = clock_.SteadyNow();
  d.started_epoch = epoch;
  spdlog::info("started {} (pid {})", d.name, d.proc->pid());
  return OkStatus();
}

void SlurmNode::StopDaemon(Daemon& d) {
  if (!d.proc) return;
  // SIGTERM first: slurmctld saves its state on it, munged removes its socket.
  ::kill(d.proc->pid(), SIGTERM);
  if (!d.proc->Wait(std::chrono::seconds(10))) d.proc->Kill();
  d.proc->Wait(std::chrono::seconds(5));
  d.proc.reset();
  d.ready = false;
}

std::unique_ptr<SlurmNode::Daemon> SlurmNode::NewDaemon(std::string name) const {
  auto d = std::make_unique<Daemon>();
  d->name = std::move(name);
  // Not jittered: the wait is in the message the user sees as an event.
  d->backoff =
      Backoff({.initial = options_.restart_backoff_initial, .max = options_.restart_backoff_max});
  return d;
}

std::chrono::milliseconds SlurmNode::PauseBeforeRestart(Daemon& d,
                                                        std::chrono::steady_clock::time_point now) {
  std::chrono::milliseconds wait = d.backoff.Next();
  d.start_after = now + wait;
  return wait;
}

void SlurmNode::Supervise(Daemon& d) {
  const auto now = clock_.SteadyNow();
  if (d.proc) {
    if (auto code = d.proc->Wait(std::chrono::milliseconds(0))) {
      d.proc.reset();
      d.ready = false;
      // sshd is not Slurm: its restarts are logged, never the node's Slurm state
      // (a broken sshd must not hold a node out of Slurm).
      const bool slurm_daemon = &d != sshd_.get();
      if (slurm_daemon) ++restarts_;
      // A daemon that ran for a while starts over from the shortest pause; one
      // that keeps dying at once backs off (each restart is an event at hpodd).
      // (Measured at detection, which a settled node's 1 s tick may delay.)
      if (now - d.started_at >=
          std::max<std::chrono::milliseconds>(kStableRun, options_.restart_backoff_max)) {
        d.backoff.Reset();
      }
      std::chrono::milliseconds wait = PauseBeforeRestart(d, now);
      std::string why = *code > 128 ? "was killed by signal " + std::to_string(*code - 128)
                                    : "exited with code " + std::to_string(*code);
      std::string message = d.name + " " + why + "; restarting it in " +
                            std::to_string(wait.count()) + " ms (restart " +
                            std::to_string(restarts_) + ")";
      spdlog::warn("{}", message);
      if (slurm_daemon) SetState("restarting", message);
      return;
    }
  } else if (now >= d.start_after) {
    if (&d == daemon_.get() && applied_ && applied_->role == "compute") {
      if (auto wait = WaitToAvoid(applied_->avoid_start_time); wait.count() > 0) {
        d.start_after = now + wait;
        spdlog::info("starting slurmd in {} ms, outside {} (its predecessor's start)", wait.count(),
                     applied_->avoid_start_time);
        return;
      }
    }
    if (Status s = StartDaemon(d); !s.ok()) {
      PauseBeforeRestart(d, now);
      d.failure = std::string(s.message());
      if (&d == sshd_.get()) {
        spdlog::warn("cannot start sshd: {}", s.message());
      } else {
        SetState("failed", "cannot start " + d.name + ": " + std::string(s.message()));
      }
      return;
    }
  }
  if (!d.proc || d.ready) return;
  if (&d == munged_.get()) {
    d.ready = fs::exists(options_.run_dir + "/munge/munge.socket.2");
  } else if (&d == sshd_.get()) {
    d.ready = true;  // its own port; nothing of Slurm waits for it
  } else if (&d == mariadb_.get() || &d == slurmdbd_.get()) {
    d.ready = AccountingReady(d);
    if (!d.ready) return;
  } else if (applied_->role == "controller") {
    auto r = RunCommand({.argv = {options_.scontrol, "ping"},
                         .env = {{"SLURM_CONF", options_.conf_dir + "/slurm.conf"}},
                         .timeout = std::chrono::seconds(3)});
    d.ready = r.ok() && r->exit_code == 0 && r->stdout_data.find("UP") != std::string::npos;
  } else {
    // Whether slurmd registered is the controller's to say (hpodd asks it).
    d.ready = true;
  }
  // Running once every daemon of the role is up again (munged coming back under
  // a live slurmd ends a "restarting" too).
  if (d.ready && munged_->ready && (!daemon_ || daemon_->ready)) SetState("running", "");
}

}  // namespace hpod::agent
