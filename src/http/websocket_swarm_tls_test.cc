// WebSocketSwarm over TLS (wss://) against http::Server with mutual TLS: each
// connection presents a certificate of its own through one shared context and the
// server sees each one's name; a server from another CA and an unreadable
// certificate file reach on_open as one-line errors; an idle TLS connection holds
// little more heap than a plain one. Certificates come from tls_test_util.h. Waits
// are bounded polls on behaviour, never speed.

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hpod/http/server.h"
#include "hpod/http/server_test_util.h"
#include "hpod/http/tls_test_util.h"
#include "hpod/http/websocket_swarm.h"

namespace hpod::http {
namespace {

using testing::TestCa;
using testing::TestCertFiles;
using testing::TestPki;

class SwarmTlsTest : public ::testing::Test {
 protected:
  SwarmTlsTest() : ca_(pki_.NewCa("hpodd")), other_ca_(pki_.NewCa("other")) {}

  // A server whose certificate `server_ca` signed, asking clients for one of ca_'s;
  // a plain one (ws://) without `server_ca`.
  std::unique_ptr<Server> Start(TestCa* server_ca) {
    ServerOptions options;
    if (server_ca != nullptr) {
      TestCertFiles files = server_ca->Server("server.pem", "hpodd", {"127.0.0.1"}, {});
      options.tls.enabled = true;
      options.tls.cert_file = files.cert;
      options.tls.key_file = files.key;
      options.tls.client_ca_file = ca_.ca_file();
      options.tls.require_client_cert = true;
    }
    auto upgrade = [this](const Request& request, std::shared_ptr<WebSocket> socket) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        peers_.insert(request.peer_cert_cn);
      }
      WebSocketCallbacks callbacks;
      std::weak_ptr<WebSocket> weak = socket;
      callbacks.on_message = [weak, cn = request.peer_cert_cn](WebSocketMessage m) {
        if (auto s = weak.lock()) s->Send(cn + ": " + m.data, false);
      };
      return UpgradeResult(std::move(callbacks));
    };
    auto server = Server::Start(options, testing::Ok, upgrade);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }

  static std::string Wss(const Server& server, const char* scheme = "wss") {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(server.port()) +
           "/agent/v1/channel";
  }

  // The heap bytes the process holds per connection (both ends) once `count`
  // connections to `url` have each echoed one message and wait idle, as a node
  // agent's channel does between heartbeats.
  static double HeapPerIdleConnection(const std::string& url, const WebSocketClientOptions& options,
                                      int count) {
    WebSocketSwarm swarm;
    std::atomic<int> echoed{0};
    WebSocketSwarm::Callbacks cb;
    cb.on_open = [](Status s) { EXPECT_TRUE(s.ok()) << s.ToString(); };
    cb.on_message = [&](WebSocketMessage) { echoed++; };
    // One connection first, so that what every connection shares (the client's
    // context, the swarm's thread, the server's first session) is not counted.
    swarm.Send(swarm.Open(url, {}, options, cb), "warm");
    EXPECT_TRUE(testing::Eventually([&] { return echoed == 1; }));
    const double before = static_cast<double>(HeapBytes());
    for (int i = 0; i < count; i++) swarm.Send(swarm.Open(url, {}, options, cb), "hello");
    EXPECT_TRUE(testing::Eventually([&] { return echoed == count + 1; }));
    return (static_cast<double>(HeapBytes()) - before) / count;
  }

  static size_t HeapBytes() {
    struct mallinfo2 info = mallinfo2();  // every arena's, in use
    return info.uordblks + info.hblkhd;
  }

  WebSocketClientOptions Options(const TestCertFiles& client) const {
    WebSocketClientOptions o;
    o.ca_file = ca_.ca_file();
    o.client_cert_file = client.cert;
    o.client_key_file = client.key;
    return o;
  }

  TestPki pki_;
  TestCa ca_;
  TestCa other_ca_;
  std::mutex mu_;
  std::set<std::string> peers_;  // GUARDED_BY(mu_)
};

TEST_F(SwarmTlsTest, EachConnectionPresentsItsOwnCertificate) {
  std::unique_ptr<Server> server = Start(&ca_);
  ASSERT_NE(server, nullptr);
  WebSocketSwarm swarm;
  constexpr int kConns = 6;
  std::mutex mu;
  std::vector<std::string> got;
  std::atomic<int> opened{0};
  for (int i = 0; i < kConns; i++) {
    TestCertFiles cert =
        ca_.Client("node-" + std::to_string(i) + ".pem", "node-" + std::to_string(i), 10 + i);
    WebSocketSwarm::Callbacks cb;
    cb.on_open = [&](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      opened++;
    };
    cb.on_message = [&](WebSocketMessage m) {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(m.data);
    };
    auto id = swarm.Open(Wss(*server), {}, Options(cert), cb);
    swarm.Send(id, "hello " + std::to_string(i));
  }
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return got.size() == kConns;
  }));
  EXPECT_EQ(opened, kConns);
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < kConns; i++) {
    const std::string want = "node-" + std::to_string(i) + ": hello " + std::to_string(i);
    EXPECT_NE(std::find(got.begin(), got.end(), want), got.end()) << want;
  }
  std::lock_guard<std::mutex> peers(mu_);
  EXPECT_EQ(peers_.size(), static_cast<size_t>(kConns));
}

TEST_F(SwarmTlsTest, AServerOfAnotherCaAndABadCertificateFileFailTheOpen) {
  std::unique_ptr<Server> impostor = Start(&other_ca_);
  ASSERT_NE(impostor, nullptr);
  WebSocketSwarm swarm;
  std::mutex mu;
  std::vector<Status> results;
  WebSocketSwarm::Callbacks cb;
  cb.on_open = [&](Status s) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(s);
  };
  TestCertFiles good = ca_.Client("good.pem", "good", 20);
  swarm.Open(Wss(*impostor), {}, Options(good), cb);
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return results.size() == 1;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(results[0].code(), StatusCode::kUnavailable) << results[0].ToString();
    EXPECT_NE(results[0].message().find("TLS handshake with 127.0.0.1:" +
                                        std::to_string(impostor->port()) + " failed"),
              std::string::npos)
        << results[0].ToString();
    EXPECT_NE(results[0].message().find("certificate verify failed"), std::string::npos)
        << results[0].ToString();
  }
  TestCertFiles bad = good;
  bad.cert = pki_.dir() + "/missing.pem";
  swarm.Open(Wss(*impostor), {}, Options(bad), cb);
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return results.size() == 2;
  }));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(results[1].code(), StatusCode::kInvalidArgument) << results[1].ToString();
  EXPECT_NE(results[1].message().find("missing.pem"), std::string::npos) << results[1].ToString();
  EXPECT_EQ(swarm.size(), 0u);
}

// TLS records are buffered only while one is in flight: an idle connection keeps
// OpenSSL's connection state, not asio::ssl::stream's 68 KiB of record buffers and
// BIO pair per end, which at 10,000 agent channels was more than half of hpodd's
// memory.
TEST_F(SwarmTlsTest, AnIdleTlsConnectionHoldsLittleMoreHeapThanAPlainOne) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator does not report through mallinfo2";
#endif
  constexpr int kConns = 64;
  std::unique_ptr<Server> plain = Start(nullptr);
  ASSERT_NE(plain, nullptr);
  const double plain_bytes = HeapPerIdleConnection(Wss(*plain, "ws"), {}, kConns);
  plain->Shutdown(std::chrono::seconds(5));
  std::unique_ptr<Server> tls = Start(&ca_);
  ASSERT_NE(tls, nullptr);
  const double tls_bytes =
      HeapPerIdleConnection(Wss(*tls), Options(ca_.Client("idle.pem", "idle", 30)), kConns);
  ASSERT_GT(plain_bytes, 0);
  std::cout << "heap per idle connection (both ends): plain " << plain_bytes / 1024 << " KiB, TLS "
            << tls_bytes / 1024 << " KiB\n";
  // OpenSSL's own state is about 29 KiB per end; asio::ssl::stream's record buffers
  // and BIO pair alone were 68 KiB per end, and a record-sized chunk kept at both
  // ends would add 33 KiB.
  EXPECT_LT(tls_bytes - plain_bytes, 2 * 40 * 1024.0);
}

}  // namespace
}  // namespace hpod::http
