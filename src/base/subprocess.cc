#include "hpod/base/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "hpod/base/signals.h"

extern char** environ;

namespace hpod {
namespace {

using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Closes a descriptor on scope exit unless released.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

std::string Join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

// Resolves argv[0] against PATH in the parent, so that a missing program is a
// clean kNotFound and the child only calls execve (async-signal-safe).
StatusOr<std::string> ResolveProgram(const SubprocessOptions& options) {
  const std::string& prog = options.argv[0];
  if (prog.find('/') != std::string::npos) {
    if (::access(prog.c_str(), X_OK) != 0) {
      return NotFoundError("program " + prog + " not found or not executable");
    }
    return prog;
  }
  std::string path;
  if (auto it = options.env.find("PATH"); it != options.env.end()) {
    path = it->second;
  } else if (const char* p = ::getenv("PATH"); p != nullptr && !options.clear_env) {
    path = p;
  } else {
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + prog;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return NotFoundError("program " + prog + " not found in PATH");
}

// Everything the child needs, prepared before fork so the child only makes
// async-signal-safe calls (hpodd is multi-threaded).
struct ChildPlan {
  std::string program;
  std::vector<std::string> argv_storage, env_storage;
  std::vector<char*> argv, envp;
  std::string cwd;
  std::string output_file;
  std::string pty_slave;  // non-empty: PTY mode
  std::string uts_hostname;
};

void BuildPlan(const SubprocessOptions& options, ChildPlan& plan) {
  plan.argv_storage = options.argv;
  std::map<std::string, std::string> env;
  if (!options.clear_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view kv(*e);
      size_t eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
    }
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  for (const auto& [k, v] : env) plan.env_storage.push_back(k + "=" + v);
  for (auto& a : plan.argv_storage) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (auto& e : plan.env_storage) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.cwd = options.cwd;
  plan.uts_hostname = options.uts_hostname;
}

// Reports errno from the child to the parent through the CLOEXEC error pipe.
[[noreturn]] void ChildFail(int err_fd, int stage) {
  int payload[2] = {stage, errno};
  ssize_t ignored = ::write(err_fd, payload, sizeof(payload));
  (void)ignored;
  ::_exit(127);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void ChildMain(const ChildPlan& plan, int in_fd, int out_fd, int err_out_fd,
                            int err_fd) {
  // Handlers and the mask are inherited across fork; a daemon that blocks SIGTERM
  // for its signal watcher must not pass that on to its children.
  ResetSignalsForExec();

  if (::setsid() < 0) ChildFail(err_fd, 1);
  if (!plan.uts_hostname.empty()) {
    if (::unshare(CLONE_NEWUTS) < 0) ChildFail(err_fd, 8);
    if (::sethostname(plan.uts_hostname.data(), plan.uts_hostname.size()) < 0) {
      ChildFail(err_fd, 9);
    }
  }
  if (!plan.pty_slave.empty()) {
    int slave = ::open(plan.pty_slave.c_str(), O_RDWR);
    if (slave < 0) ChildFail(err_fd, 2);
    if (::ioctl(slave, TIOCSCTTY, 0) < 0) ChildFail(err_fd, 3);
    in_fd = out_fd = err_out_fd = slave;
  } else if (!plan.output_file.empty()) {
    int f = ::open(plan.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (f < 0) ChildFail(err_fd, 4);
    out_fd = err_out_fd = f;
  }
  if (in_fd >= 0 && ::dup2(in_fd, 0) < 0) ChildFail(err_fd, 5);
  if (out_fd >= 0 && ::dup2(out_fd, 1) < 0) ChildFail(err_fd, 5);
  if (err_out_fd >= 0 && ::dup2(err_out_fd, 2) < 0) ChildFail(err_fd, 5);
  // Close everything else except the error pipe (which closes itself on exec).
  if (err_fd > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(err_fd - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(err_fd + 1), ~0u, 0u);
  if (!plan.cwd.empty() && ::chdir(plan.cwd.c_str()) < 0) ChildFail(err_fd, 6);
  ::execve(plan.program.c_str(), plan.argv.data(), plan.envp.data());
  ChildFail(err_fd, 7);
}

const char* StageName(int stage) {
  switch (stage) {
    case 1:
      return "setsid";
    case 2:
      return "opening the pty";
    case 3:
      return "TIOCSCTTY";
    case 4:
      return "opening the output file";
    case 5:
      return "dup2";
    case 6:
      return "chdir";
    case 8:
      return "a UTS namespace of its own";
    case 9:
      return "sethostname";
    default:
      return "exec";
  }
}

// Forks and execs. `in_fd`/`out_fd`/`err_out_fd` become the child's 0/1/2 (-1:
// inherit). Returns the pid once exec succeeded.
StatusOr<pid_t> SpawnChild(const ChildPlan& plan, int in_fd, int out_fd, int err_out_fd) {
  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC) < 0) {
    return InternalError(std::string("pipe2: ") + ::strerror(errno));
  }
  Fd err_read(errpipe[0]), err_write(errpipe[1]);
  pid_t pid = ::fork();
  if (pid < 0) return InternalError(std::string("fork: ") + ::strerror(errno));
  if (pid == 0) ChildMain(plan, in_fd, out_fd, err_out_fd, err_write.get());
  err_write.Reset();
  int payload[2];
  ssize_t n;
  do {
    n = ::read(err_read.get(), payload, sizeof(payload));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(payload))) {
    int status;
    ::waitpid(pid, &status, 0);
    std::string msg = std::string("starting ") + plan.argv_storage[0] + ": " +
                      StageName(payload[0]) + ": " + ::strerror(payload[1]);
    if (payload[0] == 7 && payload[1] == ENOENT) return NotFoundError(msg);
    if (payload[0] == 6) return InvalidArgumentError(msg);
    return InternalError(msg);
  }
  return pid;
}

int DecodeWaitStatus(int status, bool* signaled) {
  if (WIFSIGNALED(status)) {
    if (signaled) *signaled = true;
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
#else
  return -1;
#endif
}

}  // namespace

StatusOr<SubprocessResult> RunCommand(const SubprocessOptions& options) {
  if (options.argv.empty()) return InvalidArgumentError("RunCommand: empty argv");
  ChildPlan plan;
  HPOD_ASSIGN_OR_RETURN(plan.program, ResolveProgram(options));
  BuildPlan(options, plan);

  int p[2];
  Fd in_r, in_w, out_r, out_w, err_r, err_w;
  if (options.stdin_data) {
    if (::pipe2(p, O_CLOEXEC) < 0) return InternalError("pipe2 failed");
    in_r.Reset(p[0]);
    in_w.Reset(p[1]);
  } else {
    in_r.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  if (::pipe2(p, O_CLOEXEC) < 0) return InternalError("pipe2 failed");
  out_r.Reset(p[0]);
  out_w.Reset(p[1]);
  if (!options.merge_stderr) {
    if (::pipe2(p, O_CLOEXEC) < 0) return InternalError("pipe2 failed");
    err_r.Reset(p[0]);
    err_w.Reset(p[1]);
  }
  auto start = SteadyClock::now();
  HPOD_ASSIGN_OR_RETURN(pid_t pid, SpawnChild(plan, in_r.get(), out_w.get(),
                                              options.merge_stderr ? out_w.get() : err_w.get()));
  in_r.Reset();
  out_w.Reset();
  err_w.Reset();
  Fd pidfd(OpenPidfd(pid));
  if (in_w.get() >= 0) ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);

  SubprocessResult result;
  std::string_view to_write = options.stdin_data ? std::string_view(*options.stdin_data) : "";
  if (in_w.get() >= 0 && to_write.empty()) in_w.Reset();

  auto deliver = [&](bool is_err, const char* data, size_t n) {
    const auto& cb = is_err ? options.on_stderr : options.on_stdout;
    if (cb) {
      cb(std::string_view(data, n));
      return;
    }
    std::string& dst = is_err ? result.stderr_data : result.stdout_data;
    size_t room =
        options.max_captured_bytes > dst.size() ? options.max_captured_bytes - dst.size() : 0;
    if (n > room) result.truncated = true;
    dst.append(data, std::min(n, room));
  };

  const bool has_timeout = options.timeout.count() > 0;
  const auto deadline = start + options.timeout;
  SteadyClock::time_point kill_at{};
  bool term_sent = false, kill_sent = false, exited = false;
  int wait_status = 0;
  // After the child exits, grandchildren may still hold the pipes (a daemon it
  // started); drain briefly rather than wait for them.
  SteadyClock::time_point drain_until{};
  char buf[65536];

  while (true) {
    if (!exited) {
      pid_t r = ::waitpid(pid, &wait_status, WNOHANG);
      if (r == pid) {
        exited = true;
        drain_until = SteadyClock::now() + Ms(200);
        // A timed-out run leaves nothing behind in its group.
        if (term_sent) ::kill(-pid, SIGKILL);
      }
    }
    bool pipes_open = out_r.get() >= 0 || err_r.get() >= 0;
    if (exited && !pipes_open) break;
    auto now = SteadyClock::now();
    if (exited && now >= drain_until) break;
    if (!exited && has_timeout && !term_sent && now >= deadline) {
      result.timed_out = true;
      term_sent = true;
      ::kill(-pid, SIGTERM);
      kill_at = now + options.kill_grace;
    }
    if (!exited && term_sent && !kill_sent && now >= kill_at) {
      kill_sent = true;
      ::kill(-pid, SIGKILL);
    }

    // Poll timeout: until the next event we must act on.
    SteadyClock::time_point next = now + Ms(1000);
    if (exited) next = drain_until;
    if (!exited && has_timeout && !term_sent) next = std::min(next, deadline);
    if (!exited && term_sent && !kill_sent) next = std::min(next, kill_at);
    if (pidfd.get() < 0 && !exited) next = std::min(next, now + Ms(10));
    int wait_ms = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<Ms>(next - now).count() + 1));

    pollfd fds[4];
    int nfds = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1;
    if (out_r.get() >= 0) fds[i_out = nfds++] = {out_r.get(), POLLIN, 0};
    if (err_r.get() >= 0) fds[i_err = nfds++] = {err_r.get(), POLLIN, 0};
    if (in_w.get() >= 0) fds[i_in = nfds++] = {in_w.get(), POLLOUT, 0};
    if (pidfd.get() >= 0 && !exited) fds[i_pid = nfds++] = {pidfd.get(), POLLIN, 0};
    int pr = ::poll(fds, nfds, wait_ms);
    if (pr < 0 && errno != EINTR) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &wait_status, 0);
      return InternalError(std::string("poll: ") + ::strerror(errno));
    }
    if (pr <= 0) continue;
    auto read_stream = [&](int idx, Fd& fd, bool is_err) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n > 0) {
        deliver(is_err, buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        fd.Reset();
      }
    };
    read_stream(i_out, out_r, false);
    read_stream(i_err, err_r, true);
    if (i_in >= 0 && (fds[i_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::write(in_w.get(), to_write.data(), to_write.size());
      if (n > 0) to_write.remove_prefix(static_cast<size_t>(n));
      // EPIPE (we ignore SIGPIPE below) means the child stopped reading: stop too.
      if (to_write.empty() || (n < 0 && errno != EAGAIN && errno != EINTR)) in_w.Reset();
    }
    (void)i_pid;  // its readiness only wakes the loop; waitpid above reaps
  }
  result.exit_code = DecodeWaitStatus(wait_status, &result.signaled);
  result.elapsed = std::chrono::duration_cast<Ms>(SteadyClock::now() - start);
  return result;
}

namespace {
// Writing to a child that exited must not kill the daemon: SIGPIPE is ignored once
// per process (before any write to a child's stdin), and the write fails with EPIPE.
struct IgnoreSigpipe {
  IgnoreSigpipe() { ::signal(SIGPIPE, SIG_IGN); }
} ignore_sigpipe;
}  // namespace

StatusOr<std::string> RunChecked(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout) {
  SubprocessOptions options;
  options.argv = argv;
  options.timeout = timeout;
  HPOD_ASSIGN_OR_RETURN(SubprocessResult r, RunCommand(options));
  if (r.exit_code == 0 && !r.timed_out) return std::move(r.stdout_data);
  auto last_line = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    size_t nl = s.rfind('\n');
    return nl == std::string::npos ? s : s.substr(nl + 1);
  };
  std::string detail = last_line(r.stderr_data);
  if (detail.empty()) detail = last_line(r.stdout_data);
  if (detail.empty()) detail = "exit status " + std::to_string(r.exit_code);
  if (r.timed_out) {
    return DeadlineExceededError(Join(argv) + ": timed out after " +
                                 std::to_string(timeout.count()) + " ms");
  }
  return InternalError(Join(argv) + ": " + detail);
}

StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const SubprocessOptions& options,
                                                        int* pty_master, unsigned short rows,
                                                        unsigned short cols) {
  if (options.argv.empty()) return InvalidArgumentError("Subprocess::Start: empty argv");
  ChildPlan plan;
  HPOD_ASSIGN_OR_RETURN(plan.program, ResolveProgram(options));
  BuildPlan(options, plan);
  Fd master, devnull;
  if (pty_master != nullptr) {
    master.Reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (master.get() < 0) return InternalError(std::string("posix_openpt: ") + ::strerror(errno));
    if (::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) {
      return InternalError(std::string("grantpt/unlockpt: ") + ::strerror(errno));
    }
    char name[128];
    if (::ptsname_r(master.get(), name, sizeof(name)) != 0) {
      return InternalError(std::string("ptsname_r: ") + ::strerror(errno));
    }
    plan.pty_slave = name;
    struct winsize ws = {};
    ws.ws_row = rows;
    ws.ws_col = cols;
    if (::ioctl(master.get(), TIOCSWINSZ, &ws) < 0) {
      return InternalError(std::string("TIOCSWINSZ: ") + ::strerror(errno));
    }
  } else {
    devnull.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    plan.output_file = options.output_file;
  }
  HPOD_ASSIGN_OR_RETURN(pid_t pid, SpawnChild(plan, devnull.get(), -1, -1));
  if (pty_master != nullptr) *pty_master = master.Release();
  return std::unique_ptr<Subprocess>(new Subprocess(pid, OpenPidfd(pid)));
}

Subprocess::~Subprocess() {
  if (!released_ && !reaped_) {
    Kill();
    Wait(Ms(-1));
  }
  if (pidfd_ >= 0) ::close(pidfd_);
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return exit_code_;
  auto reap = [&](int options) -> bool {
    int status;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, options);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
      exit_code_ = DecodeWaitStatus(status, nullptr);
      reaped_ = true;
      return true;
    }
    if (r < 0 && errno == ECHILD) {  // reaped elsewhere; the status is lost
      exit_code_ = -1;
      reaped_ = true;
      return true;
    }
    return false;
  };
  if (timeout.count() < 0) {
    reap(0);
    return exit_code_;
  }
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (reap(WNOHANG)) return exit_code_;
    auto now = SteadyClock::now();
    if (now >= deadline) return std::nullopt;
    auto left = std::chrono::duration_cast<Ms>(deadline - now).count() + 1;
    if (pidfd_ >= 0) {
      pollfd pfd = {pidfd_, POLLIN, 0};
      ::poll(&pfd, 1, static_cast<int>(left));
    } else {
      std::this_thread::sleep_for(Ms(std::min<int64_t>(left, 10)));
    }
  }
}

void Subprocess::Kill() {
  if (!reaped_) ::kill(-pid_, SIGKILL);
}

}  // namespace hpod
