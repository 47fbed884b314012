// The server's TLS (ServerOptions::tls) against the real libcurl Client and raw
// sockets: verification against a test CA, a wrong CA, plain HTTP on a TLS port,
// mutual TLS and the peer certificate a handler sees, bad files, and ReloadTls.
// Certificates come from tls_test_util.h (made in memory per test).

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hpod/http/client.h"
#include "hpod/http/server.h"
#include "hpod/http/server_test_util.h"
#include "hpod/http/tls_test_util.h"

namespace hpod::http {
namespace {

using testing::RawConnection;
using testing::StartsWith;
using testing::TestCa;
using testing::TestCertFiles;
using testing::TestPki;

// Records the TLS fields of the last request.
struct Seen {
  std::mutex mu;
  Request last;  // GUARDED_BY(mu)
  Request Get() {
    std::lock_guard<std::mutex> lock(mu);
    return last;
  }
};

Handler Recording(Seen* seen) {
  return [seen](const Request& request) {
    {
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->last = request;
    }
    return testing::Text(200, "hello over " + std::string(request.tls ? "tls" : "plain"));
  };
}

class TlsTest : public ::testing::Test {
 protected:
  TlsTest() : ca_(pki_.NewCa("test")), other_ca_(pki_.NewCa("other")) {
    server_files_ = ca_.Server("server.pem", "hpodd", {"127.0.0.1", "::1"}, {"localhost"});
  }

  ServerOptions TlsOptions() {
    ServerOptions options;
    options.tls.enabled = true;
    options.tls.cert_file = server_files_.cert;
    options.tls.key_file = server_files_.key;
    return options;
  }

  std::unique_ptr<Server> Start(const ServerOptions& options) {
    return testing::StartServer(options, Recording(&seen_));
  }

  static std::string Https(const Server& server, std::string_view target = "/") {
    return "https://127.0.0.1:" + std::to_string(server.port()) + std::string(target);
  }

  static StatusOr<Response> Get(const std::string& url, ClientOptions options) {
    Client client(std::move(options));
    return client.Send(url, testing::Make("GET"));
  }

  TestPki pki_;
  TestCa ca_;
  TestCa other_ca_;
  TestCertFiles server_files_;
  Seen seen_;
};

TEST_F(TlsTest, HttpsRequestVerifiedAgainstTheCa) {
  std::unique_ptr<Server> server = Start(TlsOptions());
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.ca_file = ca_.ca_file();
  StatusOr<Response> response = Get(Https(*server), options);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "hello over tls");
  Request seen = seen_.Get();
  EXPECT_TRUE(seen.tls);
  EXPECT_EQ(seen.peer_cert_cn, "");  // no client certificate asked for
  EXPECT_EQ(seen.peer_cert_sha256_hex, "");

  // Keep-alive works over TLS as over plain TCP.
  Client client(options);
  for (int i = 0; i < 3; ++i) {
    StatusOr<Response> again = client.Send(Https(*server), testing::Make("GET"));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->body, "hello over tls");
  }
  EXPECT_EQ(server->accepted_connections(), 2u);
}

TEST_F(TlsTest, WrongCaIsRefusedNamingVerification) {
  std::unique_ptr<Server> server = Start(TlsOptions());
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.ca_file = other_ca_.ca_file();
  StatusOr<Response> response = Get(Https(*server), options);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(response.status().message().find("SSL validation failed for " + Https(*server)),
            std::string::npos)
      << response.status().message();
  EXPECT_NE(response.status().message().find("certificate"), std::string::npos)
      << response.status().message();
}

TEST_F(TlsTest, PlainHttpOnTheTlsPortGetsA400) {
  std::unique_ptr<Server> server = Start(TlsOptions());
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string response = raw.ReadResponse();
  EXPECT_TRUE(StartsWith(response, "HTTP/1.1 400 Bad Request\r\n")) << response;
  EXPECT_NE(response.find("\r\nConnection: close\r\n"), std::string::npos) << response;
  EXPECT_NE(response.find("\r\n\r\nThis port speaks HTTPS (TLS) only; use https://"),
            std::string::npos)
      << response;
  EXPECT_TRUE(raw.WaitClosed(testing::seconds(10)));

  // The Client with an http:// URL sees the same answer.
  StatusOr<Response> plain =
      Get("http://127.0.0.1:" + std::to_string(server->port()) + "/", ClientOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->status, 400);
  EXPECT_EQ(plain->body, "This port speaks HTTPS (TLS) only; use https://");
  // The handler never ran for either.
  EXPECT_EQ(seen_.Get().method, "");
}

TEST_F(TlsTest, GarbageHandshakeClosesTheConnection) {
  std::unique_ptr<Server> server = Start(TlsOptions());
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.connected());
  // A handshake record type followed by nonsense.
  ASSERT_TRUE(raw.Send(std::string("\x16\x03\x01\x00\x05hello", 10)));
  EXPECT_TRUE(raw.WaitClosed(testing::seconds(10)));
  // The server still serves others.
  ClientOptions options;
  options.ca_file = ca_.ca_file();
  StatusOr<Response> response = Get(Https(*server), options);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
}

TEST_F(TlsTest, AStalledHandshakeIsClosedAfterTheRequestTimeout) {
  ServerOptions options = TlsOptions();
  options.request_timeout = testing::milliseconds(300);
  std::unique_ptr<Server> server = Start(options);
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send(std::string("\x16\x03\x01", 3)));  // the start of a ClientHello
  EXPECT_TRUE(raw.WaitClosed(testing::seconds(10)));
  EXPECT_TRUE(testing::Eventually([&] { return server->open_connections() == 0; }));
}

TEST_F(TlsTest, MutualTls) {
  ServerOptions server_options = TlsOptions();
  server_options.tls.client_ca_file = ca_.ca_file();
  server_options.tls.require_client_cert = true;
  std::unique_ptr<Server> server = Start(server_options);
  ASSERT_NE(server, nullptr);

  ClientOptions options;
  options.ca_file = ca_.ca_file();
  // Without a client certificate.
  StatusOr<Response> response = Get(Https(*server), options);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(response.status().message().find("SSL validation failed"), std::string::npos)
      << response.status().message();

  // With one from another CA.
  TestCertFiles stranger = other_ca_.Client("stranger.pem", "node-x", 77);
  options.client_cert_file = stranger.cert;
  options.client_key_file = stranger.key;
  response = Get(Https(*server), options);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(seen_.Get().method, "");

  // With a good one: the handler sees who it is.
  TestCertFiles agent = ca_.Client("agent.pem", "i-0123456789abcdef0", 0x1234abcd);
  options.client_cert_file = agent.cert;
  options.client_key_file = agent.key;
  response = Get(Https(*server), options);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  Request seen = seen_.Get();
  EXPECT_TRUE(seen.tls);
  EXPECT_EQ(seen.peer_cert_cn, "i-0123456789abcdef0");
  EXPECT_EQ(seen.peer_cert_serial_hex, "1234abcd");
  EXPECT_EQ(seen.peer_cert_serial_hex, agent.serial_hex);
  EXPECT_EQ(seen.peer_cert_sha256_hex, agent.sha256_hex);
  EXPECT_EQ(seen.peer_cert_sha256_hex.size(), 64u);
}

TEST_F(TlsTest, OptionalClientCertificate) {
  ServerOptions server_options = TlsOptions();
  server_options.tls.client_ca_file = ca_.ca_file();
  std::unique_ptr<Server> server = Start(server_options);
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.ca_file = ca_.ca_file();
  StatusOr<Response> response = Get(Https(*server), options);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(seen_.Get().peer_cert_cn, "");

  TestCertFiles agent = ca_.Client("agent.pem", "node-7", 7);
  options.client_cert_file = agent.cert;
  options.client_key_file = agent.key;
  response = Get(Https(*server), options);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(seen_.Get().peer_cert_cn, "node-7");
  EXPECT_EQ(seen_.Get().peer_cert_serial_hex, "07");

  // A certificate that does not verify is refused even though none is required.
  TestCertFiles stranger = other_ca_.Client("stranger.pem", "node-x", 8);
  options.client_cert_file = stranger.cert;
  options.client_key_file = stranger.key;
  EXPECT_FALSE(Get(Https(*server), options).ok());
}

TEST_F(TlsTest, StartFailsNamingTheBadFile) {
  ServerOptions options = TlsOptions();
  options.tls.cert_file = pki_.dir() + "/missing.pem";
  StatusOr<std::unique_ptr<Server>> server = Server::Start(options, testing::Ok);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(options.tls.cert_file), std::string::npos)
      << server.status().message();

  // A key that belongs to another certificate.
  TestCertFiles other = ca_.Server("other.pem", "other", {"127.0.0.1"}, {});
  options = TlsOptions();
  options.tls.key_file = other.key;
  server = Server::Start(options, testing::Ok);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("does not match"), std::string::npos)
      << server.status().message();

  // A CA file that is not PEM.
  options = TlsOptions();
  options.tls.client_ca_file = other.key + ".nope";
  {
    std::FILE* f = std::fopen(options.tls.client_ca_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a certificate\n", f);
    std::fclose(f);
  }
  server = Server::Start(options, testing::Ok);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(options.tls.client_ca_file), std::string::npos)
      << server.status().message();

  options = TlsOptions();
  options.tls.require_client_cert = true;
  EXPECT_EQ(Server::Start(options, testing::Ok).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, ReloadTlsServesTheNewCertificateToNewConnections) {
  // The server's files are rewritten in place, as a certificate rotation does.
  std::string cert_file = pki_.dir() + "/live.pem";
  std::string key_file = pki_.dir() + "/live.key";
  std::filesystem::copy_file(server_files_.cert, cert_file);
  std::filesystem::copy_file(server_files_.key, key_file);
  ServerOptions server_options = TlsOptions();
  server_options.tls.cert_file = cert_file;
  server_options.tls.key_file = key_file;
  std::unique_ptr<Server> server = Start(server_options);
  ASSERT_NE(server, nullptr);

  ClientOptions old_trust;
  old_trust.ca_file = ca_.ca_file();
  Client kept(old_trust);  // a connection that stays open across the reload
  ASSERT_TRUE(kept.Send(Https(*server), testing::Make("GET")).ok());

  TestCertFiles rotated = other_ca_.Server("rotated.pem", "hpodd", {"127.0.0.1"}, {});
  std::filesystem::copy_file(rotated.cert, cert_file,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(rotated.key, key_file,
                             std::filesystem::copy_options::overwrite_existing);
  Status reloaded = server->ReloadTls();
  ASSERT_TRUE(reloaded.ok()) << reloaded.ToString();

  ClientOptions new_trust;
  new_trust.ca_file = other_ca_.ca_file();
  StatusOr<Response> response = Get(Https(*server), new_trust);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_FALSE(Get(Https(*server), old_trust).ok());
  // The connection made before the reload keeps its session.
  uint64_t accepted = server->accepted_connections();
  StatusOr<Response> again = kept.Send(Https(*server), testing::Make("GET"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(server->accepted_connections(), accepted);

  // A broken file: the error names it and the server keeps the current one.
  {
    std::FILE* f = std::fopen(key_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  Status broken = server->ReloadTls();
  EXPECT_EQ(broken.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(broken.message().find(key_file), std::string::npos) << broken.message();
  EXPECT_TRUE(Get(Https(*server), new_trust).ok());
}

TEST_F(TlsTest, ReloadTlsOnAPlainServerIsAFailedPrecondition) {
  std::unique_ptr<Server> server = testing::StartServer(ServerOptions{}, testing::Ok);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->ReloadTls().code(), StatusCode::kFailedPrecondition);
}

TEST_F(TlsTest, TlsOnAUnixSocketListener) {
  ServerOptions server_options = TlsOptions();
  server_options.unix_path = pki_.dir() + "/tls.sock";
  std::unique_ptr<Server> server = Start(server_options);
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.ca_file = ca_.ca_file();
  options.unix_socket_path = server_options.unix_path;
  // The URL's host is what the certificate must name.
  StatusOr<Response> response = Get("https://localhost/", options);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->body, "hello over tls");
  EXPECT_EQ(seen_.Get().remote_address, "unix");
}

}  // namespace
}  // namespace hpod::http
