// WebSockets over TLS: WebSocketClient (wss://) against http::Server with
// ServerOptions::tls, with and without client certificates, the name check
// (IP SANs, DNS SANs, tls_server_name) and the one-line handshake failures.
// Certificates come from tls_test_util.h. Waits are bounded polls, never speed.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hpod/http/server.h"
#include "hpod/http/server_test_util.h"
#include "hpod/http/tls_test_util.h"
#include "hpod/http/websocket.h"

namespace hpod::http {
namespace {

using std::chrono::milliseconds;
using testing::TestCa;
using testing::TestCertFiles;
using testing::TestPki;

constexpr milliseconds kWait{10000};

// Accepts every upgrade, echoes each message, and keeps the sockets and requests.
struct Echo {
  std::mutex mu;
  std::vector<std::shared_ptr<WebSocket>> sockets;  // GUARDED_BY(mu)
  std::vector<Request> requests;                    // GUARDED_BY(mu)
  std::atomic<int> closes{0};

  std::shared_ptr<WebSocket> socket(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    return i < sockets.size() ? sockets[i] : nullptr;
  }
  Request request(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    return i < requests.size() ? requests[i] : Request();
  }

  UpgradeHandler Handler() {
    return [this](const Request& request, std::shared_ptr<WebSocket> socket) {
      {
        std::lock_guard<std::mutex> lock(mu);
        sockets.push_back(socket);
        requests.push_back(request);
      }
      WebSocketCallbacks callbacks;
      std::weak_ptr<WebSocket> weak = socket;
      callbacks.on_message = [weak](WebSocketMessage message) {
        if (auto s = weak.lock()) s->Send("echo: " + message.data, message.binary);
      };
      callbacks.on_close = [this] { closes.fetch_add(1); };
      return UpgradeResult(std::move(callbacks));
    };
  }
};

class TlsWebSocketTest : public ::testing::Test {
 protected:
  TlsWebSocketTest() : ca_(pki_.NewCa("test")), other_ca_(pki_.NewCa("other")) {
    server_files_ = ca_.Server("server.pem", "hpodd", {"127.0.0.1"}, {"localhost"});
    agent_files_ = ca_.Client("agent.pem", "node-1", 0x0abc);
  }

  std::unique_ptr<Server> Start(bool require_client_cert) {
    ServerOptions options;
    options.tls.enabled = true;
    options.tls.cert_file = server_files_.cert;
    options.tls.key_file = server_files_.key;
    if (require_client_cert) {
      options.tls.client_ca_file = ca_.ca_file();
      options.tls.require_client_cert = true;
    }
    auto server = Server::Start(options, testing::Ok, echo_.Handler());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }

  WebSocketClientOptions AgentOptions() {
    WebSocketClientOptions options;
    options.ca_file = ca_.ca_file();
    options.client_cert_file = agent_files_.cert;
    options.client_key_file = agent_files_.key;
    return options;
  }

  static std::string Wss(const Server& server, const std::string& host = "127.0.0.1") {
    return "wss://" + host + ":" + std::to_string(server.port()) + "/agent/v1/channel";
  }

  TestPki pki_;
  TestCa ca_;
  TestCa other_ca_;
  TestCertFiles server_files_;
  TestCertFiles agent_files_;
  Echo echo_;
};

TEST_F(TlsWebSocketTest, EchoBothWaysWithAClientCertificate) {
  std::unique_ptr<Server> server = Start(/*require_client_cert=*/true);
  ASSERT_NE(server, nullptr);
  auto client =
      WebSocketClient::Connect(Wss(*server), {{"Authorization", "Bearer t"}}, AgentOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  // Client to server and back, text and binary.
  ASSERT_TRUE((*client)->Send("hello", false).ok());
  std::string binary("\x00\x01\xff\x7f", 4);
  ASSERT_TRUE((*client)->Send(binary, true).ok());
  auto first = (*client)->Receive(kWait);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->data, "echo: hello");
  EXPECT_FALSE(first->binary);
  auto second = (*client)->Receive(kWait);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->data, "echo: " + binary);
  EXPECT_TRUE(second->binary);

  // Server to client, unprompted; a message larger than one TLS record.
  std::shared_ptr<WebSocket> socket = echo_.socket(0);
  ASSERT_NE(socket, nullptr);
  std::string large(100000, 'x');
  ASSERT_TRUE(socket->Send(large, false));
  auto pushed = (*client)->Receive(kWait);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  EXPECT_EQ(pushed->data, large);

  // The upgrade handler saw the verified client certificate.
  Request request = echo_.request(0);
  EXPECT_TRUE(request.tls);
  EXPECT_EQ(request.peer_cert_cn, "node-1");
  EXPECT_EQ(request.peer_cert_serial_hex, "0abc");
  EXPECT_EQ(request.peer_cert_sha256_hex, agent_files_.sha256_hex);
  EXPECT_EQ(request.HeaderValue("Authorization"), "Bearer t");

  // A clean close handshake (close_notify both ways) reaches on_close once.
  (*client)->Close("bye");
  EXPECT_TRUE(testing::Eventually([&] { return echo_.closes.load() == 1; }, kWait));
  EXPECT_TRUE(testing::Eventually([&] { return server->open_connections() == 0; }, kWait));
}

TEST_F(TlsWebSocketTest, ServerCloseAndShutdownReachTheClient) {
  std::unique_ptr<Server> server = Start(/*require_client_cert=*/false);
  ASSERT_NE(server, nullptr);
  WebSocketClientOptions options;
  options.ca_file = ca_.ca_file();
  auto client = WebSocketClient::Connect(Wss(*server, "localhost"), {}, options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(echo_.request(0).peer_cert_cn, "");  // none was asked for
  ASSERT_TRUE((*client)->Send("ping", false).ok());
  auto echoed = (*client)->Receive(kWait);
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();

  server->Shutdown(std::chrono::seconds(5));
  EXPECT_EQ(echo_.closes.load(), 1);
  auto closed = (*client)->Receive(kWait);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(closed.status().message().find("server shutting down"), std::string::npos)
      << closed.status().message();
}

TEST_F(TlsWebSocketTest, WrongCaFailsTheHandshakeInOneLine) {
  std::unique_ptr<Server> server = Start(/*require_client_cert=*/false);
  ASSERT_NE(server, nullptr);
  WebSocketClientOptions options;
  options.ca_file = other_ca_.ca_file();
  auto client = WebSocketClient::Connect(Wss(*server), {}, options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  std::string expected = "TLS handshake with 127.0.0.1:" + std::to_string(server->port()) +
                         " failed: certificate verify failed (";
  EXPECT_EQ(client.status().message().rfind(expected, 0), 0u) << client.status().message();
  EXPECT_EQ(client.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(echo_.closes.load(), 0);  // nothing got as far as the upgrade handler
}

TEST_F(TlsWebSocketTest, TheCertificateMustNameTheServer) {
  std::unique_ptr<Server> server = Start(/*require_client_cert=*/false);
  ASSERT_NE(server, nullptr);
  WebSocketClientOptions options;
  options.ca_file = ca_.ca_file();
  // A name the certificate does not carry.
  options.tls_server_name = "hpodd.example";
  auto client = WebSocketClient::Connect(Wss(*server), {}, options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("hostname mismatch"), std::string::npos)
      << client.status().message();
  // An IP the certificate does not carry (it has 127.0.0.1 only).
  options.tls_server_name = "10.77.255.254";
  client = WebSocketClient::Connect(Wss(*server), {}, options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("IP address mismatch"), std::string::npos)
      << client.status().message();
  // The names it does carry, as DNS and as IP.
  options.tls_server_name = "localhost";
  EXPECT_TRUE(WebSocketClient::Connect(Wss(*server), {}, options).ok());
  options.tls_server_name = "";
  EXPECT_TRUE(WebSocketClient::Connect(Wss(*server), {}, options).ok());
}

TEST_F(TlsWebSocketTest, MutualTlsRefusesMissingAndForeignCertificates) {
  std::unique_ptr<Server> server = Start(/*require_client_cert=*/true);
  ASSERT_NE(server, nullptr);
  WebSocketClientOptions options;
  options.ca_file = ca_.ca_file();
  auto none = WebSocketClient::Connect(Wss(*server), {}, options);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("TLS"), std::string::npos) << none.status().message();

  TestCertFiles stranger = other_ca_.Client("stranger.pem", "node-x", 9);
  options.client_cert_file = stranger.cert;
  options.client_key_file = stranger.key;
  auto foreign = WebSocketClient::Connect(Wss(*server), {}, options);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(echo_.closes.load(), 0);

  // A key without its certificate is a configuration error.
  options.client_cert_file = "";
  EXPECT_EQ(WebSocketClient::Connect(Wss(*server), {}, options).status().code(),
            StatusCode::kInvalidArgument);
  // And an unreadable CA file names itself.
  options = AgentOptions();
  options.ca_file = pki_.dir() + "/no-such-ca.pem";
  auto unreadable = WebSocketClient::Connect(Wss(*server), {}, options);
  EXPECT_EQ(unreadable.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unreadable.status().message().find(options.ca_file), std::string::npos)
      << unreadable.status().message();
}

TEST_F(TlsWebSocketTest, PlainWebSocketToATlsPortIsRefused) {
  std::unique_ptr<Server> server = Start(/*require_client_cert=*/false);
  ASSERT_NE(server, nullptr);
  auto client = WebSocketClient::Connect(
      "ws://127.0.0.1:" + std::to_string(server->port()) + "/agent/v1/channel", {});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);  // the 400
  EXPECT_NE(client.status().message().find("This port speaks HTTPS (TLS) only"), std::string::npos)
      << client.status().message();
}

}  // namespace
}  // namespace hpod::http
