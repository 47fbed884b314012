#include "hpod/cli/session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <sstream>

#include "hpod/cli/fake_transport.h"
#include "hpod/cli/main.h"

namespace hpod::cli {
namespace {

using namespace std::chrono_literals;

// A scripted node end of the stream. `on_send` runs on the sending thread for every
// frame the relay sends and may Push replies.
//
// Thread contract: thread-safe (the relay sends and receives on two threads).
class FakeSessionSocket final : public SessionSocket {
 public:
  std::function<void(const std::string& frame)> on_send;
  // When set, every Send fails with it (a connection that broke while sending).
  Status send_error;

  void Push(std::string frame) {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(frame));
    cv_.notify_all();
  }
  void PeerClose(std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    close_reason_ = std::move(why);
    cv_.notify_all();
  }
  std::vector<std::string> Sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  int close_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return close_calls_;
  }

  Status Send(std::string_view frame) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!send_error.ok()) return send_error;
      if (closed_) return UnavailableError("closed");
      sent_.emplace_back(frame);
    }
    if (on_send) on_send(std::string(frame));
    return OkStatus();
  }
  StatusOr<std::string> Receive(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    // A test that scripts no ending must fail, not hang.
    if (std::chrono::steady_clock::now() - created_ > 10s) {
      return UnavailableError("fake socket: the test scripted no end");
    }
    if (!cv_.wait_for(lock, timeout, [&] { return !incoming_.empty() || closed_; })) {
      return DeadlineExceededError("nothing yet");
    }
    if (!incoming_.empty()) {
      std::string f = std::move(incoming_.front());
      incoming_.pop_front();
      return f;
    }
    return UnavailableError(close_reason_);
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++close_calls_;
    if (!closed_) close_reason_ = "closed by the client";
    closed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> incoming_;
  std::vector<std::string> sent_;
  bool closed_ = false;
  std::string close_reason_;
  int close_calls_ = 0;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
};

// Hands the test's FakeSessionSocket to code that wants to own a socket.
class BorrowedSocket final : public SessionSocket {
 public:
  explicit BorrowedSocket(SessionSocket& s) : s_(s) {}
  Status Send(std::string_view f) override { return s_.Send(f); }
  StatusOr<std::string> Receive(std::chrono::milliseconds t) override { return s_.Receive(t); }
  void Close() override { s_.Close(); }

 private:
  SessionSocket& s_;
};

// A pipe whose ends close with the test.
struct Pipe {
  Pipe() { EXPECT_EQ(::pipe2(fd, O_CLOEXEC), 0); }
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  void CloseRead() {
    if (fd[0] >= 0) ::close(fd[0]);
    fd[0] = -1;
  }
  void CloseWrite() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
  void Write(std::string_view s) {
    ASSERT_EQ(::write(fd[1], s.data(), s.size()), (ssize_t)s.size());
  }
  // Everything written until the write end is closed.
  std::string ReadAll() {
    CloseWrite();
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  int fd[2] = {-1, -1};
};

TEST(SessionFrameTest, Encodings) {
  EXPECT_EQ(EncodeDataFrame("ls\n"), std::string("\x00ls\n", 4));
  EXPECT_EQ(EncodeResizeFrame(24, 80), std::string("\x01\x00\x18\x00\x50", 5));
  EXPECT_EQ(EncodeResizeFrame(300, 1000), std::string("\x01\x01\x2c\x03\xe8", 5));
  EXPECT_EQ(EncodeEofFrame(), std::string("\x04", 1));
  EXPECT_EQ(EncodeExitFrame(258), std::string("\x02\x00\x00\x01\x02", 5));
  EXPECT_EQ(EncodeExitFrame(-1), std::string("\x02\xff\xff\xff\xff", 5));
  EXPECT_EQ(EncodeErrorFrame("no"), std::string("\x03no", 3));
}

class RelayTest : public ::testing::Test {
 protected:
  RelayOptions Options() {
    RelayOptions o;
    o.stdin_fd = stdin_.fd[0];
    o.stdout_fd = stdout_.fd[1];
    o.poll_interval = 50ms;
    return o;
  }
  FakeSessionSocket socket_;
  Pipe stdin_;
  Pipe stdout_;
};

TEST_F(RelayTest, RelaysDataBothWaysThenEofAndExitStatus) {
  // An echo node: answers each data frame and exits 3 when stdin ends.
  socket_.on_send = [this](const std::string& f) {
    if (f[0] == 0) socket_.Push(EncodeDataFrame("echo:" + f.substr(1)));
    if (f[0] == 4) socket_.Push(EncodeExitFrame(3));
  };
  stdin_.Write("hello");
  stdin_.CloseWrite();
  RelayResult r = RunRelay(socket_, Options());
  EXPECT_EQ(r.end, RelayResult::End::kExited);
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(socket_.Sent(), (std::vector<std::string>{EncodeDataFrame("hello"), EncodeEofFrame()}));
  EXPECT_EQ(stdout_.ReadAll(), "echo:hello");
}

TEST_F(RelayTest, WithoutStdinSendsEofFirst) {
  socket_.on_send = [this](const std::string& f) {
    if (f[0] == 4) {
      socket_.Push(EncodeDataFrame("Linux\n"));
      socket_.Push(EncodeExitFrame(0));
    }
  };
  RelayOptions o = Options();
  o.relay_stdin = false;
  stdin_.Write("must not be sent");
  RelayResult r = RunRelay(socket_, o);
  EXPECT_EQ(r.end, RelayResult::End::kExited);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(socket_.Sent(), std::vector<std::string>{EncodeEofFrame()});
  EXPECT_EQ(stdout_.ReadAll(), "Linux\n");
}

TEST_F(RelayTest, SendsWindowSizeAtStartAndOnResize) {
  Pipe winch;
  std::pair<uint16_t, uint16_t> size{24, 80};
  std::mutex mu;
  int resizes = 0;
  socket_.on_send = [&](const std::string& f) {
    if (f[0] != 1) return;
    std::lock_guard<std::mutex> lock(mu);
    if (++resizes == 1) {
      size = {50, 132};
      winch.Write("x");  // what the SIGWINCH handler does
    } else {
      socket_.Push(EncodeExitFrame(0));
    }
  };
  RelayOptions o = Options();
  o.stdin_fd = -1;
  o.send_window_size = true;
  o.resize_fd = winch.fd[0];
  o.window_size = [&]() -> std::optional<std::pair<uint16_t, uint16_t>> {
    std::lock_guard<std::mutex> lock(mu);
    return size;
  };
  RelayResult r = RunRelay(socket_, o);
  EXPECT_EQ(r.end, RelayResult::End::kExited);
  EXPECT_EQ(socket_.Sent(), (std::vector<std::string>{EncodeResizeFrame(24, 80), EncodeEofFrame(),
                                                      EncodeResizeFrame(50, 132)}));
}

TEST_F(RelayTest, ErrorFrameEndsTheRelay) {
  socket_.Push(EncodeDataFrame("partial"));
  socket_.Push(EncodeErrorFrame("node i-0123 is not running"));
  RelayResult r = RunRelay(socket_, Options());
  EXPECT_EQ(r.end, RelayResult::End::kError);
  EXPECT_EQ(r.message, "node i-0123 is not running");
  EXPECT_EQ(stdout_.ReadAll(), "partial");
}

TEST_F(RelayTest, LostConnection) {
  socket_.PeerClose("connection reset by peer");
  RelayResult r = RunRelay(socket_, Options());
  EXPECT_EQ(r.end, RelayResult::End::kLost);
  EXPECT_EQ(r.message, "connection reset by peer");
}

TEST_F(RelayTest, FailedSendClosesAndReportsWhy) {
  socket_.send_error = UnavailableError("broken pipe");
  stdin_.Write("x");
  RelayResult r = RunRelay(socket_, Options());
  EXPECT_EQ(r.end, RelayResult::End::kLost);
  EXPECT_EQ(r.message, "broken pipe");
  EXPECT_EQ(socket_.close_calls(), 1);
}

TEST_F(RelayTest, IgnoresUnknownKindsAndEmptyFrames) {
  socket_.Push("");
  socket_.Push(std::string("\x09whatever", 9));
  socket_.Push(EncodeDataFrame("ok"));
  socket_.Push(EncodeExitFrame(7));
  RelayResult r = RunRelay(socket_, Options());
  EXPECT_EQ(r.exit_status, 7);
  EXPECT_EQ(stdout_.ReadAll(), "ok");
}

// --- the whole command ------------------------------------------------------------

constexpr const char* kTarget = "sagemaker-cluster:a1b2c3d4e5f6_workers-i-0123456789abcdef0";

class StartSessionTest : public ::testing::Test {
 protected:
  StartSessionTest() {
    transport_.On("HpodStartSession", [](const Json&) -> StatusOr<http::Response> {
      return JsonResponse(200, {{"SessionId", "sess-1"},
                                {"StreamUrl", "ws://127.0.0.1:8450/v1/sessions/sess-1"},
                                {"TokenValue", "tok-secret"}});
    });
  }

  SessionIo Io() {
    SessionIo io;
    io.stdin_fd = stdin_.fd[0];
    io.stdout_fd = stdout_.fd[1];
    io.err = &err_;
    io.poll_interval = 50ms;
    io.connect = [this](const std::string& url, const std::vector<http::Header>& headers)
        -> StatusOr<std::unique_ptr<SessionSocket>> {
      url_ = url;
      headers_ = headers;
      if (!connect_error_.ok()) return connect_error_;
      return std::unique_ptr<SessionSocket>(std::make_unique<BorrowedSocket>(socket_));
    };
    return io;
  }

  StatusOr<int> Start(std::optional<std::string> command,
                      const std::function<void(SessionIo&)>& adjust = nullptr) {
    ApiClientOptions options;
    options.max_attempts = 1;
    ApiClient client(options, transport_, clock_, sleeper_);
    StartSessionOptions start;
    start.target = kTarget;
    start.command = std::move(command);
    start.endpoint_url = "http://127.0.0.1:8450";
    SessionIo io = Io();
    if (adjust) adjust(io);
    return RunStartSession(client, start, io);
  }

  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  FakeSessionSocket socket_;
  Status connect_error_;
  std::string url_;
  std::vector<http::Header> headers_;
  Pipe stdin_;
  Pipe stdout_;
  std::ostringstream err_;
};

TEST_F(StartSessionTest, CommandModeSendsTheRequestAndUsesUrlAndToken) {
  socket_.on_send = [this](const std::string& f) {
    if (f[0] == 4) {
      socket_.Push(EncodeDataFrame("hi\n"));
      socket_.Push(EncodeExitFrame(42));
    }
  };
  stdin_.CloseWrite();
  StatusOr<int> code = Start("echo hi; exit 42");
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 42);
  ASSERT_EQ(transport_.calls.size(), 1u);
  EXPECT_EQ(transport_.calls[0].operation, "HpodStartSession");
  EXPECT_EQ(transport_.calls[0].body, Json({{"Target", kTarget}, {"Command", "echo hi; exit 42"}}));
  EXPECT_EQ(url_, "ws://127.0.0.1:8450/v1/sessions/sess-1");
  ASSERT_EQ(headers_.size(), 1u);
  EXPECT_EQ(headers_[0].name, "Authorization");
  EXPECT_EQ(headers_[0].value, "HpodSession tok-secret");
  EXPECT_EQ(stdout_.ReadAll(), "hi\n");
  // No "Exiting session" line for a command, as the SSM plugin.
  EXPECT_EQ(err_.str(), "Starting session with SessionId: sess-1\n");
  EXPECT_GE(socket_.close_calls(), 1);
}

TEST_F(StartSessionTest, InteractiveWithoutTerminalRelaysStdinAndSaysGoodbye) {
  socket_.on_send = [this](const std::string& f) {
    if (f[0] == 4) socket_.Push(EncodeExitFrame(0));
  };
  stdin_.Write("exit\n");
  stdin_.CloseWrite();
  StatusOr<int> code = Start(std::nullopt);
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(transport_.calls[0].body, Json({{"Target", kTarget}}));
  EXPECT_EQ(socket_.Sent(),
            (std::vector<std::string>{EncodeDataFrame("exit\n"), EncodeEofFrame()}));
  EXPECT_EQ(err_.str(),
            "Starting session with SessionId: sess-1\n"
            "\r\nExiting session with sessionId: sess-1.\n");
}

TEST_F(StartSessionTest, InteractiveTerminalIsRawDuringTheSessionAndRestoredAfter) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) GTEST_SKIP() << "no pseudo-terminals here";
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  int tty = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(tty, 0);
  winsize ws{};
  ws.ws_row = 33;
  ws.ws_col = 101;
  ASSERT_EQ(::ioctl(tty, TIOCSWINSZ, &ws), 0);
  termios before{};
  ASSERT_EQ(::tcgetattr(tty, &before), 0);
  ASSERT_NE(before.c_lflag & ICANON, 0u);
  std::atomic<bool> raw_during{false};
  socket_.on_send = [&](const std::string& f) {
    if (f[0] != 1) return;
    termios now{};
    raw_during = ::tcgetattr(tty, &now) == 0 && (now.c_lflag & (ICANON | ECHO)) == 0;
    socket_.Push(EncodeExitFrame(0));
  };
  StatusOr<int> code = Start(std::nullopt, [&](SessionIo& io) {
    io.stdin_fd = tty;
    io.stdin_is_tty = true;
  });
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(transport_.calls[0].body, Json({{"Target", kTarget}, {"Rows", 33}, {"Cols", 101}}));
  ASSERT_FALSE(socket_.Sent().empty());
  EXPECT_EQ(socket_.Sent()[0], EncodeResizeFrame(33, 101));
  EXPECT_TRUE(raw_during.load());
  termios after{};
  ASSERT_EQ(::tcgetattr(tty, &after), 0);
  EXPECT_EQ(after.c_lflag, before.c_lflag);
  EXPECT_EQ(after.c_iflag, before.c_iflag);
  EXPECT_NE(err_.str().find("Exiting session with sessionId: sess-1."), std::string::npos);
  ::close(tty);
  ::close(master);
}

TEST_F(StartSessionTest, ExitStatusOutOfRangeIs255) {
  socket_.Push(EncodeExitFrame(-9));
  EXPECT_EQ(*Start("kill -9 $$"), 255);
}

TEST_F(StartSessionTest, ErrorFrameIs255WithTheNodesText) {
  socket_.Push(EncodeErrorFrame("the node agent is not connected"));
  EXPECT_EQ(*Start("true"), 255);
  EXPECT_EQ(err_.str(),
            "Starting session with SessionId: sess-1\nhpod: the node agent is not connected\n");
}

TEST_F(StartSessionTest, LostConnectionIs255) {
  socket_.PeerClose("EOF");
  EXPECT_EQ(*Start("true"), 255);
  EXPECT_NE(err_.str().find("hpod: lost the connection to session sess-1: EOF\n"),
            std::string::npos)
      << err_.str();
}

TEST_F(StartSessionTest, RefusedUpgradeIsOneLine) {
  connect_error_ = UnauthenticatedError("invalid or expired session token\n");
  StatusOr<int> code = Start("true");
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(),
            "The session stream \"ws://127.0.0.1:8450/v1/sessions/sess-1\" refused the "
            "connection (HTTP 401 Unauthorized): invalid or expired session token");
  connect_error_ = NotFoundError("");
  code = Start("true");
  EXPECT_EQ(code.status().message(),
            "The session stream \"ws://127.0.0.1:8450/v1/sessions/sess-1\" refused the "
            "connection (HTTP 404 Not Found)");
  connect_error_ = UnavailableError("Connection refused");
  code = Start("true");
  EXPECT_EQ(code.status().message(),
            "Could not connect to the session stream \"ws://127.0.0.1:8450/v1/sessions/sess-1\": "
            "Connection refused");
}

TEST_F(StartSessionTest, PathOnlyStreamUrlIsRelativeToTheEndpoint) {
  transport_.On("HpodStartSession", [](const Json&) -> StatusOr<http::Response> {
    return JsonResponse(
        200, {{"SessionId", "s2"}, {"StreamUrl", "/v1/sessions/s2"}, {"TokenValue", "t"}});
  });
  socket_.Push(EncodeExitFrame(0));
  EXPECT_EQ(*Start("true"), 0);
  EXPECT_EQ(url_, "http://127.0.0.1:8450/v1/sessions/s2");
}

TEST_F(StartSessionTest, ServiceErrorsAreTheClisMessage) {
  transport_.Queue("HpodStartSession",
                   {ErrorResponse(400, "ResourceNotFound", "Node i-0123456789abcdef0 not found")});
  StatusOr<int> code = Start("true");
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().aws_type(), "ResourceNotFound");
  EXPECT_EQ(code.status().message(),
            "An error occurred (ResourceNotFound) when calling the HpodStartSession operation: "
            "Node i-0123456789abcdef0 not found");
  EXPECT_TRUE(url_.empty());
}

// --- through cli::Run ---------------------------------------------------------------

class StartSessionCommandTest : public StartSessionTest {
 protected:
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    Runtime rt = FakeRuntime(transport_, clock_, sleeper_, out_, err_);
    rt.stdin_fd = stdin_.fd[0];
    rt.stdout_fd = stdout_.fd[1];
    rt.session_poll_interval = 50ms;
    rt.make_session_connector = [this](const http::ClientOptions& options) {
      connect_timeout_ = options.connect_timeout;
      return Io().connect;
    };
    return cli::Run(args, rt);
  }
  std::ostringstream out_;
  std::chrono::milliseconds connect_timeout_{0};
};

TEST_F(StartSessionCommandTest, RunsACommand) {
  socket_.Push(EncodeDataFrame("done\n"));
  socket_.Push(EncodeExitFrame(5));
  EXPECT_EQ(Run({"start-session", "--target", kTarget, "--command", "make", "--reason", "debug",
                 "--cli-connect-timeout", "7"}),
            5);
  EXPECT_EQ(transport_.calls[0].body, Json({{"Target", kTarget}, {"Command", "make"}}));
  EXPECT_EQ(connect_timeout_, 7000ms);
  EXPECT_EQ(stdout_.ReadAll(), "done\n");
}

TEST_F(StartSessionCommandTest, RunsAsAUser) {
  socket_.Push(EncodeExitFrame(0));
  EXPECT_EQ(Run({"start-session", "--target", kTarget, "--user", "alice", "--command", "id"}), 0);
  EXPECT_EQ(transport_.calls[0].body,
            Json({{"Target", kTarget}, {"Command", "id"}, {"User", "alice"}}));
}

TEST_F(StartSessionCommandTest, CommandLineErrors) {
  EXPECT_EQ(Run({"start-session"}), kExitUsage);
  EXPECT_NE(err_.str().find("hpod: error: the following arguments are required: --target"),
            std::string::npos);
  EXPECT_EQ(Run({"start-session", "--target", kTarget, "--document-name", "AWS-X"}), kExitUsage);
  EXPECT_NE(err_.str().find("Unknown options: --document-name, AWS-X"), std::string::npos);
  // The model's constraints are checked (as botocore does: lengths, not patterns)
  // before anything is sent.
  EXPECT_EQ(Run({"start-session", "--target", ""}), kExitUsage);
  EXPECT_NE(err_.str().find("Invalid length for parameter Target"), std::string::npos)
      << err_.str();
  EXPECT_TRUE(transport_.calls.empty());
}

TEST_F(StartSessionCommandTest, RefusedUpgradeExits255WithOneLine) {
  connect_error_ = PermissionDeniedError("session belongs to another caller");
  EXPECT_EQ(Run({"start-session", "--target", kTarget}), kExitOther);
  EXPECT_EQ(err_.str(),
            "Starting session with SessionId: sess-1\n\n"
            "The session stream \"ws://127.0.0.1:8450/v1/sessions/sess-1\" refused the "
            "connection (HTTP 403 Forbidden): session belongs to another caller\n");
}

TEST_F(StartSessionCommandTest, HelpPages) {
  EXPECT_EQ(Run({"start-session", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("hpod start-session\n    --target <value>\n    [--command <value>]"),
            std::string::npos);
  EXPECT_EQ(Run({"start-session", "--help"}), kExitOk);
  EXPECT_NE(out_.str().find("NAME\n  start-session"), std::string::npos);
  EXPECT_EQ(Run({"logs", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("Possible values: LifecycleConfig | Agent"), std::string::npos);
  EXPECT_EQ(Run({"help"}), kExitOk);
  EXPECT_NE(out_.str().find("\n  start-session  "), std::string::npos);
  EXPECT_NE(out_.str().find("\n  logs  "), std::string::npos);
  // The generated verbs stay available for scripting.
  EXPECT_NE(out_.str().find("\n  hpod-start-session  "), std::string::npos);
  EXPECT_TRUE(transport_.calls.empty());
}

}  // namespace
}  // namespace hpod::cli
