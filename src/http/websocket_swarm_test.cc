// WebSocketSwarm against http::Server's WebSockets over a Unix socket: many
// connections on one thread echo in order, a dropped connection is seen closed by
// the server, a refused upgrade reaches on_open with its status, and a server
// closing a connection reaches on_close. Waits are bounded polls on behaviour.

#include "hpod/http/websocket_swarm.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hpod/http/server.h"

namespace hpod::http {
namespace {

using std::chrono::milliseconds;

bool WaitUntil(const std::function<bool()>& done, milliseconds timeout = milliseconds(10000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

class SwarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "hpod-swarm-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ServerOptions options;
    options.unix_path = dir_ + "/s.sock";
    auto upgrade = [this](const Request& request, std::shared_ptr<WebSocket> socket) {
      if (request.HeaderValue("Authorization") != "ok") {
        Response refused;
        refused.status = 401;
        refused.body = "no";
        return UpgradeResult(refused);
      }
      WebSocketCallbacks callbacks;
      std::weak_ptr<WebSocket> weak = socket;
      callbacks.on_message = [weak](WebSocketMessage m) {
        if (auto s = weak.lock()) {
          if (m.data == "bye") {
            s->Close("asked to");
          } else {
            s->Send(std::move(m.data), false);
          }
        }
      };
      callbacks.on_close = [this] { server_closes_++; };
      return UpgradeResult(std::move(callbacks));
    };
    auto server = Server::Start(
        options, [](const Request&) { return Response{}; }, upgrade);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    client_options_.unix_socket_path = options.unix_path;
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::seconds(5));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  std::unique_ptr<Server> server_;
  WebSocketClientOptions client_options_;
  std::atomic<int> server_closes_{0};
};

TEST_F(SwarmTest, ManyConnectionsEchoInOrderAndDropIsSeenByTheServer) {
  WebSocketSwarm swarm;
  constexpr int kConns = 50, kMessages = 20;
  std::mutex mu;
  std::map<int, std::vector<std::string>> got;
  std::atomic<int> opened{0};
  std::vector<WebSocketSwarm::Id> ids;
  for (int i = 0; i < kConns; i++) {
    WebSocketSwarm::Callbacks cb;
    cb.on_open = [&](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      opened++;
    };
    cb.on_message = [&, i](WebSocketMessage m) {
      std::lock_guard<std::mutex> lock(mu);
      got[i].push_back(m.data);
    };
    ids.push_back(swarm.Open("ws://hpodd/x", {{"Authorization", "ok"}}, client_options_, cb));
    // Sends queued before the handshake finished go out after it, in order.
    for (int k = 0; k < kMessages; k++) swarm.Send(ids.back(), std::to_string(i * 1000 + k));
  }
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu);
    size_t total = 0;
    for (auto& [i, v] : got) total += v.size();
    return total == kConns * kMessages;
  }));
  EXPECT_EQ(opened, kConns);
  for (auto& [i, v] : got) {
    for (int k = 0; k < kMessages; k++) EXPECT_EQ(v[k], std::to_string(i * 1000 + k));
  }
  EXPECT_EQ(swarm.size(), static_cast<size_t>(kConns));
  swarm.Drop(ids[0]);
  swarm.Drop(ids[1]);
  EXPECT_TRUE(WaitUntil([&] { return server_closes_ == 2; }));
  EXPECT_TRUE(WaitUntil([&] { return swarm.size() == kConns - 2u; }));
}

TEST_F(SwarmTest, RefusalReachesOnOpenAndServerCloseReachesOnClose) {
  WebSocketSwarm swarm;
  std::atomic<int> refused{0}, closed{0};
  std::string reason;
  std::mutex mu;
  WebSocketSwarm::Callbacks bad;
  bad.on_open = [&](Status s) {
    EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
    refused++;
  };
  swarm.Open("ws://hpodd/x", {{"Authorization", "wrong"}}, client_options_, bad);
  WebSocketSwarm::Callbacks good;
  good.on_close = [&](std::string r) {
    std::lock_guard<std::mutex> lock(mu);
    reason = r;
    closed++;
  };
  auto id = swarm.Open("ws://hpodd/x", {{"Authorization", "ok"}}, client_options_, good);
  swarm.Send(id, "bye");
  ASSERT_TRUE(WaitUntil([&] { return refused == 1 && closed == 1; }));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_NE(reason.find("asked to"), std::string::npos) << reason;
  EXPECT_EQ(swarm.size(), 0u);
}

TEST_F(SwarmTest, AfterRunsOnTheIoThreadAfterItsDelay) {
  WebSocketSwarm swarm;
  std::atomic<bool> ran{false};
  auto start = std::chrono::steady_clock::now();
  std::atomic<long> waited_ms{0};
  swarm.After(milliseconds(50), [&] {
    waited_ms =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
    ran = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return ran.load(); }));
  EXPECT_GE(waited_ms.load(), 50);
}

}  // namespace
}  // namespace hpod::http
