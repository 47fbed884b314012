#include "hpod/slurm/spank/step_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <fstream>
#include <iterator>

#include "hpod/slurm/spank/options.h"

extern char** environ;

namespace hpod::spank {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

// Shared with the signal handler, hence lock-free atomics of process scope.
std::atomic<pid_t> g_child{0};
std::atomic<int> g_user_signal{0};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

void ForwardSignal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  g_user_signal.store(sig);
  const pid_t child = g_child.load();
  // A signal from the terminal (SI_KERNEL: Ctrl-C, hang-up) already reached the
  // child, which shares our foreground process group. Sending it again would turn
  // srun's single Ctrl-C (print the tasks' state) into its double Ctrl-C (abort).
  if (child > 0 && info->si_code != SI_KERNEL) kill(child, sig);
  errno = saved_errno;
}

std::string Errno() { return strerror(errno); }

bool ParseInt(const char* s, long* out) {
  if (s == nullptr || *s == '\0') return false;
  const char* end = s + strlen(s);
  auto [p, ec] = std::from_chars(s, end, *out);
  return ec == std::errc() && p == end;
}

// Restores what Run changed, on every path out of it. Not thread-safe: one per Run.
class SignalScope {
 public:
  SignalScope() {
    struct sigaction sa {};
    sa.sa_sigaction = ForwardSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &sa, &old_[i]);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    // SIG_IGN for SIGCHLD would reap the child behind waitpid's back.
    sigaction(SIGCHLD, &dfl, &old_chld_);
    sigset_t block;
    sigemptyset(&block);
    for (int s : kForwarded) sigaddset(&block, s);
    // Blocked until the child's pid is known, so that no signal is lost in between.
    pthread_sigmask(SIG_BLOCK, &block, &old_mask_);
  }
  ~SignalScope() {
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old_[i], nullptr);
    sigaction(SIGCHLD, &old_chld_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // Once the child runs: forwarded signals are delivered again.
  void Unblock() {
    sigset_t unblock;
    sigemptyset(&unblock);
    for (int s : kForwarded) sigaddset(&unblock, s);
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  }

 private:
  struct sigaction old_[3];
  struct sigaction old_chld_;
  sigset_t old_mask_;
};

// The step-id pipe; both ends close with it. Not thread-safe: one per Run.
class Pipe {
 public:
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  Status Open() {
    if (pipe2(fds_, O_CLOEXEC) != 0) return UnavailableError("pipe: " + Errno());
    return OkStatus();
  }
  int read_fd() const { return fds_[0]; }
  int write_fd() const { return fds_[1]; }
  void CloseRead() {
    if (fds_[0] >= 0) close(fds_[0]);
    fds_[0] = -1;
  }
  void CloseWrite() {
    if (fds_[1] >= 0) close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

// What the child srun wrote, read without blocking: a grandchild that inherited
// the write end could keep the pipe open after the child exited.
std::string ReadStepId(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  char buf[64];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return "";
  std::string id(buf, static_cast<std::size_t>(n));
  id = id.substr(0, id.find('\n'));
  for (char c : id) {
    if (c < '0' || c > '9') return "";  // not a step id: ignore rather than print garbage
  }
  return id;
}

}  // namespace

std::vector<std::string> AttemptArgv(const std::vector<std::string>& argv, int attempt,
                                     bool overlap) {
  std::vector<std::string> out = argv;
  if (overlap && attempt >= 1 && !out.empty()) out.insert(out.begin() + 1, "--overlap");
  return out;
}

std::vector<std::string> AttemptEnv(
    char** base, const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> out;
  for (char** e = base; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || name == k;
    if (!replaced) out.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides) out.push_back(k + "=" + v);
  return out;
}

StatusOr<std::vector<std::string>> ReadCmdline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return UnavailableError("cannot read " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::size_t pos = 0;
  while (pos < data.size()) {
    std::size_t nul = data.find('\0', pos);
    if (nul == std::string::npos) nul = data.size();
    argv.push_back(data.substr(pos, nul - pos));
    pos = nul + 1;
  }
  if (argv.empty()) return UnavailableError(path + " is empty");
  return argv;
}

Status ReportStepIdToSupervisor(const char* fd_env, const char* pid_env, pid_t parent,
                                std::string_view step_id) {
  long fd = -1;
  long pid = -1;
  if (!ParseInt(fd_env, &fd) || fd < 0 || !ParseInt(pid_env, &pid)) {
    return FailedPreconditionError("no step-id pipe in the environment");
  }
  if (pid != parent) return FailedPreconditionError("the supervisor is not our parent");
  struct stat st {};
  if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISFIFO(st.st_mode)) {
    return FailedPreconditionError("fd " + std::to_string(fd) + " is not the step-id pipe");
  }
  std::string line = std::string(step_id) + "\n";
  ssize_t n;
  do {
    n = write(static_cast<int>(fd), line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  close(static_cast<int>(fd));
  if (n != static_cast<ssize_t>(line.size())) {
    return UnavailableError("write to the step-id pipe: " + std::string(strerror(err)));
  }
  return OkStatus();
}

StatusOr<RunResult> ForkExecRunner::Run(int attempt, const StepWatch& watch) {
  Pipe pipe;
  std::vector<std::pair<std::string, std::string>> overrides = options_.env;
  overrides.emplace_back(kAttemptEnv, std::to_string(attempt));
  if (options_.step_id_pipe) {
    HPOD_RETURN_IF_ERROR(pipe.Open());
    overrides.emplace_back(kStepFdEnv, std::to_string(pipe.write_fd()));
    overrides.emplace_back(kSupervisorPidEnv, std::to_string(getpid()));
  }
  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls are allowed (srun may have other threads).
  const std::vector<std::string> argv =
      AttemptArgv(options_.argv, attempt, options_.overlap_on_retry);
  const std::vector<std::string> env = AttemptEnv(environ, overrides);
  if (argv.empty()) return InvalidArgumentError("no command to run");
  std::vector<char*> argv_c;
  for (const auto& a : argv) argv_c.push_back(const_cast<char*>(a.c_str()));
  argv_c.push_back(nullptr);
  std::vector<char*> env_c;
  for (const auto& e : env) env_c.push_back(const_cast<char*>(e.c_str()));
  env_c.push_back(nullptr);
  const std::string exec_error =
      "[Auto Resume] Error: cannot run " + options_.executable + " for the step\n";
  const char* exe = options_.executable.c_str();
  const int write_fd = pipe.write_fd();

  g_user_signal.store(0);
  SignalScope signals;
  const pid_t pid = fork();
  if (pid < 0) return UnavailableError("fork: " + Errno());
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s : kForwarded) sigaction(s, &dfl, nullptr);
    if (write_fd >= 0) fcntl(write_fd, F_SETFD, 0);  // survive exec: the child srun's end
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(exe, argv_c.data(), env_c.data());
    ssize_t ignored = write(STDERR_FILENO, exec_error.data(), exec_error.size());
    (void)ignored;
    _exit(127);
  }
  g_child.store(pid);
  signals.Unblock();
  pipe.CloseWrite();

  int status = 0;
  pid_t waited;
  bool ended_by_watch = false;
  if (!watch) {
    do {
      waited = waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
  } else {
    // Polls the child every 50 ms and the watch every watch_interval; once the
    // watch says so, SIGKILL (srun's own SIGTERM handling would wait for the
    // lost node's tasks) and reap.
    auto next_watch = std::chrono::steady_clock::now() + options_.watch_interval;
    while (true) {
      waited = waitpid(pid, &status, WNOHANG);
      if (waited != 0 && !(waited < 0 && errno == EINTR)) break;
      if (!ended_by_watch && std::chrono::steady_clock::now() >= next_watch) {
        if (watch()) {
          ended_by_watch = true;
          kill(pid, SIGKILL);
        }
        next_watch = std::chrono::steady_clock::now() + options_.watch_interval;
      }
      struct timespec ts {
        0, 50 * 1000 * 1000
      };
      nanosleep(&ts, nullptr);
    }
  }
  g_child.store(0);
  if (waited < 0) return InternalError("waitpid: " + Errno());

  RunResult result;
  result.ended_by_watch = ended_by_watch;
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  result.user_signal = g_user_signal.exchange(0);
  if (pipe.read_fd() >= 0) result.step_id = ReadStepId(pipe.read_fd());
  return result;
}

}  // namespace hpod::spank
