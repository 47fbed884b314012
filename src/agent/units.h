#pragma once

// `systemctl` and `journalctl` on a node whose PID 1 is not systemd (a local
// provider's node: docs/systemctl.md). HyperPod's lifecycle scripts start Slurm
// with `systemctl enable --now slurmctld`, wait on `systemctl is-active slurmdbd`
// and read `journalctl -u slurmd`; on such a node those commands reach the agent,
// which runs the daemons anyway (slurm_node.h), so a script's start and hpod's
// are one and the same process and never fight.
//
// The pieces: the unit names the agent answers for (aliases included), the
// request a client sends over the agent's local socket (local_socket.h) and the
// state it gets back; the client side (hpod-agent started as `systemctl` or
// `journalctl`) is systemctl_shim.h.
//
// Thread contract: plain values and pure functions.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

// The units, by their canonical names.
inline constexpr std::string_view kUnitNames[] = {"munge",    "sshd",      "mariadb",
                                                  "slurmdbd", "slurmctld", "slurmd"};

// "slurmd.service" → "slurmd", "ssh" → "sshd", "mysql"/"mysqld" → "mariadb",
// "munged" → "munge"; nullopt for a unit the agent does not run.
std::optional<std::string> CanonicalUnit(std::string_view name);

// What a user asked for a unit, kept by the agent until the node's next boot.
enum class UnitIntent {
  kAuto,   // hpod decides (it starts Slurm once the lifecycle scripts succeeded)
  kStart,  // `systemctl start|restart|enable --now`: runs from now on
  kStop,   // `systemctl stop|disable --now`: hpod does not start it again
};

// The verbs that reach the agent. The client answers daemon-reload,
// reset-failed and the like itself (there is nothing to reload).
// kReload sends the running daemon SIGHUP (the units' ExecReload).
enum class UnitVerb { kStart, kStop, kRestart, kReload, kEnable, kDisable, kQuery };
std::optional<UnitVerb> ParseUnitVerb(std::string_view verb);
std::string_view UnitVerbName(UnitVerb verb);

// {"units_request":{"verb":"start","units":["slurmd"],"now":false,"wait_ms":30000}}
struct UnitRequest {
  UnitVerb verb = UnitVerb::kQuery;
  std::vector<std::string> units;  // canonical names; empty with kQuery: all
  bool now = false;                // enable/disable --now
  // How long start/stop/restart wait for the unit to be active (ready) or dead.
  // A query with 0 answers from the worker's last pass without waiting for one.
  int64_t wait_ms = 30000;

  nlohmann::json ToJson() const;
  // kInvalidArgument for a malformed request or a unit the agent does not run
  // (the message is systemctl's: "Unit foo.service not found.").
  static StatusOr<UnitRequest> FromJson(const nlohmann::json& j);
};

struct UnitState {
  std::string name;
  std::string description;
  // systemd's words: active | activating | deactivating | inactive | failed.
  std::string active = "inactive";
  // running | start-pending (waiting on hpod or a dependency) | auto-restart | dead
  std::string sub = "dead";
  bool enabled = true;
  // A systemctl stop holds it (UnitIntent::kStop): hpod does not start it. An
  // inactive unit that is not `stopped` is one hpod has yet to start.
  bool stopped = false;
  int64_t pid = 0;
  double since = 0;  // epoch seconds of the last change of `active`
  // Why it is not running, when hpod holds it ("waiting for the lifecycle
  // scripts to succeed") or it failed.
  std::string message;
  // The files `journalctl -u` reads; the last is the daemon's stdout and stderr
  // (what a pool host's journal gets: systemd_unit.h).
  std::vector<std::string> logs;

  nlohmann::json ToJson() const;
  static StatusOr<UnitState> FromJson(const nlohmann::json& j);
  bool operator==(const UnitState&) const = default;
};

// The answer: {"units":[UnitState…]} or {"error":"…"} (local_socket.h).
nlohmann::json UnitsAnswer(const std::vector<UnitState>& units);

}  // namespace hpod::agent
