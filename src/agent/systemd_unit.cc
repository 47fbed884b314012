#include "hpod/agent/systemd_unit.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hpod/agent/local_socket.h"
#include "hpod/agent/systemctl_shim.h"
#include "hpod/agent/units.h"

namespace hpod::agent {
namespace {

constexpr auto kPoll = std::chrono::seconds(1);

// sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET ("@…" is an
// abstract address). Nothing to do outside systemd.
void Notify(const std::string& text) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ::sendto(fd, text.data(), text.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
  ::close(fd);
}

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
      std::ifstream in(log, std::ios::binary);
      if (!in) continue;
      in.seekg(0, std::ios::end);
      const auto size = static_cast<uint64_t>(in.tellg());
      if (size < it->second) it->second = 0;  // rotated or truncated
      if (size == it->second) continue;
      in.seekg(static_cast<std::streamoff>(it->second));
      std::string chunk(size - it->second, '\0');
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      chunk.resize(static_cast<size_t>(in.gcount()));
      // Whole lines only: the rest waits for its newline.
      const size_t end = chunk.rfind('\n');
      if (end == std::string::npos) continue;
      WriteAll(STDOUT_FILENO, chunk.substr(0, end + 1));
      it->second += end + 1;
    }
  }

 private:
  static uint64_t SizeOf(const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    return in ? static_cast<uint64_t>(in.tellg()) : 0;
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

// The unit's state; waits while no agent listens (it restarts, or the machine
// boots and the unit starts first). Other errors are returned.
StatusOr<UnitState> StateOf(const std::string& socket, const std::string& unit, bool* waited) {
  UnitRequest q;
  q.units = {unit};
  for (;;) {
    auto units = AskUnits(socket, q);
    if (units.ok()) {
      if (units->empty()) return InternalError("the hpod agent did not report " + unit);
      return units->front();
    }
    if (units.status().code() != StatusCode::kUnavailable) return units.status();
    if (!*waited) {
      std::fprintf(stderr, "waiting for the hpod agent at %s\n", socket.c_str());
      Notify("STATUS=waiting for the hpod agent");
      *waited = true;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

int Start(const std::string& socket, const std::string& unit) {
  bool waited = false;
  auto before = StateOf(socket, unit, &waited);
  if (!before.ok()) {
    std::fprintf(stderr, "%s: %s\n", unit.c_str(), std::string(before.status().message()).c_str());
    return 1;
  }
  LogCopier logs;
  logs.Mark(OutputOf(*before));
  UnitRequest start;
  start.verb = UnitVerb::kStart;
  start.units = {unit};
  auto started = AskUnits(socket, start);
  if (!started.ok() || started->empty()) {
    std::fprintf(stderr, "%s: %s\n", unit.c_str(),
                 started.ok() ? "no answer" : std::string(started.status().message()).c_str());
    return 1;
  }
  logs.Copy(OutputOf(started->front()));
  if (started->front().active == "failed") {
    std::fprintf(stderr, "%s failed: %s\n", unit.c_str(), started->front().message.c_str());
    return 1;
  }
  // As the node's systemctl on a local node: a start that waits on hpodd (a
  // worker held until its controller runs) stands, and the unit follows.
  std::string status =
      started->front().active == "active" ? "run by hpod-agent" : started->front().message;
  Notify("READY=1\nSTATUS=" + status);
  for (;;) {
    std::this_thread::sleep_for(kPoll);
    auto now = StateOf(socket, unit, &waited);
    if (!now.ok()) continue;
    logs.Copy(OutputOf(*now));
    if (now->active == "inactive") return 0;  // stopped (ExecStop, or hpod)
    const std::string next = now->active == "active" ? "run by hpod-agent" : now->message;
    if (next != status) Notify("STATUS=" + (status = next));
  }
}

int Change(const std::string& socket, const std::string& unit, UnitVerb verb) {
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
