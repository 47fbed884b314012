#include "hpod/slurm/spank/container_step.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hpod/container/image_ref.h"
#include "hpod/container/mounts.h"

extern char** environ;

namespace hpod::spank {
using json = nlohmann::json;

namespace {

Status Errno(const std::string& what) { return InternalError(what + ": " + std::strerror(errno)); }

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Status ApplyContainerOption(ContainerRequest& r, ContainerOption option, std::string_view value) {
  switch (option) {
    case ContainerOption::kImage: {
      auto ref = container::ParseContainerImage(value);
      if (!ref.ok()) return ref.status();
      r.image = std::string(value);
      return OkStatus();
    }
    case ContainerOption::kMounts: {
      auto m = container::ParseMounts(value);
      if (!m.ok()) return m.status();
      r.mounts = std::string(value);
      return OkStatus();
    }
    case ContainerOption::kWorkdir:
      if (value.empty() || value[0] != '/') {
        return InvalidArgumentError("--container-workdir=" + std::string(value) +
                                    ": expected an absolute path in the container");
      }
      r.workdir = std::string(value);
      return OkStatus();
    case ContainerOption::kName:
      if (value.empty() || value.size() > 64 ||
          value.find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
              std::string_view::npos ||
          value[0] == '.') {
        return InvalidArgumentError("--container-name=" + std::string(value) +
                                    ": expected letters, digits, '_', '-' and '.' (at most 64)");
      }
      r.name = std::string(value);
      return OkStatus();
    case ContainerOption::kWritable:
      r.writable = true;
      return OkStatus();
    case ContainerOption::kReadonly:
      r.writable = false;
      return OkStatus();
    case ContainerOption::kEnv: {
      r.host_env.clear();
      size_t start = 0;
      while (start <= value.size()) {
        size_t end = value.find(',', start);
        std::string_view n = value.substr(start, end == std::string_view::npos ? end : end - start);
        if (n.empty() || n.find('=') != std::string_view::npos) {
          return InvalidArgumentError(
              "--container-env=" + std::string(value) +
              ": expected variable names, comma-separated (NAME[,NAME...])");
        }
        r.host_env.emplace_back(n);
        if (end == std::string_view::npos) break;
        start = end + 1;
      }
      return OkStatus();
    }
    case ContainerOption::kMountHome:
      r.mount_home = true;
      return OkStatus();
    case ContainerOption::kNoMountHome:
      r.mount_home = false;
      return OkStatus();
    case ContainerOption::kRemapRoot:
      r.remap_root = true;
      return OkStatus();
    case ContainerOption::kNoRemapRoot:
      r.remap_root = false;
      return OkStatus();
    case ContainerOption::kEntrypoint:
      r.entrypoint = true;
      return OkStatus();
    case ContainerOption::kNoEntrypoint:
      r.entrypoint = false;
      return OkStatus();
  }
  return InvalidArgumentError("unknown container option");
}

std::string HelperSpec(const ContainerRequest& r, const StepIdentity& who,
                       const std::string& cache_dir, uint64_t cache_max_bytes) {
  json mounts = json::array();
  if (!r.mounts.empty()) {
    auto parsed = container::ParseMounts(r.mounts);
    if (parsed.ok()) {
      for (const auto& m : *parsed) {
        mounts.push_back(
            {{"source", m.source}, {"destination", m.destination}, {"read_only", m.read_only}});
      }
    }
  }
  if (r.mount_home && !who.home.empty() && who.home != "/") {
    mounts.push_back({{"source", who.home}, {"destination", who.home}, {"read_only", false}});
  }
  return json{{"cache_dir", cache_dir},
              {"image", r.image},
              {"name", r.name},
              {"job_id", who.job_id},
              {"step_id", who.step_id},
              {"writable", r.writable},
              {"mounts", mounts},
              {"home", who.home},
              {"allow_http", who.allow_http},
              {"cache_max_bytes", cache_max_bytes}}
      .dump();
}

std::string FindHelper(const std::string& plugin_path) {
  const std::string dir = plugin_path.substr(0, plugin_path.rfind('/'));
  for (const std::string& p :
       {dir + "/hpod-container", dir + "/../../bin/hpod-container",
        dir + "/../../../cmd/hpod-container/hpod-container", std::string("/usr/bin/hpod-container"),
        std::string("/usr/local/bin/hpod-container")}) {
    if (IsFile(p)) return p;
  }
  return "";
}

Status ContainerStep::Start(const std::string& helper, const std::string& spec,
                            const ContainerRequest& request) {
  if (helper.empty()) {
    return FailedPreconditionError(
        "hpod-container is not installed on this node (beside spank_hpod.so or in /usr/bin)");
  }
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return Errno("pipe");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return Errno("pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::vector<std::string> args = {helper, "start", "--spec", spec};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, helper.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    errno = rc;
    return Errno("starting " + helper);
  }
  helper_ = pid;
  lifeline_ = in[1];
  std::string line;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;) {
    line.append(buf, n);
    if (line.find('\n') != std::string::npos) break;
  }
  ::close(out[0]);
  json reply = json::parse(line, nullptr, false);
  if (!reply.is_object() || !reply.contains("pid")) {
    std::string error = reply.is_object() ? reply.value("error", "") : "";
    Stop();
    return FailedPreconditionError(error.empty() ? "hpod-container start gave no answer" : error);
  }
  const std::string ns = "/proc/" + std::to_string(reply["pid"].get<int>()) + "/ns/mnt";
  // Not O_CLOEXEC-free: tasks are forked (they inherit it) and exec closes it.
  ns_fd_ = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd_ < 0) {
    Status s = Errno("opening " + ns);
    Stop();
    return s;
  }
  if (request.entrypoint) {
    for (const auto& a : reply.value("entrypoint", json::array())) {
      if (a.is_string()) entrypoint_.push_back(a.get<std::string>());
    }
  }
  workdir_ = !request.workdir.empty() ? request.workdir : reply.value("workdir", "");
  if (workdir_.empty()) workdir_ = "/";
  for (const auto& e : reply.value("env", json::array())) {
    const std::string kv = e.get<std::string>();
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string k = kv.substr(0, eq);
    bool keep_host = false;
    for (const std::string& h : request.host_env) keep_host |= h == k;
    if (!keep_host) env_.emplace_back(k, kv.substr(eq + 1));
  }
  return OkStatus();
}

Status ContainerStep::EnterTask() const {
  if (ns_fd_ < 0) return OkStatus();
  if (::setns(ns_fd_, CLONE_NEWNS) != 0) return Errno("joining the container");
  return OkStatus();
}

Status ContainerStep::EnterWorkdir() const {
  if (ns_fd_ < 0) return OkStatus();
  if (::chdir(workdir_.c_str()) != 0) {
    return InvalidArgumentError("--container-workdir: " + workdir_ +
                                " does not exist in the container (" + std::strerror(errno) + ")");
  }
  return OkStatus();
}

void ContainerStep::Stop() {
  if (ns_fd_ >= 0) ::close(ns_fd_);
  ns_fd_ = -1;
  if (lifeline_ >= 0) ::close(lifeline_);
  lifeline_ = -1;
  if (helper_ > 0) {
    int status;
    while (::waitpid(helper_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  helper_ = -1;
}

Status ContainerStep::ExecEntrypoint(const std::vector<std::string>& command, char** env) const {
  if (entrypoint_.empty()) return OkStatus();
  std::vector<std::string> args = entrypoint_;
  args.insert(args.end(), command.begin(), command.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The image's PATH (set in the task's environment) finds a bare name.
  environ = env;
  ::execvp(argv[0], argv.data());
  return InvalidArgumentError("--container-entrypoint: cannot run " + entrypoint_[0] +
                              " in the container (" + std::strerror(errno) + ")");
}

Status RemapRootInTask() {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (uid == 0) return OkStatus();
  if (::unshare(CLONE_NEWUSER) != 0) return Errno("--container-remap-root: unshare(CLONE_NEWUSER)");
  auto write = [](const std::string& path, const std::string& text) -> Status {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Errno("--container-remap-root: opening " + path);
    ssize_t n = ::write(fd, text.data(), text.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size()))
      return Errno("--container-remap-root: writing " + path);
    return OkStatus();
  };
  HPOD_RETURN_IF_ERROR(write("/proc/self/setgroups", "deny"));
  HPOD_RETURN_IF_ERROR(write("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n"));
  return write("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n");
}

}  // namespace hpod::spank
