#include "hpod/cli/session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "hpod/api/model.h"

namespace hpod::cli {
namespace {

std::string Frame(FrameKind kind, std::string_view payload) {
  std::string out(1, static_cast<char>(kind));
  out.append(payload);
  return out;
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // A non-blocking stdout that is full: wait for room (bounded, then retry).
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return UnavailableError(std::string("writing to stdout: ") + std::strerror(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

// State shared by the two relay directions. Thread contract: the atomics and the
// mutex-guarded message are the only members touched by both threads.
struct RelayState {
  std::atomic<bool> received_end{false};  // the receiver has a result
  std::atomic<bool> abandon{false};       // the sender saw the connection fail
  std::mutex mu;
  std::string abandon_message;  // guarded by mu
  RelayResult result;           // written by the receiver before received_end
};

// Socket -> stdout until exit, error or loss.
RelayResult ReceiveLoop(SessionSocket& socket, const RelayOptions& o, RelayState& state) {
  RelayResult r;
  while (true) {
    StatusOr<std::string> frame = socket.Receive(o.poll_interval);
    if (!frame.ok()) {
      if (frame.status().code() == StatusCode::kDeadlineExceeded) {
        if (state.abandon.load()) {
          std::lock_guard<std::mutex> lock(state.mu);
          r.end = RelayResult::End::kLost;
          r.message = state.abandon_message;
          return r;
        }
        continue;
      }
      r.end = RelayResult::End::kLost;
      r.message = frame.status().message();
      if (state.abandon.load()) {
        // The sender closed the socket after a failed send; that failure is the news.
        std::lock_guard<std::mutex> lock(state.mu);
        r.message = state.abandon_message;
      }
      return r;
    }
    if (frame->empty()) continue;
    std::string_view payload(*frame);
    auto kind = static_cast<FrameKind>(static_cast<uint8_t>(payload[0]));
    payload.remove_prefix(1);
    switch (kind) {
      case FrameKind::kData: {
        Status written = WriteAll(o.stdout_fd, payload);
        if (!written.ok()) {
          r.end = RelayResult::End::kLost;
          r.message = written.message();
          return r;
        }
        break;
      }
      case FrameKind::kExit: {
        if (payload.size() < 4) {
          r.end = RelayResult::End::kError;
          r.message = "malformed exit frame from the node";
          return r;
        }
        auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(payload[i])); };
        r.end = RelayResult::End::kExited;
        r.exit_status = static_cast<int32_t>(b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3));
        return r;
      }
      case FrameKind::kError:
        r.end = RelayResult::End::kError;
        r.message = std::string(payload);
        return r;
      default:
        // Resize and eof only travel towards the node; unknown kinds are ignored so
        // that the protocol can grow.
        break;
    }
  }
}

// Stdin and resizes -> socket until `wake_fd` is readable (the receiver is done).
void SendLoop(SessionSocket& socket, const RelayOptions& o, RelayState& state, int wake_fd) {
  bool failed = false;
  auto send = [&](const std::string& frame) {
    if (failed) return;
    Status s = socket.Send(frame);
    if (s.ok()) return;
    failed = true;
    {
      std::lock_guard<std::mutex> lock(state.mu);
      state.abandon_message = s.message();
    }
    state.abandon.store(true);
    socket.Close();
  };
  auto send_size = [&] {
    if (!o.window_size) return;
    std::optional<std::pair<uint16_t, uint16_t>> size = o.window_size();
    if (size.has_value()) send(EncodeResizeFrame(size->first, size->second));
  };
  if (o.send_window_size) send_size();
  bool stdin_open = o.relay_stdin && o.stdin_fd >= 0;
  if (!stdin_open) send(EncodeEofFrame());
  const bool watch_resize = o.send_window_size && o.resize_fd >= 0;
  std::string buf(32 * 1024, '\0');
  while (!state.received_end.load()) {
    pollfd fds[3];
    nfds_t n = 0;
    fds[n++] = {wake_fd, POLLIN, 0};
    int stdin_index = -1, resize_index = -1;
    if (stdin_open && !failed) {
      stdin_index = static_cast<int>(n);
      fds[n++] = {o.stdin_fd, POLLIN, 0};
    }
    if (watch_resize && !failed) {
      resize_index = static_cast<int>(n);
      fds[n++] = {o.resize_fd, POLLIN, 0};
    }
    int ready = ::poll(fds, n, static_cast<int>(o.poll_interval.count()));
    if (ready <= 0) continue;  // timeout or EINTR (SIGWINCH lands here too)
    if (fds[0].revents != 0) break;
    if (resize_index >= 0 && fds[resize_index].revents != 0) {
      // One read, not a drain loop: the fd may be blocking. Leftover bytes only
      // cause another (harmless) resize frame.
      char drain[64];
      ssize_t ignored = ::read(o.resize_fd, drain, sizeof(drain));
      (void)ignored;
      send_size();
    }
    if (stdin_index >= 0 && fds[stdin_index].revents != 0) {
      ssize_t got = ::read(o.stdin_fd, buf.data(), buf.size());
      if (got > 0) {
        send(EncodeDataFrame(std::string_view(buf.data(), static_cast<size_t>(got))));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        stdin_open = false;
        send(EncodeEofFrame());
      }
    }
  }
}

// Process-wide state for the signal handlers (only async-signal-safe use there).
int g_tty_fd = -1;
termios g_saved_termios;
volatile sig_atomic_t g_raw_active = 0;
volatile sig_atomic_t g_winch_fd = -1;

void OnWinch(int) {
  int saved = errno;
  if (g_winch_fd >= 0) {
    char c = 1;
    ssize_t ignored = ::write(g_winch_fd, &c, 1);
    (void)ignored;
  }
  errno = saved;
}

void OnTerminatingSignal(int sig) {
  if (g_raw_active) ::tcsetattr(g_tty_fd, TCSANOW, &g_saved_termios);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

constexpr int kTerminatingSignals[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};

// Raw mode and signal handling for the length of one session: raw mode on a
// terminal stdin (interactive), a SIGWINCH self-pipe, handlers that restore the
// terminal before a terminating signal takes effect, and SIGPIPE ignored so that a
// closed stdout is an error instead of a silent death in raw mode.
//
// Thread contract: one at a time per process (it owns process-wide handlers);
// construct and destroy on the same thread.
class TerminalGuard {
 public:
  TerminalGuard(int tty_fd, bool interactive) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old_pipe_);
    if (!interactive) return;
    if (::pipe2(winch_pipe_, O_CLOEXEC | O_NONBLOCK) == 0) {
      g_winch_fd = winch_pipe_[1];
      struct sigaction winch {};
      winch.sa_handler = OnWinch;
      winch.sa_flags = SA_RESTART;
      ::sigemptyset(&winch.sa_mask);
      ::sigaction(SIGWINCH, &winch, &old_winch_);
      winch_installed_ = true;
    }
    if (tty_fd >= 0 && ::tcgetattr(tty_fd, &g_saved_termios) == 0) {
      g_tty_fd = tty_fd;
      struct sigaction term {};
      term.sa_handler = OnTerminatingSignal;
      ::sigemptyset(&term.sa_mask);
      for (size_t i = 0; i < std::size(kTerminatingSignals); ++i) {
        ::sigaction(kTerminatingSignals[i], &term, &old_term_[i]);
      }
      term_installed_ = true;
      termios raw = g_saved_termios;
      ::cfmakeraw(&raw);
      g_raw_active = 1;
      if (::tcsetattr(tty_fd, TCSANOW, &raw) != 0) g_raw_active = 0;
    }
  }

  ~TerminalGuard() {
    Restore();
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }

  // Leaves raw mode and removes the handlers; idempotent.
  void Restore() {
    if (g_raw_active) {
      ::tcsetattr(g_tty_fd, TCSANOW, &g_saved_termios);
      g_raw_active = 0;
    }
    if (term_installed_) {
      for (size_t i = 0; i < std::size(kTerminatingSignals); ++i) {
        ::sigaction(kTerminatingSignals[i], &old_term_[i], nullptr);
      }
      term_installed_ = false;
    }
    if (winch_installed_) {
      ::sigaction(SIGWINCH, &old_winch_, nullptr);
      g_winch_fd = -1;
      ::close(winch_pipe_[0]);
      ::close(winch_pipe_[1]);
      winch_installed_ = false;
    }
  }

  int resize_fd() const { return winch_installed_ ? winch_pipe_[0] : -1; }

  TerminalGuard(const TerminalGuard&) = delete;
  TerminalGuard& operator=(const TerminalGuard&) = delete;

 private:
  struct sigaction old_pipe_ {};
  struct sigaction old_winch_ {};
  struct sigaction old_term_[std::size(kTerminatingSignals)]{};
  int winch_pipe_[2] = {-1, -1};
  bool winch_installed_ = false;
  bool term_installed_ = false;
};

std::optional<std::pair<uint16_t, uint16_t>> TerminalSize(int fd) {
  winsize ws{};
  if (fd < 0 || ::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) {
    return std::nullopt;
  }
  return std::make_pair(static_cast<uint16_t>(ws.ws_row), static_cast<uint16_t>(ws.ws_col));
}

// A StreamUrl that is only a path is relative to the API endpoint.
std::string ResolveStreamUrl(const std::string& url, const std::string& endpoint_url) {
  if (url.empty() || url[0] != '/') return url;
  std::string base = endpoint_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + url;
}

std::string FirstLine(std::string_view text) {
  text = text.substr(0, text.find_first_of("\r\n"));
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return std::string(text);
}

Status ConnectError(const Status& status, const std::string& url) {
  std::string http;
  switch (status.code()) {
    case StatusCode::kUnauthenticated:
      http = "401 Unauthorized";
      break;
    case StatusCode::kPermissionDenied:
      http = "403 Forbidden";
      break;
    case StatusCode::kNotFound:
      http = "404 Not Found";
      break;
    case StatusCode::kInvalidArgument:
      http = "400 Bad Request";
      break;
    default:
      return Status(status.code(), "Could not connect to the session stream \"" + url +
                                       "\": " + FirstLine(status.message()));
  }
  std::string detail = FirstLine(status.message());
  return Status(status.code(), "The session stream \"" + url + "\" refused the connection (HTTP " +
                                   http + ")" + (detail.empty() ? "" : ": " + detail));
}

}  // namespace

std::string EncodeDataFrame(std::string_view data) { return Frame(FrameKind::kData, data); }

std::string EncodeResizeFrame(uint16_t rows, uint16_t cols) {
  const char payload[4] = {static_cast<char>(rows >> 8), static_cast<char>(rows & 0xff),
                           static_cast<char>(cols >> 8), static_cast<char>(cols & 0xff)};
  return Frame(FrameKind::kResize, std::string_view(payload, 4));
}

std::string EncodeEofFrame() { return Frame(FrameKind::kEof, ""); }

std::string EncodeExitFrame(int32_t status) {
  auto u = static_cast<uint32_t>(status);
  const char payload[4] = {static_cast<char>(u >> 24), static_cast<char>(u >> 16 & 0xff),
                           static_cast<char>(u >> 8 & 0xff), static_cast<char>(u & 0xff)};
  return Frame(FrameKind::kExit, std::string_view(payload, 4));
}

std::string EncodeErrorFrame(std::string_view text) { return Frame(FrameKind::kError, text); }

RelayResult RunRelay(SessionSocket& socket, const RelayOptions& options) {
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    RelayResult r;
    r.message = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  RelayState state;
  std::thread receiver([&] {
    state.result = ReceiveLoop(socket, options, state);
    state.received_end.store(true);
    char c = 1;
    ssize_t ignored = ::write(wake[1], &c, 1);
    (void)ignored;
  });
  SendLoop(socket, options, state, wake[0]);
  receiver.join();
  ::close(wake[0]);
  ::close(wake[1]);
  return state.result;
}

StatusOr<int> RunStartSession(ApiClient& client, const StartSessionOptions& options,
                              const SessionIo& io) {
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodStartSession");
  if (op == nullptr) return InternalError("the model has no HpodStartSession operation");
  if (!io.connect) return InternalError("no session connector configured");
  std::ostream& err = *io.err;
  const bool interactive = !options.command.has_value();
  const bool raw = interactive && io.stdin_is_tty;

  Json request = {{"Target", options.target}};
  if (options.command.has_value()) request["Command"] = *options.command;
  if (options.user.has_value()) request["User"] = *options.user;
  if (raw) {
    if (auto size = TerminalSize(io.stdin_fd)) {
      // The model bounds both to 1..1000.
      request["Rows"] = std::min<int>(size->first, 1000);
      request["Cols"] = std::min<int>(size->second, 1000);
    }
  }
  HPOD_ASSIGN_OR_RETURN(Json response, client.Call(*op, request));
  const std::string session_id = response.value("SessionId", std::string());
  const std::string url =
      ResolveStreamUrl(response.value("StreamUrl", std::string()), options.endpoint_url);
  const std::string token = response.value("TokenValue", std::string());
  if (url.empty() || token.empty()) {
    return InternalError("HpodStartSession returned no StreamUrl or TokenValue");
  }
  err << "Starting session with SessionId: " << session_id << "\n" << std::flush;

  StatusOr<std::unique_ptr<SessionSocket>> socket =
      io.connect(url, {{"Authorization", "HpodSession " + token}});
  if (!socket.ok()) return ConnectError(socket.status(), url);

  RelayResult result;
  {
    TerminalGuard guard(io.stdin_fd, interactive);
    RelayOptions relay;
    relay.stdin_fd = io.stdin_fd;
    relay.relay_stdin = interactive || !io.stdin_is_tty;
    relay.stdout_fd = io.stdout_fd;
    relay.send_window_size = raw;
    relay.window_size = [fd = io.stdin_fd] { return TerminalSize(fd); };
    relay.resize_fd = guard.resize_fd();
    relay.poll_interval = io.poll_interval;
    result = RunRelay(**socket, relay);
    guard.Restore();
  }
  (*socket)->Close();

  const char* lead = raw ? "\r\n" : "";
  switch (result.end) {
    case RelayResult::End::kExited:
      if (interactive) {
        err << "\r\nExiting session with sessionId: " << session_id << ".\n" << std::flush;
      }
      return result.exit_status >= 0 && result.exit_status <= 255 ? result.exit_status : 255;
    case RelayResult::End::kError:
      err << lead << "hpod: " << result.message << "\n" << std::flush;
      return 255;
    case RelayResult::End::kLost:
      break;
  }
  err << lead << "hpod: lost the connection to session " << session_id << ": " << result.message
      << "\n"
      << std::flush;
  return 255;
}

}  // namespace hpod::cli
