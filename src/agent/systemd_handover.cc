#include "hpod/agent/systemd_handover.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/systemctl_shim.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kDropInName[] = "50-hpod-agent.conf";
// The first line of every file hpod writes here: only those are removed.
constexpr char kMarker[] = "# hpod-agent tenure:";

std::string DropInPath(const SystemdHandoverOptions& o, std::string_view unit) {
  return o.unit_dir + "/" + std::string(unit) + ".service.d/" + kDropInName;
}

std::string UnitFilePath(const SystemdHandoverOptions& o, std::string_view unit) {
  return o.unit_dir + "/" + std::string(unit) + ".service";
}

bool OursAt(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() && text->rfind(kMarker, 0) == 0;
}

// A stop waits for ExecStop (the agent's answer, seconds at most).
constexpr std::chrono::seconds kSystemctlTimeout{60};

std::vector<std::string> Argv(const SystemdHandoverOptions& o, std::vector<std::string> args) {
  args.insert(args.begin(), o.systemctl);
  return args;
}

// systemctl's one-line answer ("active", "not-found"), trimmed, whatever its
// exit status (is-active says "inactive" with 3).
std::string Ask(const SystemdHandoverOptions& o, std::vector<std::string> args) {
  SubprocessOptions run;
  run.argv = Argv(o, std::move(args));
  run.timeout = kSystemctlTimeout;
  auto r = RunCommand(run);
  if (!r.ok()) return "";
  std::string out = r->stdout_data;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// A change; its failure names the command and systemctl's last line.
Status Run(const SystemdHandoverOptions& o, std::vector<std::string> args) {
  return RunChecked(Argv(o, std::move(args)), kSystemctlTimeout).status();
}

}  // namespace

bool SystemdRunsThisMachine(const std::string& marker) {
  std::error_code ec;
  return fs::is_directory(marker, ec);
}

std::string HandoverDropIn(std::string_view unit, const SystemdHandoverOptions& o) {
  const std::string u(unit);
  auto command = [&](const char* verb) {
    return o.agent_program + " systemd-unit " + verb + " " + u + " --socket " + o.socket + "\n";
  };
  // Every setting of Debian's units (and HyperPod's AMI's) that would act on
  // the daemon itself is reset: the conditions on /etc/slurm (hpod's config is
  // elsewhere), the user (the agent's socket takes root's requests only), the
  // runtime directory (munge's stop would remove the socket hpod's munged
  // serves), the pid file and the restart policy (the agent restarts the daemon).
  return std::string(kMarker) + " this host serves an hpod node, and hpod's agent runs " + u +
         " (docs/systemctl.md, \"Pool hosts\").\n"
         "# This unit asks the agent and copies the daemon's log to the journal. The agent\n"
         "# removes this file when the node leaves the host.\n"
         "[Unit]\n"
         "ConditionPathExists=\n"
         "After=hpod-agent.service\n\n"
         "[Service]\n"
         "Type=notify\n"
         "NotifyAccess=main\n"
         "User=root\n"
         "Group=root\n"
         "EnvironmentFile=\n"
         "PIDFile=\n"
         "RuntimeDirectory=\n"
         "ExecStartPre=\n"
         "ExecStartPost=\n"
         "ExecStart=\n"
         "ExecStart=" +
         command("start") +
         "ExecStop=\n"
         "ExecStop=" +
         command("stop") +
         "ExecStopPost=\n"
         "ExecReload=\n"
         "ExecReload=" +
         command("reload") +
         "Restart=no\n"
         // A start waits for the daemon: a worker's slurmd for its controller,
         // slurmctld for MariaDB's first setup. 15 minutes covers a controller's
         // lifecycle script; past it the start fails (hpod still runs the daemon,
         // and the unit follows it again when it is up).
         "TimeoutStartSec=900\n";
}

namespace {

// The state file: for each unit, "seen UNIT" once its state before the first
// handover is recorded, with "active UNIT" and "enabled UNIT" when it ran and
// was enabled then. Written before the unit is touched, so a handover that
// fails half-way still knows what to give back.
std::set<std::string> ReadRemembered(const std::string& path) {
  std::set<std::string> out;
  if (auto text = ReadFile(path); text.ok()) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.insert(line);
  }
  return out;
}

Status WriteRemembered(const std::string& path, const std::set<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return WriteFileAtomic(path, text, 0644);
}

// systemctl is-active's words for a unit that runs or is coming up.
bool Running(const std::string& is_active) {
  return is_active == "active" || is_active == "activating" || is_active == "reloading";
}

bool Enabled(const std::string& is_enabled) {
  return is_enabled == "enabled" || is_enabled == "enabled-runtime";
}

// HyperPod's AMI has Slurm's unit files in /etc/systemd/system, and AWS's
// start_slurm.sh reads slurmd.service there to fill $SLURMD_OPTIONS.
std::string AmiUnitFile(std::string_view unit) {
  return std::string(kMarker) +
         " written where HyperPod's AMI has this file while this host\n"
         "# serves an hpod node. hpod's agent runs the daemon (" +
         std::string(unit) + ".service.d/" + kDropInName +
         "),\n# so edits to ExecStart do not change it. Removed "
         "when the node leaves the host.\n" +
         UnitFileBody(std::string(unit));
}

}  // namespace

Status HandOverUnits(const SystemdHandoverOptions& o) {
  if (o.agent_program.empty() || o.agent_program[0] != '/') {
    return FailedPreconditionError("the agent's own program path is unknown ('" + o.agent_program +
                                   "'): no unit can ask it");
  }
  std::set<std::string> remembered = ReadRemembered(o.state_file);
  for (std::string_view unit : kHandedUnits) {
    const std::string u(unit), dropin = DropInPath(o, unit);
    if (OursAt(dropin)) continue;  // handed over already (an agent restart, a reboot)
    const std::string service = u + ".service";
    const bool was_running = Running(Ask(o, {"is-active", service}));
    if (!remembered.count("seen " + u)) {
      remembered.insert("seen " + u);
      if (was_running) remembered.insert("active " + u);
      if (Enabled(Ask(o, {"is-enabled", service}))) remembered.insert("enabled " + u);
      HPOD_RETURN_IF_ERROR(WriteRemembered(o.state_file, remembered));
    }
    if (was_running) {
      // Debian's munged holds the socket hpod's needs; a daemon of the machine's
      // own Slurm would serve another cluster.
      spdlog::info("stopping the machine's {} while it serves the node (started again after)",
                   service);
      HPOD_RETURN_IF_ERROR(Run(o, {"stop", service}));
    }
    std::error_code ec;
    if (unit != "munge" && !fs::exists(UnitFilePath(o, unit), ec)) {
      HPOD_RETURN_IF_ERROR(WriteFileAtomic(UnitFilePath(o, unit), AmiUnitFile(unit), 0644));
    } else if (unit == "munge" &&
               Ask(o, {"show", "-p", "LoadState", "--value", service}) == "not-found") {
      HPOD_RETURN_IF_ERROR(WriteFileAtomic(UnitFilePath(o, unit),
                                           std::string(kMarker) + " no " + service +
                                               " was installed; removed when the node leaves.\n"
                                               "[Unit]\nDescription=MUNGE authentication "
                                               "service\n\n[Install]\nWantedBy=multi-user.target\n",
                                           0644));
    }
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(dropin, HandoverDropIn(unit, o), 0644));
  }
  // Every time, not only after a write: a handover that failed before its
  // reload left drop-ins systemd has not read.
  return Run(o, {"daemon-reload"});
}

void ShowHandedUnitActive(const std::string& systemctl, const std::string& unit) {
  if (std::find(std::begin(kHandedUnits), std::end(kHandedUnits), unit) == std::end(kHandedUnits))
    return;
  // --no-block: the unit's start asks the agent, which answers on another
  // thread; an active unit is left as it is.
  if (auto r = RunChecked({systemctl, "start", "--no-block", unit + ".service"},
                          std::chrono::seconds(10));
      !r.ok()) {
    spdlog::warn("systemd does not show {}.service as hpod's: {}", unit, r.status().message());
  }
}

Status ReturnUnits(const SystemdHandoverOptions& o) {
  Status first = OkStatus();
  auto note = [&first](Status s) {
    if (s.ok()) return;
    spdlog::warn("handing the machine's units back: {}", s.message());
    if (first.ok()) first = s;
  };
  const std::set<std::string> remembered = ReadRemembered(o.state_file);
  bool changed = false;
  std::vector<std::string> services;
  for (std::string_view unit : kHandedUnits) {
    const std::string u(unit), dropin = DropInPath(o, unit), service = u + ".service";
    services.push_back(service);
    if (!OursAt(dropin)) continue;
    // Its main process follows an agent that has stopped: the stop only ends it
    // (ExecStop finds no agent and has nothing to do).
    note(Run(o, {"stop", service}));
    // The machine's enable state before the tenure, whatever a script did.
    if (remembered.count("seen " + u)) {
      const bool before = remembered.count("enabled " + u) > 0;
      if (Enabled(Ask(o, {"is-enabled", service})) != before) {
        note(Run(o, {before ? "enable" : "disable", service}));
      }
    }
    std::error_code ec;
    fs::remove(dropin, ec);
    if (ec) note(InternalError("cannot remove " + dropin + ": " + ec.message()));
    fs::remove(fs::path(dropin).parent_path(), ec);  // only when empty
    changed = true;
  }
  // hpod's unit files, and copies of them a script moved aside (start_slurm.sh's
  // slurmd_DO_NOT_START_ON_CONTROLLER.service): each begins with the marker.
  std::error_code ec;
  for (fs::directory_iterator it(o.unit_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type;
    if (!it->is_symlink(type) && it->is_regular_file(type) && OursAt(it->path().string())) {
      fs::remove(it->path(), type);
      if (type) note(InternalError("cannot remove " + it->path().string() + ": " + type.message()));
      changed = true;
    }
  }
  if (changed) {
    note(Run(o, {"daemon-reload"}));
    std::vector<std::string> reset = {"reset-failed"};
    reset.insert(reset.end(), services.begin(), services.end());
    (void)Run(o, reset);  // these units only: the machine's other failures stay
  }
  for (std::string_view unit : kHandedUnits) {
    if (!remembered.count("active " + std::string(unit))) continue;
    spdlog::info("starting the machine's {}.service again", unit);
    note(Run(o, {"start", std::string(unit) + ".service"}));
  }
  if (first.ok()) fs::remove(o.state_file, ec);  // kept for a retry otherwise
  return first;
}

}  // namespace hpod::agent
