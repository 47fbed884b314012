// RealSessionConnector + RunStartSession against a real http::Server WebSocket on
// loopback: the Authorization header, binary frames both ways, the exit status,
// and a refused upgrade. A separate binary so that cli_test does not depend on the
// WebSocket implementation.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "hpod/cli/fake_transport.h"
#include "hpod/cli/session.h"
#include "hpod/http/server.h"
#include "hpod/http/websocket.h"

namespace hpod::cli {
namespace {

constexpr const char* kTarget = "sagemaker-cluster:a1b2c3d4e5f6_workers-i-0123456789abcdef0";

// A node stand-in: echoes data frames as "echo:<data>" and, on eof, exits 7.
http::UpgradeResult FakeNode(const http::Request& request, std::shared_ptr<http::WebSocket> ws) {
  if (request.HeaderValue("Authorization") != "HpodSession tok") {
    http::Response refused;
    refused.status = 401;
    refused.body = "invalid session token";
    return refused;
  }
  http::WebSocketCallbacks callbacks;
  std::weak_ptr<http::WebSocket> weak = ws;
  callbacks.on_message = [weak](http::WebSocketMessage m) {
    auto socket = weak.lock();
    if (socket == nullptr || m.data.empty()) return;
    if (m.data[0] == 0) socket->Send(EncodeDataFrame("echo:" + m.data.substr(1)), true);
    if (m.data[0] == 4) {
      socket->Send(EncodeExitFrame(7), true);
      socket->Close("exited");
    }
  };
  callbacks.on_close = [] {};
  return callbacks;
}

class SessionWebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = http::Server::Start(
        {}, [](const http::Request&) { return http::Response{}; }, &FakeNode);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    std::string url = "ws://127.0.0.1:" + std::to_string(server_->port()) + "/v1/sessions/s1";
    transport_.On("HpodStartSession", [this, url](const Json&) -> StatusOr<http::Response> {
      return JsonResponse(200, {{"SessionId", "s1"}, {"StreamUrl", url}, {"TokenValue", token_}});
    });
    ASSERT_EQ(::pipe2(in_, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(out_, O_CLOEXEC), 0);
  }
  void TearDown() override {
    for (int fd : {in_[0], in_[1], out_[0], out_[1]}) {
      if (fd >= 0) ::close(fd);
    }
    if (server_) server_->Shutdown(std::chrono::milliseconds(1000));
  }

  StatusOr<int> Start(const std::string& command) {
    ApiClientOptions options;
    options.max_attempts = 1;
    ApiClient client(options, transport_, clock_, sleeper_);
    StartSessionOptions start;
    start.target = kTarget;
    start.command = command;
    SessionIo io;
    io.stdin_fd = in_[0];
    io.stdout_fd = out_[1];
    io.err = &err_;
    http::ClientOptions connect;
    connect.connect_timeout = std::chrono::milliseconds(5000);
    io.connect = RealSessionConnector(connect);
    io.poll_interval = std::chrono::milliseconds(100);
    return RunStartSession(client, start, io);
  }

  std::string Stdout() {
    ::close(out_[1]);
    out_[1] = -1;
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out_[0], buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }

  std::unique_ptr<http::Server> server_;
  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  std::string token_ = "tok";
  int in_[2] = {-1, -1};
  int out_[2] = {-1, -1};
  std::ostringstream err_;
};

TEST_F(SessionWebSocketTest, RelaysOverARealWebSocket) {
  ASSERT_EQ(::write(in_[1], "ping", 4), 4);
  ::close(in_[1]);
  in_[1] = -1;
  StatusOr<int> code = Start("cat");
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 7) << err_.str();
  EXPECT_EQ(Stdout(), "echo:ping");
}

TEST_F(SessionWebSocketTest, RefusedUpgrade) {
  token_ = "wrong";
  StatusOr<int> code = Start("true");
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.status().message().find(
                "refused the connection (HTTP 401 Unauthorized): invalid session token"),
            std::string::npos)
      << code.status().message();
}

}  // namespace
}  // namespace hpod::cli
