// WebSocket subprotocols (Sec-WebSocket-Protocol) between http::Server and
// WebSocketClient over loopback: the server sends the selection an UpgradeHandler
// makes, refuses a selection the client did not offer, and the client fails a
// handshake as a browser does when the server's answer does not match its offer.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hpod/http/server.h"
#include "hpod/http/websocket.h"

namespace hpod::http {
namespace {

constexpr std::chrono::milliseconds kWait{10000};

Response Plain(const Request&) { return Response{404, {}, "no"}; }

// Accepts every upgrade, echoing messages, selecting `select(request)` and
// counting on_close calls.
UpgradeHandler Selecting(std::function<std::string(const Request&)> select,
                         std::atomic<int>* closes, std::vector<Header> extra_headers = {}) {
  return [select, closes, extra_headers](const Request& request,
                                         std::shared_ptr<WebSocket> socket) -> UpgradeResult {
    WebSocketCallbacks callbacks;
    std::weak_ptr<WebSocket> weak = socket;
    callbacks.on_message = [weak](WebSocketMessage message) {
      if (auto s = weak.lock()) s->Send(std::move(message.data), message.binary);
    };
    callbacks.on_close = [closes] { closes->fetch_add(1); };
    callbacks.subprotocol = select(request);
    callbacks.response_headers = extra_headers;
    return callbacks;
  };
}

std::unique_ptr<Server> Start(UpgradeHandler upgrade) {
  auto server = Server::Start({}, &Plain, std::move(upgrade));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::string Url(const Server& server) {
  return "ws://127.0.0.1:" + std::to_string(server.port()) + "/ws";
}

bool WaitFor(const std::atomic<int>& n, int want) {
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (n.load() != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return n.load() == want;
}

TEST(WebSocketSubprotocolTest, TheServerSendsTheSelectedOfferAndTheClientSeesIt) {
  std::atomic<int> closes{0};
  std::vector<std::string> seen;
  auto server = Start(Selecting(
      [&seen](const Request& request) {
        seen = HeaderList(request.headers, "Sec-WebSocket-Protocol");
        return seen.empty() ? std::string() : seen.front();
      },
      &closes));
  ASSERT_NE(server, nullptr);
  auto client = WebSocketClient::Connect(
      Url(*server), {{"Sec-WebSocket-Protocol", "hpod-session, hpod-token.abc123"}});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"hpod-session", "hpod-token.abc123"}));
  EXPECT_EQ((*client)->subprotocol(), "hpod-session");
  ASSERT_TRUE((*client)->Send("hi", false).ok());
  auto echo = (*client)->Receive(kWait);
  ASSERT_TRUE(echo.ok()) << echo.status().ToString();
  EXPECT_EQ(echo->data, "hi");

  // Without an offer nothing is selected, and nothing is sent.
  auto plain = WebSocketClient::Connect(Url(*server), {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->subprotocol(), "");
}

TEST(WebSocketSubprotocolTest, ASelectionTheClientDidNotOfferIsRefusedWith500) {
  std::atomic<int> closes{0};
  auto server = Start(Selecting([](const Request&) { return std::string("chat"); }, &closes));
  ASSERT_NE(server, nullptr);
  for (const std::vector<Header>& offer :
       {std::vector<Header>{}, std::vector<Header>{{"Sec-WebSocket-Protocol", "superchat"}}}) {
    auto client = WebSocketClient::Connect(Url(*server), offer);
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(client.status().message().find("500"), std::string::npos)
        << client.status().ToString();
  }
  // The handler's cleanup ran for each connection that never came to be.
  EXPECT_TRUE(WaitFor(closes, 2)) << closes.load();
}

TEST(WebSocketSubprotocolTest, TheClientFailsAHandshakeThatDoesNotAnswerItsOffer) {
  std::atomic<int> closes{0};
  // Selects nothing, whatever was offered (as a server unaware of subprotocols).
  auto none = Start(Selecting([](const Request&) { return std::string(); }, &closes));
  ASSERT_NE(none, nullptr);
  auto client = WebSocketClient::Connect(Url(*none), {{"Sec-WebSocket-Protocol", "hpod-session"}});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("selected none of the offered subprotocols"),
            std::string::npos)
      << client.status().ToString();

  // A selection smuggled past the server's check in response_headers: the
  // client's own check still refuses it.
  auto other = Start(Selecting([](const Request&) { return std::string(); }, &closes,
                               {{"Sec-WebSocket-Protocol", "other"}}));
  ASSERT_NE(other, nullptr);
  for (const std::vector<Header>& offer :
       {std::vector<Header>{}, std::vector<Header>{{"Sec-WebSocket-Protocol", "hpod-session"}}}) {
    auto c = WebSocketClient::Connect(Url(*other), offer);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(c.status().message().find("selected subprotocol 'other', which was not offered"),
              std::string::npos)
        << c.status().ToString();
  }
}

}  // namespace
}  // namespace hpod::http
