#include "hpod/provider/local/node_init.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "hpod/base/file_util.h"
#include "hpod/provider/local/node_root.h"
#include "hpod/provider/node_environment.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;

StatusOr<NodeInitConfig> NodeInitConfigFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgumentError("node-init config must be a JSON object");
  NodeInitConfig c;
  auto str = [&](const char* key, std::string& out, bool required) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      return required ? InvalidArgumentError(std::string("node-init config: missing ") + key)
                      : OkStatus();
    }
    if (!it->is_string()) {
      return InvalidArgumentError(std::string("node-init config: ") + key + " must be a string");
    }
    out = it->get<std::string>();
    return OkStatus();
  };
  HPOD_RETURN_IF_ERROR(str("hostname", c.hostname, true));
  HPOD_RETURN_IF_ERROR(str("log_file", c.log_file, false));
  HPOD_RETURN_IF_ERROR(str("hosts_file", c.hosts_file, true));
  HPOD_RETURN_IF_ERROR(str("fsx_dir", c.fsx_dir, true));
  HPOD_RETURN_IF_ERROR(str("agent_socket_dir", c.agent_socket_dir, false));
  HPOD_RETURN_IF_ERROR(str("node_disk", c.node_disk, true));
  HPOD_RETURN_IF_ERROR(str("agent_config", c.agent_config, false));
  auto prog = j.find("program");
  if (prog == j.end() || !prog->is_array() || prog->empty()) {
    return InvalidArgumentError("node-init config: program must be a non-empty array");
  }
  for (const auto& a : *prog) {
    if (!a.is_string()) return InvalidArgumentError("node-init config: program has a non-string");
    c.program.push_back(a.get<std::string>());
  }
  if (auto env = j.find("env"); env != j.end() && !env->is_null()) {
    if (!env->is_object()) return InvalidArgumentError("node-init config: env must be an object");
    for (const auto& [k, v] : env->items()) {
      if (!v.is_string() || k.empty() || k.find('=') != std::string::npos) {
        return InvalidArgumentError("node-init config: env." + k + " must be a string");
      }
      c.env[k] = v.get<std::string>();
    }
  }
  for (const std::string* p : {&c.hosts_file, &c.fsx_dir, &c.node_disk}) {
    if (p->empty() || (*p)[0] != '/') {
      return InvalidArgumentError("node-init config: paths must be absolute: " + *p);
    }
  }
  return c;
}

nlohmann::json NodeInitConfigToJson(const NodeInitConfig& c) {
  return {{"hostname", c.hostname},
          {"log_file", c.log_file},
          {"hosts_file", c.hosts_file},
          {"fsx_dir", c.fsx_dir},
          {"agent_socket_dir", c.agent_socket_dir},
          {"node_disk", c.node_disk},
          {"agent_config", c.agent_config},
          {"program", c.program},
          {"env", c.env}};
}

StatusOr<NodeInitConfig> LoadNodeInitConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError("cannot read " + path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(path + ": not valid JSON");
  return NodeInitConfigFromJson(j);
}

std::vector<MountStep> PlanMounts(const NodeInitConfig& c) {
  using K = MountStep::Kind;
  const std::string& d = c.node_disk;
  std::vector<MountStep> steps = {
      {K::kBind, c.hosts_file, "/etc/hosts", "", false},
      {K::kBind, c.fsx_dir, "/fsx", "", false},
      {K::kBind, d + "/spool", "/var/spool", "", false},
      {K::kBind, d + "/log", "/var/log", "", false},
      {K::kBind, d + "/state", kAgentStateDir, "", false},
      // The node gets its own /opt/ml, /opt/sagemaker and /opt/sagemaker_cluster
      // over the host's /opt without writing to it.
      {K::kOverlay, "overlay", "/opt",
       "lowerdir=/opt,upperdir=" + d + "/opt-upper,workdir=" + d + "/opt-work", true},
      // HyperPod's data volume, and the node disk itself rather than the overlay:
      // the container cache's overlayfs layers live there, and overlayfs takes no
      // upper layer on overlayfs.
      {K::kBind, d + "/sagemaker", "/opt/sagemaker", "", false},
      {K::kTmpfs, "tmpfs", "/run", "mode=755", false},
  };
  if (!c.agent_socket_dir.empty()) {
    steps.push_back({K::kBind, c.agent_socket_dir, kAgentSocketDirInNode, "", false});
  }
  // Last: sources above may live under the host's /tmp.
  steps.push_back({K::kBind, d + "/tmp", "/tmp", "", false});
  return steps;
}

std::vector<std::string> NodePrivateDirs() {
  // The targets do not depend on the config's sources (PlanMounts is pure), so
  // any config gives the node's private directories.
  NodeInitConfig c;
  c.node_disk = "/node-disk";
  c.agent_socket_dir = "/agent-socket";
  std::vector<std::string> dirs;
  for (const MountStep& s : PlanMounts(c)) {
    if (s.kind != MountStep::Kind::kOverlay) dirs.push_back(s.target);
  }
  return dirs;
}

std::string NodePrivateDirOf(const std::string& host_path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(host_path), ec);
  if (ec) p = fs::path(host_path).lexically_normal();
  NodeEnvironment e;
  e.sees_hpodd_files = true;
  e.private_dirs = NodePrivateDirs();
  return e.PrivateDirOf(p.string());
}

namespace {

// Logs with a timestamp to stderr (the node-init log after setup redirects it).
void Log(const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char ts[32];
  strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(stderr, "%s hpod-node-init: %s\n", ts, msg);
  fflush(stderr);
}

bool EnsureDir(const std::string& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    Log("mkdir %s: %s", path.c_str(), ec.message().c_str());
    return false;
  }
  ::chmod(path.c_str(), mode);
  return true;
}

// Runs in hpod-node-init's own process (the node's PID 1, one thread, before it
// forks the program), so base's file helpers are as usable here as anywhere.
bool CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  StatusOr<std::string> data = ReadFile(from);
  Status s = data.ok() ? WriteFileAtomic(to, *data, mode) : data.status();
  if (!s.ok()) Log("copying %s into the node: %s", from.c_str(), s.message().c_str());
  return s.ok();
}

// Makes sure a mountpoint exists: a file for a file source, else a directory.
bool EnsureMountpoint(const std::string& target, bool is_file) {
  struct stat st;
  if (::stat(target.c_str(), &st) == 0) return true;
  if (is_file) {
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }
  // A missing top-level mountpoint (/fsx, /var/lib/hpod-agent) is created on the
  // shared host filesystem: an empty directory is all it costs.
  Log("creating mountpoint %s", target.c_str());
  return EnsureDir(target, 0755);
}

}  // namespace

int RunNodeInit(const NodeInitConfig& c) {
  if (!c.log_file.empty()) {
    int fd = ::open(c.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
  }
  Log("starting as pid %d for %s", static_cast<int>(getpid()), c.hostname.c_str());
  // Our own session: the provider's handle on the unshare process group must not
  // reach the node's processes.
  ::setsid();
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Log("making mounts private: %s", strerror(errno));
    return 1;
  }
  // Node disk layout, and the agent config in the agent's state dir (before /tmp,
  // where the node disk may live, is covered).
  const std::string& d = c.node_disk;
  for (const char* sub : {"spool", "log", "state", "opt-upper", "opt-work", "sagemaker"}) {
    if (!EnsureDir(d + "/" + sub, 0755)) return 1;
  }
  if (!EnsureDir(d + "/tmp", 01777)) return 1;
  if (!c.agent_config.empty() && !CopyFile(c.agent_config, d + "/state/agent.json", 0600)) {
    return 1;
  }

  // The program too may live under /tmp on the host (a build tree in a temp dir):
  // keep a descriptor and exec through it once /tmp is the node's own.
  int program_fd = -1;
  if (c.program[0].find('/') != std::string::npos) {
    program_fd = ::open(c.program[0].c_str(), O_PATH | O_CLOEXEC);
    if (program_fd < 0) {
      Log("opening %s: %s", c.program[0].c_str(), strerror(errno));
      return 1;
    }
  }

  // Open every bind source first (O_PATH) and mount from /proc/self/fd/N, so a
  // source under /run or /tmp stays reachable after those are covered.
  std::vector<MountStep> steps = PlanMounts(c);
  std::map<size_t, int> source_fds;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind != MountStep::Kind::kBind) continue;
    int fd = ::open(steps[i].source.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      Log("opening %s (for %s): %s", steps[i].source.c_str(), steps[i].target.c_str(),
          strerror(errno));
      return 1;
    }
    source_fds[i] = fd;
  }
  // The node's own root (node_root.h); without overlayfs on the node disk's file
  // system, the node shares the host's root as before, and says so.
  std::string root;
  if (StatusOr<std::string> r = MountNodeRoot(d); r.ok()) {
    root = *r;
  } else {
    Log("%s; continuing on the HOST's root filesystem: what this node installs or changes "
        "outside /tmp, /run, /var/log, /var/spool, /opt and /fsx lands on the host and on every "
        "node; the agent runs no sshd and no MariaDB here",
        r.status().message().c_str());
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    MountStep s = steps[i];
    // The root overlay already gives the node its own /opt.
    if (!root.empty() && s.kind == MountStep::Kind::kOverlay) continue;
    s.target = root + s.target;
    int rc = 0;
    if (s.kind == MountStep::Kind::kBind) {
      struct stat st;
      bool is_file = ::fstat(source_fds[i], &st) == 0 && !S_ISDIR(st.st_mode);
      if (!EnsureMountpoint(s.target, is_file)) {
        Log("no mountpoint %s: %s", s.target.c_str(), strerror(errno));
        return 1;
      }
      std::string src = "/proc/self/fd/" + std::to_string(source_fds[i]);
      rc = ::mount(src.c_str(), s.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
    } else if (s.kind == MountStep::Kind::kTmpfs) {
      rc = ::mount("tmpfs", s.target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, s.data.c_str());
    } else {
      if (!EnsureMountpoint(s.target, false)) return 1;
      rc = ::mount("overlay", s.target.c_str(), "overlay", 0, s.data.c_str());
    }
    if (rc != 0) {
      if (s.optional) {
        Log("mount %s on %s failed (%s); continuing without it: /opt/ml, /opt/sagemaker and "
            "/opt/sagemaker_cluster will be created on the HOST's /opt, shared by every node",
            s.source.c_str(), s.target.c_str(), strerror(errno));
        continue;
      }
      Log("mount %s on %s: %s", s.source.c_str(), s.target.c_str(), strerror(errno));
      return 1;
    }
  }
  for (auto& [i, fd] : source_fds) ::close(fd);
  // The program is bound into the node's own /run and run from there, so its
  // path (/proc/self/exe) is one the node's processes can use: the agent links
  // the node's systemctl to it (src/agent/systemctl_shim.h). Always, not only
  // when the node cannot see the path (a build tree under the host's /tmp, now
  // covered): the node's users run it too, and hpodd's image store (<data
  // dir>/local/images) is root's alone. Bound before the root is entered: a
  // mount cannot be made from the host's detached tree.
  std::string exec_path = c.program[0];
  if (program_fd >= 0) {
    const std::string target = root + kProgramInNode;
    int f = ::open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
    if (f >= 0) ::close(f);
    const std::string source = "/proc/self/fd/" + std::to_string(program_fd);
    if (f >= 0 && ::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) == 0) {
      exec_path = kProgramInNode;
    } else {
      Log("binding %s to %s: %s (running it from its descriptor)", c.program[0].c_str(),
          target.c_str(), strerror(errno));
    }
  }
  if (root.empty()) {
    // The agent reads this before it writes /etc/ssh or runs MariaDB: on the
    // host's root those would be the host's own (kSharedRootMarker).
    Status s =
        WriteFileAtomic(kSharedRootMarker,
                        "this node shares the host's root filesystem (see node-init.log)\n", 0644);
    if (!s.ok()) {
      // Without it the agent would take the host's root for the node's own.
      Log("writing %s: %s", kSharedRootMarker, s.message().c_str());
      return 1;
    }
  } else {
    if (Status s = EnterNodeRoot(root); !s.ok()) {
      Log("%s", s.message().c_str());
      return 1;
    }
    // A machine's own name, as hostnamectl would leave it.
    if (Status s = WriteFileAtomic("/etc/hostname", c.hostname + "\n", 0644); !s.ok()) {
      Log("writing /etc/hostname: %s", s.message().c_str());
    }
  }
  // HyperPod's node-local directories. With the /opt overlay they are the node's
  // own; without it (no overlayfs) they land on the host's /opt, which we say.
  for (const char* dir : {"/opt/ml/config", "/opt/sagemaker", "/opt/sagemaker_cluster"}) {
    struct stat st;
    if (::stat(dir, &st) != 0) {
      if (!EnsureDir(dir, 0755)) Log("warning: could not create %s", dir);
    }
  }

  // The hostname comes last: the provider reports the node Running once it sees
  // it, so anyone entering the node then finds every mount in place.
  if (::sethostname(c.hostname.data(), c.hostname.size()) != 0) {
    Log("sethostname: %s", strerror(errno));
    return 1;
  }

  // Signals arrive through sigwaitinfo: SIGCHLD to reap (we are PID 1, so every
  // orphan of the node becomes ours), SIGTERM/SIGINT to forward to the program.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);

  std::vector<char*> argv;
  for (const auto& a : c.program) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t child = ::fork();
  if (child < 0) {
    Log("fork: %s", strerror(errno));
    return 1;
  }
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::chdir("/") != 0) _exit(127);
    for (const auto& [k, v] : c.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execvp(exec_path.c_str(), argv.data());
    // Not visible inside the node (a host path under /tmp): run the file opened
    // before the mounts. (fexecve cannot run scripts from a close-on-exec fd.)
    if (errno == ENOENT && program_fd >= 0) ::fexecve(program_fd, argv.data(), environ);
    fprintf(stderr, "hpod-node-init: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  Log("node %s up; running %s (pid %d)", c.hostname.c_str(), c.program[0].c_str(),
      static_cast<int>(child));
  while (true) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGCHLD) {
      Log("got signal %d; forwarding to pid %d", sig, static_cast<int>(child));
      ::kill(child, sig == SIGHUP ? SIGHUP : SIGTERM);
      continue;
    }
    int status;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid != child) continue;
      int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      Log("%s exited with %d; node stops", c.program[0].c_str(), code);
      return code;
    }
  }
}

}  // namespace hpod::provider::local
