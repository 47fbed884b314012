#include "hpod/agent/systemctl_shim.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/units.h"

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char kWhatWeRun[] =
    "this node has no systemd; its systemctl is hpod-agent's and answers for munge, sshd, "
    "mariadb, slurmdbd, slurmctld and slurmd (docs/systemctl.md)";

// One exchange with the agent: a request line out, an answer line back.
StatusOr<Json> Ask(const std::string& path, const Json& request, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgumentError("socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return UnavailableError("cannot reach the hpod agent at " + path + ": " + std::strerror(errno));
  }
  std::string line = request.dump() + "\n";
  for (size_t off = 0; off < line.size();) {
    ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return UnavailableError("the hpod agent closed the connection");
    off += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[8192];
  while (answer.find('\n') == std::string::npos) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return DeadlineExceededError("no answer from the hpod agent");
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  Json j = Json::parse(answer, nullptr, false);
  if (!j.is_object()) return InternalError("a malformed answer from the hpod agent");
  if (auto e = j.find("error"); e != j.end() && e->is_string()) {
    return FailedPreconditionError(e->get<std::string>());
  }
  return j;
}

std::string FormatTime(double epoch) {
  std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%a %Y-%m-%d %H:%M:%S %Z", &tm);
  return buf;
}

std::string Ago(double epoch) {
  long s = static_cast<long>(std::time(nullptr) - static_cast<std::time_t>(epoch));
  if (s < 0) s = 0;
  if (s < 60) return std::to_string(s) + "s ago";
  if (s < 3600) return std::to_string(s / 60) + "min " + std::to_string(s % 60) + "s ago";
  return std::to_string(s / 3600) + "h " + std::to_string(s / 60 % 60) + "min ago";
}

// The last `lines` lines of `path` ("" when unreadable).
std::string Tail(const std::string& path, int lines) {
  auto text = ReadFile(path);
  if (!text.ok() || lines <= 0 || text->empty()) return "";
  size_t pos = text->size() - ((*text).back() == '\n' ? 1 : 0);
  for (int n = 0; n < lines; ++n) {
    size_t nl = pos == 0 ? std::string::npos : text->rfind('\n', pos - 1);
    if (nl == std::string::npos) return *text + ((*text).back() == '\n' ? "" : "\n");
    pos = nl;
  }
  std::string out = text->substr(pos + 1);
  if (out.back() != '\n') out += '\n';
  return out;
}

void PrintStatus(const UnitState& u, int lines) {
  const bool active = u.active == "active";
  std::printf("%s %s.service - %s\n", active ? "\u25cf" : "\u25cb", u.name.c_str(),
              u.description.c_str());
  std::printf("     Loaded: loaded (hpod-agent; %s)\n", u.enabled ? "enabled" : "disabled");
  std::string since = u.since > 0 ? " since " + FormatTime(u.since) + "; " + Ago(u.since) : "";
  std::printf("     Active: %s (%s)%s\n", u.active.c_str(), u.sub.c_str(), since.c_str());
  if (u.pid > 0)
    std::printf("   Main PID: %lld (%s)\n", static_cast<long long>(u.pid), u.name.c_str());
  if (!u.message.empty()) std::printf("       Note: %s\n", u.message.c_str());
  for (const std::string& log : u.logs) {
    std::string tail = Tail(log, lines);
    if (tail.empty()) continue;
    std::printf("\n==> %s <==\n%s", log.c_str(), tail.c_str());
  }
}

struct Args {
  std::string verb;
  std::vector<std::string> units;
  std::vector<std::string> properties;
  bool quiet = false, now = false, no_block = false, value = false;
  int lines = 10;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-q" || arg == "--quiet") {
      a.quiet = true;
    } else if (arg == "--now") {
      a.now = true;
    } else if (arg == "--no-block") {
      a.no_block = true;
    } else if (arg == "--value") {
      a.value = true;
    } else if ((arg == "-n" || arg == "--lines") && i + 1 < argc) {
      a.lines = std::atoi(argv[++i]);
    } else if (arg.rfind("--lines=", 0) == 0) {
      a.lines = std::atoi(arg.c_str() + 8);
    } else if ((arg == "-p" || arg == "--property") && i + 1 < argc) {
      a.properties.push_back(argv[++i]);
    } else if (arg.rfind("--property=", 0) == 0) {
      a.properties.push_back(arg.substr(11));
    } else if (arg == "--version") {
      a.verb = "--version";
    } else if ((arg == "-t" || arg == "--type" || arg == "--state" || arg == "-o" ||
                arg == "--output" || arg == "-H" || arg == "--host" || arg == "-M" ||
                arg == "--machine" || arg == "-s" || arg == "--signal" || arg == "--job-mode" ||
                arg == "--kill-whom" || arg == "--root") &&
               i + 1 < argc) {
      ++i;  // an option's value, not a unit
    } else if (!arg.empty() && arg[0] == '-') {
      // --no-pager, --system, -l, --full, --no-legend, --plain, -a: nothing to do.
    } else if (a.verb.empty()) {
      a.verb = arg;
    } else {
      a.units.push_back(arg);
    }
  }
  if (a.verb.empty()) a.verb = "list-units";
  return a;
}

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), std::string(s.message()).c_str());
  return 1;
}

// Whether `unit` runs now (for try-restart and reload-or-restart).
StatusOr<bool> IsActive(const std::string& socket, const std::string& unit) {
  UnitRequest q;
  q.units = {unit};
  HPOD_ASSIGN_OR_RETURN(std::vector<UnitState> units, AskUnits(socket, q));
  return !units.empty() && units[0].active == "active";
}

int Systemctl(int argc, char** argv, const std::string& socket) {
  Args a = ParseArgs(argc, argv);
  std::string verb = a.verb;
  if (verb == "--version") {
    std::printf("hpod-agent's systemctl: %s\n", kWhatWeRun);
    return 0;
  }
  if (verb == "daemon-reload" || verb == "daemon-reexec" || verb == "reset-failed") return 0;
  if (verb == "is-system-running") {
    // What systemd says in a container without it: scripts take it as "no systemd".
    if (!a.quiet) std::printf("offline\n");
    return 1;
  }
  // try-restart and friends act on running units only; reload-or-restart starts
  // a stopped one (resolved per unit below).
  const bool only_if_active =
      verb == "try-restart" || verb == "condrestart" || verb == "try-reload-or-restart";
  const bool reload_or_start = verb == "reload-or-restart";
  const bool reload = verb == "reload" || verb == "try-reload-or-restart" || reload_or_start;
  if (reload) verb = "reload";
  if (verb == "try-restart" || verb == "condrestart") verb = "restart";
  UnitRequest request;
  request.now = a.now;
  if (a.no_block) request.wait_ms = 0;
  const bool change = verb == "start" || verb == "stop" || verb == "restart" || verb == "reload" ||
                      verb == "enable" || verb == "disable";
  const bool query = verb == "is-active" || verb == "is-enabled" || verb == "is-failed" ||
                     verb == "status" || verb == "show" || verb == "list-units";
  if (!change && !query) {
    std::fprintf(stderr, "systemctl %s: not supported: %s\n", a.verb.c_str(), kWhatWeRun);
    return 1;
  }
  if (change) request.verb = *ParseUnitVerb(verb);
  std::vector<std::string> unknown;
  for (const std::string& u : a.units) {
    if (auto name = CanonicalUnit(u)) {
      request.units.push_back(*name);
    } else {
      unknown.push_back(u);
    }
  }
  if (!unknown.empty()) {
    const std::string unit =
        unknown[0].find('.') == std::string::npos ? unknown[0] + ".service" : unknown[0];
    if (verb == "is-active" || verb == "is-failed") {
      // systemd's answer for a unit it does not know.
      if (!a.quiet) std::printf("inactive\n");
      return verb == "is-active" ? 3 : 1;
    }
    std::fprintf(stderr, "Unit %s could not be found: %s\n", unit.c_str(), kWhatWeRun);
    // systemd's codes: 4 for status, 5 (not loaded) for jobs, 1 for unit files.
    if (verb == "status") return 4;
    return verb == "enable" || verb == "disable" || verb == "is-enabled" ? 1 : 5;
  }
  const bool needs_units =
      change || verb == "is-active" || verb == "is-enabled" || verb == "is-failed";
  if (needs_units && request.units.empty()) {
    std::fprintf(stderr, "Too few arguments.\n");
    return 1;
  }
  if (only_if_active || reload_or_start) {
    // One unit at a time: each is restarted, reloaded or started by its own state.
    int rc = 0;
    for (const std::string& unit : request.units) {
      auto active = IsActive(socket, unit);
      if (!active.ok()) return Fail("systemctl " + a.verb, active.status());
      if (!*active && only_if_active) continue;
      UnitRequest one = request;
      one.units = {unit};
      if (!*active) one.verb = UnitVerb::kStart;
      auto done = AskUnits(socket, one);
      if (!done.ok()) rc = Fail("systemctl " + a.verb, done.status());
    }
    return rc;
  }
  auto units = AskUnits(socket, request);
  if (!units.ok()) return Fail("systemctl " + a.verb, units.status());
  int rc = 0;
  if (change) {
    for (const UnitState& u : *units) {
      const bool started = verb == "start" || verb == "restart" || (verb == "enable" && a.now);
      if (started && u.active == "failed") {
        std::fprintf(stderr, "Job for %s.service failed: %s\nSee \"journalctl -u %s\".\n",
                     u.name.c_str(), u.message.c_str(), u.name.c_str());
        rc = 1;
      } else if (started && u.active != "active" && !a.no_block) {
        // Still coming up (waiting for hpodd's configuration or a dependency): as
        // systemd's queued job, the start stands and the unit follows.
        std::fprintf(stderr, "%s.service is %s: %s\n", u.name.c_str(), u.active.c_str(),
                     u.message.c_str());
      }
    }
    return rc;
  }
  if (verb == "is-active" || verb == "is-failed") {
    // systemd: 0 when any of the units is active (failed, for is-failed).
    bool any_active = false, any_failed = false;
    for (const UnitState& u : *units) {
      if (!a.quiet) std::printf("%s\n", u.active.c_str());
      any_active = any_active || u.active == "active";
      any_failed = any_failed || u.active == "failed";
    }
    if (verb == "is-active") return any_active ? 0 : 3;
    return any_failed ? 0 : 1;
  }
  if (verb == "is-enabled") {
    bool all = true;
    for (const UnitState& u : *units) {
      if (!a.quiet) std::printf("%s\n", u.enabled ? "enabled" : "disabled");
      all = all && u.enabled;
    }
    return all ? 0 : 1;
  }
  if (verb == "show") {
    for (const UnitState& u : *units) {
      const std::map<std::string, std::string> props = {
          {"Id", u.name + ".service"},
          {"Description", u.description},
          {"ActiveState", u.active},
          {"SubState", u.sub},
          {"MainPID", std::to_string(u.pid)},
          {"UnitFileState", u.enabled ? "enabled" : "disabled"},
          {"LoadState", "loaded"}};
      for (const auto& [k, v] : props) {
        bool wanted = a.properties.empty();
        for (const std::string& p : a.properties) wanted = wanted || p == k;
        if (wanted)
          std::printf(a.value ? "%s\n" : "%s=%s\n", a.value ? v.c_str() : k.c_str(), v.c_str());
      }
      if (&u != &units->back()) std::printf("\n");
    }
    return 0;
  }
  if (verb == "list-units") {
    std::printf("%-20s %-8s %-10s %-13s %s\n", "UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION");
    for (const UnitState& u : *units) {
      std::printf("%-20s %-8s %-10s %-13s %s\n", (u.name + ".service").c_str(), "loaded",
                  u.active.c_str(), u.sub.c_str(), u.description.c_str());
    }
    return 0;
  }
  // status
  for (const UnitState& u : *units) {
    PrintStatus(u, a.lines);
    if (u.active != "active") rc = 3;
    if (&u != &units->back()) std::printf("\n");
  }
  return rc;
}

int Journalctl(int argc, char** argv, const std::string& socket) {
  std::vector<std::string> names;
  int lines = -1;
  bool follow = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](size_t skip) -> std::string {
      if (arg.size() > skip) return arg.substr(skip);
      return i + 1 < argc ? argv[++i] : "";
    };
    if (arg == "--unit" || arg.rfind("--unit=", 0) == 0) {
      names.push_back(arg == "--unit" ? value(arg.size()) : arg.substr(7));
    } else if (arg == "--lines" || arg.rfind("--lines=", 0) == 0) {
      lines = std::atoi((arg == "--lines" ? value(arg.size()) : arg.substr(8)).c_str());
    } else if (arg == "--follow") {
      follow = true;
    } else if (arg == "--pager-end") {
      if (lines < 0) lines = 1000;
    } else if (arg == "--since" || arg == "--until" || arg == "--output" || arg == "--priority" ||
               arg == "--identifier") {
      value(arg.size());  // not filtered: the files have no journal fields
    } else if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-') {
      // Short options, combined as systemd's own hints write them (-xeu slurmd).
      for (size_t k = 1; k < arg.size(); ++k) {
        const char c = arg[k];
        if (c == 'u') {
          names.push_back(value(k + 1));
          break;
        }
        if (c == 'n') {
          lines = std::atoi(value(k + 1).c_str());
          break;
        }
        if (c == 'S' || c == 'U' || c == 'o' || c == 'p' || c == 't') {
          value(k + 1);
          break;
        }
        if (c == 'f') follow = true;
        if (c == 'e' && lines < 0) lines = 1000;
        // -x, -b, -q, -a, -l: nothing to do.
      }
    }
    // --no-pager and the like: nothing to do.
  }
  if (names.empty()) {
    std::fprintf(stderr, "journalctl: give a unit with -u (%s)\n", kWhatWeRun);
    return 1;
  }
  UnitRequest request;
  for (const std::string& n : names) {
    auto name = CanonicalUnit(n);
    if (!name) {
      std::fprintf(stderr, "journalctl: no unit %s: %s\n", n.c_str(), kWhatWeRun);
      return 1;
    }
    request.units.push_back(*name);
  }
  auto units = AskUnits(socket, request);
  if (!units.ok()) return Fail("journalctl", units.status());
  std::vector<std::string> argv_tail = {"tail", "-n", lines < 0 ? "+1" : std::to_string(lines)};
  if (follow) argv_tail.push_back("-F");
  size_t files = 0;
  for (const UnitState& u : *units) {
    for (const std::string& log : u.logs) {
      std::error_code ec;
      if (!follow && !fs::exists(log, ec)) continue;
      argv_tail.push_back(log);
      ++files;
    }
  }
  if (files == 0) {
    std::printf("-- No entries --\n");
    return 0;
  }
  std::fflush(stdout);
  std::vector<char*> cargv;
  for (std::string& s : argv_tail) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  ::execvp("tail", cargv.data());
  std::fprintf(stderr, "journalctl: cannot run tail: %s\n", std::strerror(errno));
  return 1;
}

constexpr char kUnitHeader[] =
    "# Written by hpod-agent where HyperPod's AMI has this file. This node has no\n"
    "# systemd: `systemctl` here is hpod-agent's, which runs the daemon itself\n"
    "# (with hpod's options: slurmd already gets --conf-server <controller>), so\n"
    "# edits to ExecStart do not change it (docs/systemctl.md).\n";

}  // namespace

StatusOr<std::vector<UnitState>> AskUnits(const std::string& path, const UnitRequest& request) {
  HPOD_ASSIGN_OR_RETURN(Json answer,
                        Ask(path, request.ToJson(), static_cast<int>(request.wait_ms) + 10000));
  std::vector<UnitState> out;
  auto units = answer.find("units");
  if (units == answer.end() || !units->is_array()) {
    return InternalError("a malformed answer from the hpod agent");
  }
  for (const Json& u : *units) {
    HPOD_ASSIGN_OR_RETURN(UnitState s, UnitState::FromJson(u));
    out.push_back(std::move(s));
  }
  return out;
}

bool IsSystemctlName(const char* argv0) {
  if (argv0 == nullptr) return false;
  std::string base = fs::path(argv0).filename().string();
  return base == "systemctl" || base == "journalctl";
}

int SystemctlShimMain(int argc, char** argv, const std::string& socket_path) {
  std::string base = fs::path(argv[0]).filename().string();
  return base == "journalctl" ? Journalctl(argc, argv, socket_path)
                              : Systemctl(argc, argv, socket_path);
}

std::string UnitFileText(const std::string& unit) { return kUnitHeader + UnitFileBody(unit); }

std::string UnitFileBody(const std::string& unit) {
  std::string text;
  if (unit == "slurmctld") {
    text +=
        "[Unit]\nDescription=Slurm controller daemon\n"
        "After=network-online.target munge.service "
        "slurmdbd.service\nWants=network-online.target\n\n"
        "[Service]\nType=simple\nExecStart=/usr/sbin/slurmctld -D -s -f /opt/slurm/etc/slurm.conf\n"
        "ExecReload=/bin/kill -HUP $MAINPID\nLimitNOFILE=65536\n\n";
  } else if (unit == "slurmd") {
    // start_slurm.sh fills $SLURMD_OPTIONS with envsubst (--conf-server <ips>).
    text +=
        "[Unit]\nDescription=Slurm node daemon\n"
        "After=munge.service network-online.target "
        "remote-fs.target\nWants=network-online.target\n\n"
        "[Service]\nType=simple\nExecStart=/usr/sbin/slurmd -D -s $SLURMD_OPTIONS\n"
        "ExecReload=/bin/kill -HUP $MAINPID\nKillMode=process\nLimitNOFILE=131072\n"
        "LimitMEMLOCK=infinity\nLimitSTACK=infinity\nDelegate=yes\n\n";
  } else {
    text +=
        "[Unit]\nDescription=Slurm DBD accounting daemon\n"
        "After=network-online.target munge.service mariadb.service\nWants=network-online.target\n\n"
        "[Service]\nType=simple\nExecStart=/usr/sbin/slurmdbd -D -s\n"
        "ExecReload=/bin/kill -HUP $MAINPID\nLimitNOFILE=65536\n\n";
  }
  return text + "[Install]\nWantedBy=multi-user.target\n";
}

Status InstallSystemctl(const std::string& link_dir, const std::string& unit_dir) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return InternalError("cannot read /proc/self/exe: " + ec.message());
  // node-init runs a program the node cannot see by its path from a bind of it in
  // the node's /run (provider/local/node_init.h), so this holds on local nodes.
  if (!fs::exists(self, ec)) {
    return FailedPreconditionError("this program (" + self.string() +
                                   ") is not visible on this node by its path");
  }
  fs::create_directories(link_dir, ec);
  for (const char* name : {"systemctl", "journalctl"}) {
    const fs::path link = fs::path(link_dir) / name;
    if (fs::is_symlink(link, ec)) {
      if (fs::read_symlink(link, ec) == self) continue;
      fs::remove(link, ec);
    } else if (fs::exists(link, ec)) {
      return FailedPreconditionError(link.string() + " exists and is not hpod's link; left alone");
    }
    fs::create_symlink(self, link, ec);
    if (ec) return InternalError("cannot link " + link.string() + ": " + ec.message());
  }
  fs::create_directories(unit_dir, ec);
  for (const char* unit : {"slurmctld", "slurmd", "slurmdbd"}) {
    const fs::path file = fs::path(unit_dir) / (std::string(unit) + ".service");
    const fs::path aside =
        fs::path(unit_dir) / (std::string(unit) + "_DO_NOT_START_ON_CONTROLLER.service");
    if (fs::exists(file, ec) || fs::exists(aside, ec)) continue;
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(file.string(), UnitFileText(unit), 0644));
  }
  return OkStatus();
}

}  // namespace hpod::agent
