#include "hpod/agent/session.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "hpod/agent/slurm_node.h"
#include "hpod/agent/user_lookup.h"
#include "hpod/base/signals.h"
#include "hpod/base/subprocess.h"

extern char** environ;

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

// Shells on a node of a cluster without Slurm answer Slurm's commands with a hint
// (instead of Slurm's "DNS SRV lookup failed") through bash functions exported in
// the session's environment. Why this mechanism: a pool host's /etc and /root are
// the machine's own, where hpod never writes (so no /etc/profile.d or .bashrc); a wrapper directory
// on PATH does not survive a login shell (/etc/profile resets PATH, and sessions run `bash -l` or
// `bash -lc CMD`); exported functions (BASH_FUNC_<name>%%) survive `bash -l`, reach child bash
// processes (a script that calls sinfo), and take precedence over PATH. Only sessions of such nodes
// get them: Slurm clusters are unchanged.
std::string ShellFunctionFor(std::string_view command) {
  std::string hint = NoSlurmHint(command);  // no single quote in it
  return "() { echo '" + hint + "' >&2; return 1; }";
}

// The child of a session and the descriptors that reach it: a Subprocess on a PTY,
// or (without a PTY) a child of our own with pipes, because Subprocess has no
// streamed stdin yet.
class SessionChild {
 public:
  ~SessionChild() {
    Kill();
    if (input_fd_ >= 0) ::close(input_fd_);
    if (output_fd_ >= 0 && output_fd_ != input_fd_) ::close(output_fd_);
    if (pid_ > 0 && !exit_code_) ::waitpid(pid_, nullptr, 0);
  }

  static StatusOr<std::unique_ptr<SessionChild>> Start(const SessionRequest& request) {
    auto child = std::make_unique<SessionChild>();
    std::vector<std::string> argv = SessionArgv(request);
    std::error_code ec;
    std::string cwd = std::filesystem::is_directory("/root", ec) ? "/root" : "/";
    if (request.unprivileged && request.user.empty()) {
      return PermissionDeniedError("this caller may open sessions as a regular user only");
    }
    if (!request.user.empty()) {
      std::optional<UserEntry> pw = LookupUser(request.user);
      if (!pw) return NotFoundError("no user '" + request.user + "' on this node");
      if (request.unprivileged && pw->uid < kFirstRegularUid) {
        return PermissionDeniedError("'" + request.user + "' is a system account (uid " +
                                     std::to_string(pw->uid) +
                                     "); a key of the user role opens sessions as regular users "
                                     "only");
      }
      // The user's home, as a login does.
      cwd = std::filesystem::is_directory(pw->home, ec) ? pw->home : "/";
    }
    const std::map<std::string, std::string> extra_env = SessionEnvironment(kNoSlurmMarker);
    if (request.pty) {
      SubprocessOptions options;
      options.argv = argv;
      options.cwd = cwd;
      options.env = extra_env;
      options.env["TERM"] = "xterm-256color";
      options.env["HOME"] = "/root";
      options.uts_hostname = request.uts_hostname;
      int master = -1;
      HPOD_ASSIGN_OR_RETURN(child->pty_child_,
                            Subprocess::Start(options, &master, request.rows, request.cols));
      child->input_fd_ = child->output_fd_ = master;
      return child;
    }
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return InternalError("pipe failed");
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      return InternalError("pipe failed");
    }
    // Everything the child needs is built before fork: only async-signal-safe calls
    // happen between fork and exec.
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::vector<std::string> env_strings = {"HOME=/root"};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("HOME=", 0) != 0) env_strings.emplace_back(*e);
    }
    for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
    std::vector<char*> cenv;
    for (auto& e : env_strings) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const std::string& uts = request.uts_hostname;
    pid_t pid = ::fork();
    if (pid < 0) return InternalError("fork failed");
    if (pid == 0) {
      ::setsid();
      if (!uts.empty() &&
          (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(uts.data(), uts.size()) != 0)) {
        _exit(126);
      }
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      if (::chdir(cwd.c_str()) != 0) _exit(126);
      // The agent blocks SIGTERM/SIGINT for its watcher and ignores SIGPIPE;
      // a session's shell must not inherit either (Ctrl-C, timeout(1), kill).
      ResetSignalsForExec();
      ::execvpe(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    child->pid_ = pid;
    child->input_fd_ = in[1];
    child->output_fd_ = out[0];
    return child;
  }

  int output_fd() const { return output_fd_; }
  bool is_pty() const { return pty_child_ != nullptr; }

  // Writes all of `data` to the child's stdin, waiting at most 30 s for room.
  bool WriteInput(std::string_view data) {
    if (input_fd_ < 0) return false;
    while (!data.empty()) {
      pollfd pfd{input_fd_, POLLOUT, 0};
      if (::poll(&pfd, 1, 30000) <= 0) return false;
      ssize_t n = ::write(input_fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  void Resize(unsigned short rows, unsigned short cols) {
    if (!is_pty()) return;
    struct winsize ws = {};
    ws.ws_row = rows;
    ws.ws_col = cols;
    ::ioctl(input_fd_, TIOCSWINSZ, &ws);
  }

  // The client's stdin ended: close the child's stdin (a PTY gets ^D instead, which
  // a line-reading program takes as end of input).
  void CloseInput() {
    if (is_pty()) {
      WriteInput("\x04");
    } else if (input_fd_ >= 0) {
      ::close(input_fd_);
      input_fd_ = -1;
    }
  }

  std::optional<int> Poll() {
    if (pty_child_) return pty_child_->Wait(milliseconds(0));
    if (exit_code_) return exit_code_;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return exit_code_;
  }

  void Kill() {
    if (pty_child_) {
      pty_child_->Kill();
    } else if (pid_ > 0 && !exit_code_) {
      ::kill(-pid_, SIGKILL);
    }
  }

 private:
  std::unique_ptr<Subprocess> pty_child_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  int input_fd_ = -1;
  int output_fd_ = -1;
};

}  // namespace

const char* const kSlurmCommands[7] = {"sinfo",  "squeue",   "sbatch", "srun",
                                       "salloc", "scontrol", "scancel"};

std::string NoSlurmHint(std::string_view command) {
  return std::string(command) +
         ": this hpod cluster has no Slurm (no instance group has a Slurm role); see "
         "/opt/hpod/motd";
}

std::map<std::string, std::string> SessionEnvironment(const std::string& no_slurm_marker) {
  std::map<std::string, std::string> env;
  std::error_code ec;
  if (!std::filesystem::exists(no_slurm_marker, ec)) return env;
  for (const char* command : kSlurmCommands) {
    env["BASH_FUNC_" + std::string(command) + "%%"] = ShellFunctionFor(command);
  }
  return env;
}

std::vector<std::string> SessionArgv(const SessionRequest& request) {
  // A login shell greets with the node's motd (written with its Slurm role, as
  // HyperPod's nodes do at login); `exec -l` keeps it a login shell.
  constexpr char kMotd[] = "[ -r /opt/hpod/motd ] && cat /opt/hpod/motd; ";
  if (request.user.empty()) {
    if (!request.argv.empty()) return request.argv;
    return {"/bin/bash", "-c", std::string(kMotd) + "exec -l /bin/bash"};
  }
  if (request.argv.empty()) {
    // The name is $0 of the script, never part of it.
    return {"/bin/bash", "-c", std::string(kMotd) + "exec runuser -l \"$0\"", request.user};
  }
  std::vector<std::string> argv = {"runuser", "-u", request.user, "--"};
  argv.insert(argv.end(), request.argv.begin(), request.argv.end());
  return argv;
}

StatusOr<SessionRequest> ParseSessionRequest(const Json& message) {
  HPOD_ASSIGN_OR_RETURN(auto open, api::agentproto::OpenSession::FromJson(message));
  SessionRequest request;
  request.session_id = std::move(open.session_id);
  request.argv = std::move(open.argv);
  request.rows = static_cast<unsigned short>(open.rows);  // 0..65535, checked
  request.cols = static_cast<unsigned short>(open.cols);
  request.pty = open.pty;
  // A user name reaches runuser's command line: nothing but a name.
  const std::string& u = open.user;
  if (!u.empty() &&
      (u.size() > 32 || !(std::islower(static_cast<unsigned char>(u[0])) || u[0] == '_') ||
       u.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)) {
    return InvalidArgumentError("open_session.user '" + u + "' is not a user name");
  }
  request.user = u;
  request.unprivileged = open.unprivileged;
  return request;
}

std::string EncodeFrame(FrameKind kind, std::string_view payload) {
  std::string frame(1, static_cast<char>(kind));
  frame.append(payload);
  return frame;
}

std::string EncodeExitFrame(int32_t status) {
  uint32_t v = static_cast<uint32_t>(status);
  char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                   static_cast<char>(v >> 8), static_cast<char>(v)};
  return EncodeFrame(FrameKind::kExit, std::string_view(bytes, 4));
}

void RunSession(const Dial& dial, const SessionRequest& request, const std::atomic<bool>& stop) {
  auto ws = http::WebSocketClient::Connect(dial.url, dial.headers, dial.options);
  if (!ws.ok()) {
    spdlog::warn("session {}: cannot open its socket: {}", request.session_id,
                 ws.status().message());
    return;
  }
  http::WebSocketClient& socket = **ws;
  auto started = SessionChild::Start(request);
  if (!started.ok()) {
    (void)socket.Send(
        EncodeFrame(FrameKind::kError,
                    "cannot start " +
                        (request.argv.empty() ? std::string("/bin/bash") : request.argv[0]) + ": " +
                        started.status().message()),
        true);
    socket.Close("start failed");
    return;
  }
  SessionChild& child = **started;
  spdlog::info("session {} started", request.session_id);

  // Output relay: its own thread, so a child that prints while we wait for input
  // is never held up.
  std::atomic<bool> output_done{false};
  std::atomic<bool> reader_stop{false};
  std::thread reader([&] {
    char buf[32 * 1024];
    while (!reader_stop.load()) {
      pollfd pfd{child.output_fd(), POLLIN, 0};
      int ready = ::poll(&pfd, 1, 100);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      ssize_t n = ::read(child.output_fd(), buf, sizeof(buf));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;  // EOF, or EIO once a PTY's last slave closed
      if (!socket.Send(EncodeFrame(FrameKind::kData, std::string_view(buf, n)), true).ok()) break;
    }
    output_done = true;
  });

  bool socket_closed = false;
  std::optional<int> exit_code;
  while (!stop.load()) {
    exit_code = child.Poll();
    if (exit_code) break;
    auto message = socket.Receive(milliseconds(100));
    if (!message.ok()) {
      if (message.status().code() == StatusCode::kDeadlineExceeded) continue;
      socket_closed = true;
      break;
    }
    if (!message->binary || message->data.empty()) continue;
    auto kind = static_cast<FrameKind>(message->data[0]);
    std::string_view payload = std::string_view(message->data).substr(1);
    switch (kind) {
      case FrameKind::kData:
        child.WriteInput(payload);
        break;
      case FrameKind::kResize:
        if (payload.size() >= 4) {
          auto b = [&](size_t i) { return static_cast<unsigned char>(payload[i]); };
          child.Resize(static_cast<unsigned short>(b(0) << 8 | b(1)),
                       static_cast<unsigned short>(b(2) << 8 | b(3)));
        }
        break;
      case FrameKind::kEof:
        child.CloseInput();
        break;
      case FrameKind::kError:
        socket_closed = true;
        break;
      default:
        break;
    }
    if (socket_closed) break;
  }

  if (!exit_code) {
    // The client went away (or the agent is stopping): nobody is left to talk to.
    child.Kill();
    for (int i = 0; i < 50 && !exit_code; ++i) {
      exit_code = child.Poll();
      if (!exit_code) std::this_thread::sleep_for(milliseconds(20));
    }
  }
  // Let the reader drain what the child wrote last; background processes that keep
  // the terminal open must not hold the session forever.
  for (int i = 0; i < 50 && !output_done.load(); ++i) std::this_thread::sleep_for(milliseconds(20));
  reader_stop = true;
  reader.join();
  if (!socket_closed && exit_code) {
    (void)socket.Send(EncodeExitFrame(*exit_code), true);
  }
  socket.Close(socket_closed ? "client closed" : "exited");
  spdlog::info("session {} ended (exit {})", request.session_id, exit_code.value_or(-1));
}

}  // namespace hpod::agent
