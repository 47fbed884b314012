#include "hpod/agent/systemd_unit.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hpod/agent/local_socket.h"
#include "hpod/agent/systemctl_shim.h"
#include "hpod/agent/units.h"
#include "hpod/base/sd_notify.h"

namespace hpod::agent {
namespace {

constexpr auto kPoll = std::chrono::seconds(1);

// hpod's sd_notify (base/sd_notify.h): a no-op outside systemd; a lost datagram
// only leaves systemd's view of the unit behind.
void Notify(const std::string& text) { (void)SdNotify(text); }

void WriteAll(int fd, const std::string& data) {
  for (size_t off = 0; off < data.size();) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// The daemon's log files, copied from where the follower last read them.
class LogCopier {
 public:
  // Starts at the files' current ends: what comes after the start request.
  void Mark(const std::vector<std::string>& logs) {
    for (const std::string& log : logs) offsets_.emplace(log, SizeOf(log));
  }
  void Copy(const std::vector<std::string>& logs) {
    for (const std::string& log : logs) {
      auto [it, fresh] = offsets_.emplace(log, 0);
      const uint64_t size = SizeOf(log);
      if (size < it->second) it->second = 0;  // rotated or truncated
      if (size == it->second) continue;
      std::ifstream in(log, std::ios::binary);
      if (!in) continue;
      in.seekg(static_cast<std::streamoff>(it->second));
      // At most kChunk a pass: a daemon that floods its log is copied over
      // several passes, never in one allocation of the whole file.
      std::string chunk(std::min<uint64_t>(size - it->second, kChunk), '\0');
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      chunk.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
      // Whole lines only: the rest waits for its newline (or for a full chunk).
      size_t end = chunk.rfind('\n');
      if (end == std::string::npos) {
        if (chunk.size() < kChunk) continue;
        end = chunk.size() - 1;
      }
      WriteAll(STDOUT_FILENO, chunk.substr(0, end + 1));
      it->second += end + 1;
    }
  }

 private:
  static constexpr uint64_t kChunk = 1 << 20;
  static uint64_t SizeOf(const std::string& path) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    return ec ? 0 : static_cast<uint64_t>(size);
  }
  std::map<std::string, uint64_t> offsets_;
};

// What systemd would have put in the journal: the daemon's own stdout and
// stderr, the last of the unit's log files (its log file proper stays a file,
// as Debian's units leave it).
std::vector<std::string> OutputOf(const UnitState& u) {
  if (u.logs.empty()) return {};
  return {u.logs.back()};
}

// One query for the unit's state; kUnavailable while no agent listens.
StatusOr<UnitState> StateOf(const std::string& socket, const std::string& unit) {
  UnitRequest q;
  q.units = {unit};
  q.wait_ms = 0;  // the last published state: no pass of the agent's worker per poll
  HPOD_ASSIGN_OR_RETURN(std::vector<UnitState> units, AskUnits(socket, q));
  if (units.empty()) return InternalError("the hpod agent did not report " + unit);
  return units.front();
}

std::string StatusLine(const UnitState& u) {
  if (u.active == "active") return "run by hpod-agent";
  return u.message.empty() ? u.active : u.active + ": " + u.message;
}

int Start(const std::string& socket, const std::string& unit) {
  // READY=1 once the daemon is active, or at once while no agent listens: at
  // boot, or while the agent restarts, the unit must not hold up the machine's
  // targets (or a script's systemctl) until hpodd answers; it follows the
  // daemon once the agent is back.
  bool ready = false;
  auto state = StateOf(socket, unit);
  if (!state.ok() && state.status().code() == StatusCode::kUnavailable) {
    std::fprintf(stderr, "waiting for the hpod agent at %s\n", socket.c_str());
    Notify("READY=1\nSTATUS=waiting for the hpod agent");
    ready = true;
    while (!state.ok() && state.status().code() == StatusCode::kUnavailable) {
      std::this_thread::sleep_for(kPoll);
      state = StateOf(socket, unit);
    }
  }
  if (!state.ok()) {
    std::fprintf(stderr, "%s: %s\n", unit.c_str(), std::string(state.status().message()).c_str());
    return 1;
  }
  LogCopier logs;
  logs.Mark(OutputOf(*state));
  // Only a unit that is not running or coming up is started: a daemon hpod
  // started of its own accord stays hpod's to run (no start pins it).
  if (state->active == "inactive" || state->active == "failed") {
    UnitRequest start;
    start.verb = UnitVerb::kStart;
    start.units = {unit};
    auto started = AskUnits(socket, start);
    if (!started.ok() || started->empty()) {
      std::fprintf(stderr, "%s: %s\n", unit.c_str(),
                   started.ok() ? "no answer" : std::string(started.status().message()).c_str());
      return 1;
    }
    state = started->front();
  }
  std::string status;
  std::string failure;
  for (bool first = true;; first = false) {
    if (!first) {
      std::this_thread::sleep_for(kPoll);
      auto now = StateOf(socket, unit);
      if (!now.ok()) continue;  // the agent restarts: wait for it
      state = *now;
    }
    logs.Copy(OutputOf(*state));
    // Ends on a stop only (ExecStop, or a systemctl stop on the agent's side):
    // an agent that restarts reports its units inactive until hpodd sent the
    // role again, and that is no reason to end.
    if (state->active == "inactive" && state->stopped) {
      if (ready) return 0;
      std::fprintf(stderr, "%s was stopped before it came up\n", unit.c_str());
      return 1;
    }
    if (state->active == "failed" && state->message != failure) {
      failure = state->message;  // hpod retries; the journal says why meanwhile
      std::fprintf(stderr, "%s failed: %s\n", unit.c_str(), failure.c_str());
    }
    const std::string next = StatusLine(*state);
    if (!ready && state->active == "active") {
      Notify("READY=1\nSTATUS=" + next);
      ready = true;
      status = next;
    } else if (next != status) {
      Notify("STATUS=" + next);
      status = next;
    }
  }
}

int Change(const std::string& socket, const std::string& unit, UnitVerb verb) {
  if (verb == UnitVerb::kStop) {
    // systemd runs ExecStop also after the main process ended by itself, and
    // then without $MAINPID: that end was no user's stop (the agent's own
    // restart, say), so nothing is stopped.
    const char* main = std::getenv("MAINPID");
    if (main == nullptr || main[0] == '\0') return 0;
  }
  UnitRequest r;
  r.verb = verb;
  r.units = {unit};
  auto done = AskUnits(socket, r);
  if (done.ok()) return 0;
  // Without an agent its daemons are gone too: a stop has nothing left to do.
  if (verb == UnitVerb::kStop && done.status().code() == StatusCode::kUnavailable) return 0;
  std::fprintf(stderr, "%s: %s\n", unit.c_str(), std::string(done.status().message()).c_str());
  return 1;
}

}  // namespace

int SystemdUnitMain(int argc, char** argv) {
  std::string socket = kLocalSocketPath;
  std::vector<std::string> args;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else {
      args.push_back(a);
    }
  }
  auto unit = args.size() == 2 ? CanonicalUnit(args[1]) : std::nullopt;
  if (!unit || (args[0] != "start" && args[0] != "stop" && args[0] != "reload")) {
    std::fprintf(stderr,
                 "usage: hpod-agent systemd-unit start|stop|reload UNIT [--socket PATH] (what a "
                 "pool host's handed units run; UNIT one of munge, slurmdbd, slurmctld, slurmd)\n");
    return 2;
  }
  if (args[0] == "start") return Start(socket, *unit);
  return Change(socket, *unit, args[0] == "stop" ? UnitVerb::kStop : UnitVerb::kReload);
}

}  // namespace hpod::agent
