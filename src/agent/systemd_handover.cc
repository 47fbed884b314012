#include "hpod/agent/systemd_handover.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>
#include <sstream>

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

StatusOr<SubprocessResult> Systemctl(const SystemdHandoverOptions& o,
                                     std::vector<std::string> args) {
  args.insert(args.begin(), o.systemctl);
  // A stop waits for ExecStop (the agent's answer, seconds at most).
  SubprocessOptions run;
  run.argv = std::move(args);
  run.timeout = std::chrono::seconds(60);
  return RunCommand(run);
}

// systemctl's one-line answer ("active", "not-found"), trimmed.
std::string Ask(const SystemdHandoverOptions& o, std::vector<std::string> args) {
  auto r = Systemctl(o, std::move(args));
  if (!r.ok()) return "";
  std::string out = r->stdout_data;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Status Run(const SystemdHandoverOptions& o, std::vector<std::string> args) {
  const std::string what = "systemctl " + [&] {
    std::string s;
    for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
    return s;
  }();
  auto r = Systemctl(o, std::move(args));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    std::string err = r->stderr_data.empty() ? r->stdout_data : r->stderr_data;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return InternalError(
        what + ": " +
        (err.empty() ? "exit " + std::to_string(r->exit_code) : err.substr(err.rfind('\n') + 1)));
  }
  return OkStatus();
}

std::string Description(std::string_view unit) {
  if (unit == "munge") return "MUNGE authentication service";
  if (unit == "slurmdbd") return "Slurm DBD accounting daemon";
  if (unit == "slurmctld") return "Slurm controller daemon";
  return "Slurm node daemon";
}

}  // namespace

bool SystemdRunsThisMachine(const std::string& marker) {
  std::error_code ec;
  return fs::is_directory(marker, ec);
}

std::string HandoverDropIn(std::string_view unit, const SystemdHandoverOptions& o) {
  const std::string u(unit), program = o.agent_program, socket = o.socket;
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
         program + " systemd-unit start " + u + " --socket " + socket +
         "\n"
         "ExecStop=\n"
         "ExecStop=" +
         program + " systemd-unit stop " + u + " --socket " + socket +
         "\n"
         "ExecStopPost=\n"
         "ExecReload=\n"
         "ExecReload=" +
         program + " systemd-unit reload " + u + " --socket " + socket +
         "\n"
         "Restart=no\n"
         // A start waits for hpodd's configuration (a worker for its controller)
         // and, at boot, for the agent to come up.
         "TimeoutStartSec=infinity\n";
}

namespace {

// The state file: "active UNIT" and "enabled UNIT" lines for what the machine
// ran and enabled before its first handover.
std::set<std::string> ReadRemembered(const std::string& path) {
  std::set<std::string> out;
  if (auto text = ReadFile(path); text.ok()) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.insert(line);
  }
  return out;
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
  std::set<std::string> remembered = ReadRemembered(o.state_file);
  bool changed = false;
  for (std::string_view unit : kHandedUnits) {
    const std::string u(unit), dropin = DropInPath(o, unit);
    if (OursAt(dropin)) continue;  // handed over already (an agent restart, a reboot)
    const std::string service = u + ".service";
    if (Ask(o, {"is-active", service}) == "active") {
      // Debian's munged holds the socket hpod's needs; a daemon of the machine's
      // own Slurm would serve another cluster.
      spdlog::info("stopping the machine's {} while it serves the node (started again after)",
                   service);
      if (Status s = Run(o, {"stop", service}); !s.ok()) return s;
      remembered.insert("active " + u);
    }
    if (Ask(o, {"is-enabled", service}) == "enabled") remembered.insert("enabled " + u);
    std::error_code ec;
    if (unit != "munge" && !fs::exists(UnitFilePath(o, unit), ec)) {
      HPOD_RETURN_IF_ERROR(WriteFileAtomic(UnitFilePath(o, unit), AmiUnitFile(unit), 0644));
    } else if (unit == "munge" &&
               Ask(o, {"show", "-p", "LoadState", "--value", service}) == "not-found") {
      HPOD_RETURN_IF_ERROR(WriteFileAtomic(UnitFilePath(o, unit),
                                           std::string(kMarker) + " no " + service +
                                               " was installed; removed when the node leaves.\n"
                                               "[Unit]\nDescription=" +
                                               Description(unit) +
                                               "\n\n[Install]\nWantedBy=multi-user.target\n",
                                           0644));
    }
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(dropin, HandoverDropIn(unit, o), 0644));
    changed = true;
  }
  std::string state;
  for (const std::string& line : remembered) state += line + "\n";
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(o.state_file, state, 0644));
  if (changed) HPOD_RETURN_IF_ERROR(Run(o, {"daemon-reload"}));
  return OkStatus();
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
  for (std::string_view unit : kHandedUnits) {
    const std::string u(unit), dropin = DropInPath(o, unit);
    if (!OursAt(dropin)) continue;
    const std::string service = u + ".service";
    // Its main process follows an agent that has stopped: the stop only ends it
    // (ExecStop finds no agent and has nothing to do).
    note(Run(o, {"stop", service}));
    // An enable of the tenure's (a script's `enable --now`) goes with it.
    if (!remembered.count("enabled " + u) && Ask(o, {"is-enabled", service}) == "enabled") {
      note(Run(o, {"disable", service}));
    }
    std::error_code ec;
    fs::remove(dropin, ec);
    if (ec) note(InternalError("cannot remove " + dropin + ": " + ec.message()));
    fs::remove(fs::path(dropin).parent_path(), ec);  // only when empty
    if (OursAt(UnitFilePath(o, unit))) fs::remove(UnitFilePath(o, unit), ec);
    changed = true;
  }
  // Copies of hpod's files a script moved aside (start_slurm.sh's
  // slurmd_DO_NOT_START_ON_CONTROLLER.service) carry the marker too.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.unit_dir, ec)) {
    std::error_code type;
    if (!e.is_symlink(type) && e.is_regular_file(type) && OursAt(e.path().string())) {
      fs::remove(e.path(), type);
      changed = true;
    }
  }
  if (changed) {
    note(Run(o, {"daemon-reload"}));
    (void)Systemctl(o, {"reset-failed"});
  }
  for (std::string_view unit : kHandedUnits) {
    if (!remembered.count("active " + std::string(unit))) continue;
    spdlog::info("starting the machine's {}.service again", unit);
    note(Run(o, {"start", std::string(unit) + ".service"}));
  }
  fs::remove(o.state_file, ec);
  return first;
}

}  // namespace hpod::agent
