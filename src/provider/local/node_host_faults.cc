// NodeHost's fault-injection and sized-disk calls (node_host.h), real and fake.
// Kept apart from node_host.cc, which creates and tears down nodes.

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "hpod/base/subprocess.h"
#include "hpod/provider/local/node_host.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr auto kCommandTimeout = 10s;

std::string ReadSmallFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A path as /proc/self/mountinfo spells it (space, tab, newline and backslash
// octal-escaped).
std::string MountinfoEscape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// The absolute, symlink-free spelling the kernel uses for mount points.
std::string Canonical(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::canonical(dir, ec);
  return ec ? fs::absolute(dir).lexically_normal().string() : p.string();
}

// Whether something is mounted on `dir` in our (hpodd's) mount namespace.
bool IsMountPoint(const std::string& dir) {
  const std::string want = MountinfoEscape(Canonical(dir));
  std::istringstream lines(ReadSmallFile("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(lines, line)) {
    // Fields: id parent major:minor root mount-point ...
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (f >> id >> parent >> dev >> root >> point && point == want) return true;
  }
  return false;
}

std::optional<struct stat> PidNamespaceOf(pid_t pid) {
  struct stat st;
  if (::stat(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), &st) != 0) return std::nullopt;
  return st;
}

}  // namespace

// ---- RealNodeHost ----

StatusOr<std::vector<NodeProcessInfo>> RealNodeHost::NodeProcesses(const ProcessId& pid1) {
  std::vector<NodeProcessInfo> out;
  if (!IsAlive(pid1)) return out;
  auto ns = PidNamespaceOf(pid1.pid);
  if (!ns) return out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return InternalError(std::string("reading /proc: ") + ::strerror(errno));
  while (dirent* e = ::readdir(d)) {
    char* end;
    long pid = ::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    auto other = PidNamespaceOf(static_cast<pid_t>(pid));
    if (!other || other->st_ino != ns->st_ino || other->st_dev != ns->st_dev) continue;
    auto start = StartTimeOf(static_cast<pid_t>(pid));
    if (!start) continue;  // exited or a zombie meanwhile
    NodeProcessInfo info;
    info.id = {static_cast<pid_t>(pid), *start};
    std::string dir = "/proc/" + std::string(e->d_name);
    info.name = ReadSmallFile(dir + "/comm");
    while (!info.name.empty() && info.name.back() == '\n') info.name.pop_back();
    std::error_code ec;
    fs::path exe = fs::read_symlink(dir + "/exe", ec);
    if (!ec) {
      info.exe = exe.filename().string();
      const std::string kDeleted = " (deleted)";  // a binary rebuilt under the node
      if (info.exe.ends_with(kDeleted)) info.exe.resize(info.exe.size() - kDeleted.size());
    }
    if (info.id == pid1) {
      out.insert(out.begin(), info);
    } else {
      out.push_back(info);
    }
  }
  ::closedir(d);
  return out;
}

Status RealNodeHost::Signal(const ProcessId& id, int signal) {
  if (!IsAlive(id)) return OkStatus();
  if (::kill(id.pid, signal) != 0 && errno != ESRCH) {
    return InternalError("kill -" + std::to_string(signal) + " " + std::to_string(id.pid) + ": " +
                         ::strerror(errno));
  }
  return OkStatus();
}

Status RealNodeHost::SetLinkUp(const std::string& link, bool up) {
  return RunChecked({"ip", "link", "set", link, up ? "up" : "down"}, kCommandTimeout).status();
}

Status RealNodeHost::MountDisk(const std::string& dir, int size_mb) {
  if (IsMountPoint(dir)) return OkStatus();
  std::string data = "size=" + std::to_string(size_mb) + "m,mode=755";
  if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) != 0) {
    return InternalError("mounting a " + std::to_string(size_mb) + " MiB tmpfs on " + dir + ": " +
                         ::strerror(errno));
  }
  return OkStatus();
}

Status RealNodeHost::UnmountDisk(const std::string& dir) {
  // A loop, in case a crash between two launches stacked a second mount on it.
  for (int i = 0; i < 8 && IsMountPoint(dir); ++i) {
    if (::umount2(dir.c_str(), 0) == 0) continue;
    if (errno == EBUSY && ::umount2(dir.c_str(), MNT_DETACH) == 0) continue;
    return InternalError("unmounting " + dir + ": " + ::strerror(errno));
  }
  return OkStatus();
}

Status RealNodeHost::FillDisk(const std::string& dir) {
  // Refuse anything but a tmpfs: filling the host's own disk is never the intent.
  struct statfs sfs;
  if (::statfs(dir.c_str(), &sfs) != 0 || sfs.f_type != TMPFS_MAGIC) {
    return FailedPreconditionError(dir + " is not a sized node disk (tmpfs)");
  }
  const std::string path = dir + "/hpod-disk-full";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("opening " + path + ": " + ::strerror(errno));
  std::string buf(1 << 20, 'x');
  // 1 MiB writes, then pages, then bytes: the disk ends with no block free.
  size_t chunk = buf.size();
  while (true) {
    ssize_t n = ::write(fd, buf.data(), chunk);
    if (n >= 0) continue;  // a short write is followed by ENOSPC
    if (errno == EINTR) continue;
    if (errno != ENOSPC) {
      int err = errno;
      ::close(fd);
      return InternalError("writing " + path + ": " + ::strerror(err));
    }
    if (chunk == 1) break;
    chunk = chunk > 4096 ? 4096 : 1;
  }
  ::close(fd);
  return OkStatus();
}

Status RealNodeHost::RunInNodeMounts(const ProcessId& pid1, const std::vector<std::string>& argv) {
  if (!IsAlive(pid1)) {
    return FailedPreconditionError("node process " + std::to_string(pid1.pid) + " is gone");
  }
  // nsenter forks a fresh single-threaded child that joins the mount namespace;
  // no thread of hpodd ever calls setns.
  std::vector<std::string> cmd = {"nsenter", "-t", std::to_string(pid1.pid), "-m", "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return RunChecked(cmd, kCommandTimeout).status();
}

namespace {

// The cgroup directory of a CPU throttle: cgroup v2 when the unified hierarchy
// is at /sys/fs/cgroup with the cpu controller, else v1's cpu hierarchy.
struct CpuCgroup {
  std::string dir;
  bool v2 = false;
};

std::optional<CpuCgroup> CpuCgroupFor(const std::string& name) {
  // The controllers are words: "cpuset" is not "cpu".
  std::istringstream controllers(ReadSmallFile("/sys/fs/cgroup/cgroup.controllers"));
  for (std::string c; controllers >> c;) {
    if (c == "cpu") return CpuCgroup{"/sys/fs/cgroup/" + name, true};
  }
  for (const char* v1 : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    if (fs::exists(std::string(v1) + "/cpu.cfs_quota_us")) {
      return CpuCgroup{std::string(v1) + "/" + name, false};
    }
  }
  return std::nullopt;
}

Status WriteSmallFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  if (!f) return InternalError("writing \"" + text + "\" to " + path + " failed");
  return OkStatus();
}

}  // namespace

Status RealNodeHost::ThrottleCpu(const ProcessId& pid1, const std::string& name, int percent) {
  auto cg = CpuCgroupFor(name);
  if (!cg) {
    return FailedPreconditionError(
        "this host has no writable cgroup cpu controller (cgroup v2 at /sys/fs/cgroup, or v1 at "
        "/sys/fs/cgroup/cpu)");
  }
  std::error_code ec;
  fs::create_directories(cg->dir, ec);
  if (ec) return InternalError("creating " + cg->dir + ": " + ec.message());
  const std::string quota = std::to_string(std::max(1000, percent * 1000));
  if (cg->v2) {
    // The root must hand the cpu controller down; harmless when it already does.
    (void)WriteSmallFile("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
    HPOD_RETURN_IF_ERROR(WriteSmallFile(cg->dir + "/cpu.max", quota + " 100000"));
  } else {
    HPOD_RETURN_IF_ERROR(WriteSmallFile(cg->dir + "/cpu.cfs_period_us", "100000"));
    HPOD_RETURN_IF_ERROR(WriteSmallFile(cg->dir + "/cpu.cfs_quota_us", quota));
  }
  // Until no process is left outside: one may fork between the listing and its move.
  std::set<pid_t> moved;
  for (int round = 0; round < 10; ++round) {
    HPOD_ASSIGN_OR_RETURN(std::vector<NodeProcessInfo> procs, NodeProcesses(pid1));
    bool any = false;
    for (const NodeProcessInfo& p : procs) {
      if (!moved.insert(p.id.pid).second) continue;
      // A process that exited meanwhile cannot be moved, and needs not be.
      (void)WriteSmallFile(cg->dir + "/cgroup.procs", std::to_string(p.id.pid));
      any = true;
    }
    if (!any) break;
  }
  return OkStatus();
}

Status RealNodeHost::RemoveCpuThrottle(const std::string& name) {
  auto cg = CpuCgroupFor(name);
  if (!cg || !fs::exists(cg->dir)) return OkStatus();
  if (::rmdir(cg->dir.c_str()) != 0 && errno != ENOENT) {
    return InternalError("removing " + cg->dir + ": " + ::strerror(errno));
  }
  return OkStatus();
}

Status RealNodeHost::ShapeEgress(const std::string& netns, const std::string& dev, int kbit) {
  // tbf, not netem: netem is a module some kernels lack (this project's CI
  // machines among them); a rate is what a degraded link shows.
  return RunChecked(
             {"ip", "netns", "exec", netns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
              "rate", std::to_string(kbit) + "kbit", "burst", "256kbit", "latency", "100ms"},
             kCommandTimeout)
      .status();
}

// ---- FakeNodeHost ----

StatusOr<std::vector<NodeProcessInfo>> FakeNodeHost::NodeProcesses(const ProcessId& pid1) {
  MutexLock lock(mu_);
  std::vector<NodeProcessInfo> out;
  auto it = processes_.find(pid1.pid);
  if (it == processes_.end() || !(it->second.first == pid1)) return out;
  out.push_back({pid1, "hpod-node-init", "hpod-node-init"});
  for (const auto& [pid, p] : node_processes_) {
    if (p.first == pid1.pid) out.push_back(p.second);
  }
  return out;
}

Status FakeNodeHost::Signal(const ProcessId& id, int signal) {
  MutexLock lock(mu_);
  calls_.push_back("Signal " + std::to_string(id.pid) + " " + std::to_string(signal));
  signals_[id.pid] = signal;
  if (signal != SIGKILL) return OkStatus();
  auto it = processes_.find(id.pid);
  if (it != processes_.end() && it->second.first == id) {
    processes_.erase(it);
    std::erase_if(node_processes_, [&](const auto& kv) { return kv.second.first == id.pid; });
  }
  node_processes_.erase(id.pid);
  return OkStatus();
}

Status FakeNodeHost::SetLinkUp(const std::string& link, bool up) {
  MutexLock lock(mu_);
  calls_.push_back("SetLinkUp " + link + (up ? " up" : " down"));
  if (up) {
    links_down_.erase(link);
  } else {
    links_down_.insert(link);
  }
  return OkStatus();
}

Status FakeNodeHost::MountDisk(const std::string& dir, int size_mb) {
  MutexLock lock(mu_);
  calls_.push_back("MountDisk " + dir + " " + std::to_string(size_mb));
  mounted_disks_.emplace(dir, size_mb);
  return OkStatus();
}

Status FakeNodeHost::UnmountDisk(const std::string& dir) {
  MutexLock lock(mu_);
  calls_.push_back("UnmountDisk " + dir);
  mounted_disks_.erase(dir);
  return OkStatus();
}

Status FakeNodeHost::FillDisk(const std::string& dir) {
  MutexLock lock(mu_);
  calls_.push_back("FillDisk " + dir);
  return OkStatus();
}

Status FakeNodeHost::RunInNodeMounts(const ProcessId& pid1, const std::vector<std::string>& argv) {
  MutexLock lock(mu_);
  std::string call = "RunInNodeMounts " + std::to_string(pid1.pid);
  for (const auto& a : argv) call += " " + a;
  calls_.push_back(call);
  auto it = processes_.find(pid1.pid);
  if (it == processes_.end() || !(it->second.first == pid1)) {
    return FailedPreconditionError("node process " + std::to_string(pid1.pid) + " is gone");
  }
  return OkStatus();
}

Status FakeNodeHost::ThrottleCpu(const ProcessId& pid1, const std::string& name, int percent) {
  MutexLock lock(mu_);
  calls_.push_back("ThrottleCpu " + std::to_string(pid1.pid) + " " + name + " " +
                   std::to_string(percent));
  return OkStatus();
}

Status FakeNodeHost::RemoveCpuThrottle(const std::string& name) {
  MutexLock lock(mu_);
  calls_.push_back("RemoveCpuThrottle " + name);
  return OkStatus();
}

Status FakeNodeHost::ShapeEgress(const std::string& netns, const std::string& dev, int kbit) {
  MutexLock lock(mu_);
  calls_.push_back("ShapeEgress " + netns + " " + dev + " " + std::to_string(kbit));
  return OkStatus();
}

ProcessId FakeNodeHost::AddNodeProcess(pid_t pid1, const std::string& name) {
  MutexLock lock(mu_);
  ProcessId id{next_pid_++, static_cast<uint64_t>(next_pid_) * 7};
  node_processes_[id.pid] = {pid1, NodeProcessInfo{id, name, name}};
  return id;
}

std::map<pid_t, int> FakeNodeHost::signals() const {
  MutexLock lock(mu_);
  return signals_;
}

std::set<std::string> FakeNodeHost::links_down() const {
  MutexLock lock(mu_);
  return links_down_;
}

std::map<std::string, int> FakeNodeHost::mounted_disks() const {
  MutexLock lock(mu_);
  return mounted_disks_;
}

}  // namespace hpod::provider::local
