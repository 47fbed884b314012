// SlurmNode: the node's daemons as units (units.h) — what hpod and the node's
// systemctl want running, and the states systemctl reports.
//
// The rule (docs/systemctl.md): munged and sshd run from the moment the node has
// its Slurm role, as on HyperPod's AMI where they are enabled at boot. slurmctld
// or slurmd (and, with accounting, MariaDB and slurmdbd) run once the lifecycle
// scripts succeeded and hpodd does not hold the node, or as soon as the node's
// systemctl starts them (a started slurmctld pulls in slurmdbd and MariaDB, as
// its unit's Requires= would). A unit systemctl stopped stays stopped until
// systemctl starts it again or the node reboots (the agent restarts).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "hpod/agent/slurm_node.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

std::string_view DescriptionOf(const std::string& unit) {
  if (unit == "munge") return "MUNGE authentication service";
  if (unit == "sshd") return "OpenBSD Secure Shell server";
  if (unit == "mariadb") return "MariaDB database server";
  if (unit == "slurmdbd") return "Slurm DBD accounting daemon";
  if (unit == "slurmctld") return "Slurm controller daemon";
  return "Slurm node daemon";
}

bool StartLike(UnitVerb verb, bool now) {
  return verb == UnitVerb::kStart || verb == UnitVerb::kRestart ||
         (verb == UnitVerb::kEnable && now);
}
bool StopLike(UnitVerb verb, bool now) {
  return verb == UnitVerb::kStop || (verb == UnitVerb::kDisable && now);
}

// Why `unit` cannot run on a node with `spec` ("" when it can).
std::string NotHere(const std::string& unit, const SlurmSpec& spec) {
  if (spec.role == "none") return "this hpod cluster has no Slurm";
  const std::string role = "this node is the cluster's " + spec.role;
  if (unit == "munge") return "";
  if (unit == "sshd") return spec.ssh_host_key.empty() ? "hpod runs no sshd on this node" : "";
  if (unit == "slurmctld")
    return spec.role == "controller" ? "" : role + " (slurmctld runs on the controller)";
  if (unit == "slurmd")
    return spec.role == "compute" ? "" : role + " (hpod runs slurmd on compute nodes)";
  // mariadb, slurmdbd
  if (spec.role != "controller") return role + " (" + unit + " runs on the controller)";
  return spec.accounting ? ""
                         : "hpodd runs this cluster without accounting (hpodd "
                           "--slurm-accounting; docs/slurm.md)";
}

}  // namespace

void SlurmNode::SetAutoStart(bool on) {
  MutexLock lock(mu_);
  if (auto_start_ == on) return;
  auto_start_ = on;
  poked_ = true;
  cv_.notify_all();
}

bool SlurmNode::WaitForRole(std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  lock.WaitFor(cv_, timeout, [&]() REQUIRES(mu_) {
    return stopping_ || waits_cancelled_ || !state_.role.empty();
  });
  return !state_.role.empty();
}

void SlurmNode::CancelWaits() {
  MutexLock lock(mu_);
  waits_cancelled_ = true;
  cv_.notify_all();
}

StatusOr<std::vector<UnitState>> SlurmNode::ControlUnits(const UnitRequest& request) {
  const bool start = StartLike(request.verb, request.now);
  const bool stop = StopLike(request.verb, request.now);
  if (request.verb == UnitVerb::kQuery && request.wait_ms == 0) {
    // What the last pass published, without poking the worker: a pool host's
    // handed units ask every second (systemd_unit.h), and the worker publishes
    // on its own tick anyway.
    MutexLock lock(mu_);
    return PublishedUnits(request.units);
  }
  MutexLock lock(mu_);
  if (stopping_ || waits_cancelled_) return UnavailableError("the hpod agent is stopping");
  if ((start || request.verb == UnitVerb::kReload) && desired_) {
    for (const std::string& unit : request.units) {
      if (std::string why = NotHere(unit, *desired_); !why.empty()) {
        return FailedPreconditionError(unit + ".service does not run on this node: " + why);
      }
    }
  }
  if (request.verb == UnitVerb::kReload) {
    for (const std::string& unit : request.units) {
      auto it = units_.find(unit);
      if (it == units_.end() || it->second.pid == 0) {
        return FailedPreconditionError("Unit " + unit + ".service is not active, cannot reload.");
      }
      reload_requests_.insert(unit);
    }
  }
  std::set<std::string> targets(request.units.begin(), request.units.end());
  if (start) {
    // What a started daemon needs starts too, as its unit's Requires= would:
    // slurmctld needs slurmdbd (with accounting), slurmdbd needs MariaDB.
    if (targets.count("slurmctld") && desired_ && desired_->accounting) targets.insert("slurmdbd");
    if (targets.count("slurmdbd")) targets.insert("mariadb");
  }
  for (const std::string& unit : targets) {
    const bool asked =
        std::find(request.units.begin(), request.units.end(), unit) != request.units.end();
    if (asked && request.verb == UnitVerb::kEnable) disabled_.erase(unit);
    if (asked && request.verb == UnitVerb::kDisable) disabled_.insert(unit);
    if (start) {
      intents_[unit] = UnitIntent::kStart;
      kick_requests_.insert(unit);
    }
    if (stop && asked) intents_[unit] = UnitIntent::kStop;
    if (asked && request.verb == UnitVerb::kRestart) restart_requests_.insert(unit);
  }
  const uint64_t version = ++wish_version_;
  poked_ = true;
  cv_.notify_all();
  auto cancelled = [&]() REQUIRES(mu_) { return stopping_ || waits_cancelled_; };
  // First a pass that read this request (at most 2 s, or the request's wait if
  // longer: a worker busy starting a daemon answers late, never wrongly)...
  lock.WaitFor(cv_, std::chrono::milliseconds(std::max<int64_t>(request.wait_ms, 2000)),
               [&]() REQUIRES(mu_) { return cancelled() || published_version_ >= version; });
  // ... then, for a start or stop, its outcome.
  auto done = [&]() REQUIRES(mu_) {
    if (cancelled()) return true;
    for (const std::string& unit : request.units) {
      auto it = units_.find(unit);
      if (it == units_.end()) return false;
      if (start && it->second.active != "active" && it->second.active != "failed") return false;
      if (stop && it->second.pid != 0) return false;
    }
    return true;
  };
  if (start || stop) lock.WaitFor(cv_, std::chrono::milliseconds(request.wait_ms), done);
  return PublishedUnits(request.units);
}

std::vector<UnitState> SlurmNode::PublishedUnits(const std::vector<std::string>& units) const {
  std::vector<UnitState> out;
  if (units.empty()) {
    for (std::string_view name : kUnitNames) {
      auto it = units_.find(std::string(name));
      if (it != units_.end()) out.push_back(it->second);
    }
  } else {
    for (const std::string& unit : units) {
      auto it = units_.find(unit);
      UnitState s;
      s.name = unit;
      out.push_back(it != units_.end() ? it->second : s);
    }
  }
  return out;
}

SlurmNode::Wanted SlurmNode::ComputeWanted(const UnitWishes& wishes) const {
  Wanted w;
  if (!applied_ || applied_->role == "none") return Wanted{};
  const std::string main_unit = applied_->role == "controller" ? "slurmctld" : "slurmd";
  auto by_hpod = [&](const std::string& unit, bool hpod_wants) {
    UnitIntent i = wishes.Of(unit);
    return i == UnitIntent::kStart || (i == UnitIntent::kAuto && hpod_wants);
  };
  w.munged = wishes.Of("munge") != UnitIntent::kStop;
  w.sshd = wishes.Of("sshd") != UnitIntent::kStop;
  // hpodd's hold keeps a daemon from starting; it never stops one that runs (a
  // message held by mistake must not take a worker out of Slurm).
  const bool running = daemon_ && daemon_->proc;
  w.main = daemon_ && by_hpod(main_unit, wishes.auto_start && (!applied_->hold || running));
  const bool ctld = applied_->role == "controller" && w.main;
  w.slurmdbd = slurmdbd_ && by_hpod("slurmdbd", wishes.auto_start || ctld);
  w.mariadb = mariadb_ && by_hpod("mariadb", wishes.auto_start || w.slurmdbd);
  return w;
}

SlurmNode::Daemon* SlurmNode::DaemonOf(const std::string& unit) const {
  if (!applied_ || applied_->role == "none") return nullptr;
  if (unit == "munge") return munged_.get();
  if (unit == "sshd") return sshd_.get();
  if (unit == "mariadb") return mariadb_.get();
  if (unit == "slurmdbd") return slurmdbd_.get();
  if (unit == "slurmctld") return applied_->role == "controller" ? daemon_.get() : nullptr;
  if (unit == "slurmd") return applied_->role == "compute" ? daemon_.get() : nullptr;
  return nullptr;
}

bool SlurmNode::WantedUnit(const std::string& unit, const Wanted& wanted) const {
  if (unit == "munge") return wanted.munged;
  if (unit == "sshd") return wanted.sshd;
  if (unit == "mariadb") return wanted.mariadb;
  if (unit == "slurmdbd") return wanted.slurmdbd;
  return wanted.main;
}

void SlurmNode::Keep(Daemon& d, bool wanted) {
  if (wanted) return Supervise(d);
  if (!d.proc) return;
  spdlog::info("stopping {}: the node's systemctl stopped it", d.name);
  StopDaemon(d);
  // A later start is a fresh one, at once.
  d.start_after = {};
  d.backoff.Reset();
}

void SlurmNode::RestartRequested(const UnitWishes& wishes) {
  for (const std::string& unit : wishes.restarts) {
    Daemon* d = DaemonOf(unit);
    if (d == nullptr || !d->proc) continue;
    spdlog::info("restarting {}: the node's systemctl asked", d->name);
    StopDaemon(*d);
    d->start_after = {};
    d->backoff.Reset();
  }
}

void SlurmNode::StartRequested(const UnitWishes& wishes) {
  for (const std::string& unit : wishes.kicks) {
    Daemon* d = DaemonOf(unit);
    if (d == nullptr || d->proc) continue;
    // Started now: not after the rest of a crash's pause, and a failure before
    // this start is not its outcome.
    d->start_after = {};
    d->backoff.Reset();
    d->failure.clear();
  }
  for (const std::string& unit : wishes.reloads) {
    Daemon* d = DaemonOf(unit);
    if (d == nullptr || !d->proc) continue;
    spdlog::info("reloading {} (SIGHUP): the node's systemctl asked", d->name);
    ::kill(d->proc->pid(), SIGHUP);
  }
}

std::vector<std::string> SlurmNode::LogsOf(const std::string& unit) const {
  const std::string& log = options_.log_dir;
  if (unit == "munge") return {log + "/munge/munged.log", log + "/munge/munged.out"};
  if (unit == "sshd") return {log + "/sshd.log"};
  if (unit == "mariadb") return {options_.accounting.log_dir + "/mariadbd.out"};
  return {log + "/slurm/" + unit + ".log", log + "/slurm/" + unit + ".out"};
}

UnitState SlurmNode::UnitStateOf(const std::string& unit, const UnitWishes& wishes,
                                 const Wanted& wanted) const {
  UnitState u;
  u.name = unit;
  u.description = DescriptionOf(unit);
  u.enabled = wishes.disabled.count(unit) == 0;
  u.logs = LogsOf(unit);
  const UnitIntent intent = wishes.Of(unit);
  u.stopped = intent == UnitIntent::kStop;
  const Daemon* d = DaemonOf(unit);
  if (d == nullptr) {
    if (!applied_ && intent == UnitIntent::kStart) {
      u.active = "activating";
      u.sub = "start-pending";
      u.message = "waiting for hpodd to send this node its Slurm configuration";
    } else if (applied_) {
      u.message = "does not run on this node: " + NotHere(unit, *applied_);
    }
    return u;
  }
  if (d->proc) {
    u.pid = d->proc->pid();
    u.active = d->ready ? "active" : "activating";
    u.sub = d->ready ? "running" : "start-pending";
  } else if (WantedUnit(unit, wanted)) {
    const bool pausing = clock_.SteadyNow() < d->start_after;
    if (!d->failure.empty()) {
      u.active = "failed";
      u.sub = "auto-restart";
      u.message = d->failure;
    } else {
      u.active = "activating";
      u.sub = pausing ? "auto-restart" : "start-pending";
      if (!pausing) u.message = "waiting for the daemons it needs (munge, slurmdbd, MariaDB)";
    }
  } else if (intent == UnitIntent::kStop) {
    u.message = "stopped by systemctl; hpod does not start it until `systemctl start " + unit + "`";
  } else if (applied_->hold) {
    u.message = "held by hpodd until the controller's slurmctld runs this configuration";
  } else {
    u.message = "hpod starts it once the node's lifecycle scripts succeeded; `systemctl start " +
                unit + "` starts it now";
  }
  return u;
}

void SlurmNode::PublishUnits(const UnitWishes& wishes, const Wanted& wanted) {
  std::map<std::string, UnitState> next;
  for (std::string_view name : kUnitNames) {
    std::string unit(name);
    next[unit] = UnitStateOf(unit, wishes, wanted);
  }
  const double now = clock_.NowEpochSeconds();
  std::vector<std::string> became_active;
  {
    MutexLock lock(mu_);
    for (auto& [unit, state] : next) {
      auto before = units_.find(unit);
      const bool same = before != units_.end() && before->second.active == state.active;
      state.since = same ? before->second.since : now;
      if (!same && state.active == "active" && wishes.Of(unit) != UnitIntent::kStop) {
        became_active.push_back(unit);
      }
    }
    units_ = std::move(next);
    published_version_ = std::max(published_version_, wishes.version);
    cv_.notify_all();
  }
  if (options_.on_unit_active) {
    for (const std::string& unit : became_active) {
      {
        // A systemctl stop that came during this pass wins over the callback's start.
        MutexLock lock(mu_);
        auto it = intents_.find(unit);
        if (it != intents_.end() && it->second == UnitIntent::kStop) continue;
      }
      options_.on_unit_active(unit);
    }
  }
}

}  // namespace hpod::agent
