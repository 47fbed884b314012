// MaybeTlsStream's TLS layer on its own, over a Unix socket pair on one I/O
// thread: megabytes both ways at once (many records, reads into small buffers, a
// key update that makes a reader send while the writer's send is in flight), a
// clean end after close_notify both ways (asynchronous and blocking), a failed
// send failing the writes after it, and an end without close_notify read as
// stream_truncated. Every step is driven to completion by
// io_context::run; nothing waits on time.

#include "hpod/http/tls_stream.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

#include "hpod/http/tls_context.h"
#include "hpod/http/tls_test_util.h"

namespace hpod::http::internal {
namespace {

namespace asio = boost::asio;
using boost::beast::error_code;

// Reads from `stream`, `chunk` bytes at a time, until `want` bytes came or a read
// failed (its error in `end`). Lives until the io_context ran out of work. Counts
// the handlers run inside their own async_read_some (asio forbids that; a read
// whose data OpenSSL already held must post its handler).
struct Reader {
  Reader(MaybeTlsStream& s, size_t w, size_t chunk) : stream(s), want(w), buffer(chunk, '\0') {
    Next();
  }
  void Next() {
    initiating = true;
    stream.async_read_some(asio::buffer(buffer), [this](error_code ec, size_t n) {
      inline_completions += initiating;
      got.append(buffer.data(), n);
      if (ec || got.size() >= want) {
        end = ec;
        return;
      }
      Next();
    });
    initiating = false;
  }
  MaybeTlsStream& stream;
  size_t want;
  std::string buffer;
  std::string got;
  std::optional<error_code> end;
  bool initiating = false;
  int inline_completions = 0;
};

std::string RandomBytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

class TlsStreamTest : public ::testing::Test {
 protected:
  TlsStreamTest() : ca_(pki_.NewCa("hpodd")) {}

  void SetUp() override {
    testing::TestCertFiles server = ca_.Server("server.pem", "hpodd", {"127.0.0.1"}, {});
    TlsServerOptions options;
    options.enabled = true;
    options.cert_file = server.cert;
    options.key_file = server.key;
    auto server_context = MakeServerTlsContext(options);
    ASSERT_TRUE(server_context.ok()) << server_context.status().ToString();
    auto client_context = MakeClientTlsContext(ca_.ca_file(), "", "");
    ASSERT_TRUE(client_context.ok()) << client_context.status().ToString();
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server_.emplace(Connected(fds[0]), *server_context);
    client_.emplace(Connected(fds[1]), *client_context);
    ASSERT_TRUE(internal::ConfigureClientTls(client_->ssl_handle(), "127.0.0.1").ok());

    std::optional<error_code> server_done, client_done;
    server_->AsyncHandshake(true, {}, [&](error_code ec, size_t) { server_done = ec; });
    client_->AsyncHandshake(false, {}, [&](error_code ec, size_t) { client_done = ec; });
    Run();
    ASSERT_TRUE(server_done.has_value() && client_done.has_value());
    ASSERT_FALSE(*server_done) << server_done->message();
    ASSERT_FALSE(*client_done) << client_done->message();
  }

  Stream Connected(int fd) {
    Stream stream(ioc_);
    stream.socket().assign(Protocol(AF_UNIX, SOCK_STREAM), fd);
    return stream;
  }

  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  testing::TestPki pki_;
  testing::TestCa ca_;
  asio::io_context ioc_;
  std::optional<MaybeTlsStream> server_;
  std::optional<MaybeTlsStream> client_;
};

TEST_F(TlsStreamTest, MegabytesBothWaysAtOnceArriveWhole) {
  const std::string to_server = RandomBytes(3 << 20, 1);
  const std::string to_client = RandomBytes(3 << 20, 2);
  // The client's next record carries a KeyUpdate that asks for the server's: the
  // server's read then makes a record of its own while its writes are in flight.
  ASSERT_EQ(SSL_key_update(client_->ssl_handle(), SSL_KEY_UPDATE_REQUESTED), 1);
  std::optional<error_code> wrote_to_server, wrote_to_client;
  asio::async_write(*client_, asio::buffer(to_server),
                    [&](error_code ec, size_t) { wrote_to_server = ec; });
  asio::async_write(*server_, asio::buffer(to_client),
                    [&](error_code ec, size_t) { wrote_to_client = ec; });
  // Reads of 37 bytes land in buffers far smaller than a record; 64 KiB, larger.
  Reader server_read(*server_, to_server.size(), 37);
  Reader client_read(*client_, to_client.size(), 64 << 10);
  Run();
  ASSERT_TRUE(wrote_to_server && wrote_to_client && server_read.end && client_read.end);
  EXPECT_FALSE(*wrote_to_server) << wrote_to_server->message();
  EXPECT_FALSE(*wrote_to_client) << wrote_to_client->message();
  EXPECT_FALSE(*server_read.end) << server_read.end->message();
  EXPECT_FALSE(*client_read.end) << client_read.end->message();
  EXPECT_TRUE(server_read.got == to_server) << server_read.got.size() << " bytes";
  EXPECT_TRUE(client_read.got == to_client) << client_read.got.size() << " bytes";
  // Most 37-byte reads find their bytes already decrypted: each one posted.
  EXPECT_EQ(server_read.inline_completions, 0);
  EXPECT_EQ(client_read.inline_completions, 0);
}

TEST_F(TlsStreamTest, CloseNotifyBothWaysEndsCleanly) {
  std::optional<error_code> client_shutdown, server_shutdown;
  Reader server_read(*server_, 1, 1024);
  client_->AsyncTlsShutdown([&](error_code ec) { client_shutdown = ec; });
  // Not Run(): the client's shutdown waits on the server's close_notify.
  ioc_.restart();
  while (!server_read.end.has_value()) ASSERT_EQ(ioc_.run_one(), 1u);
  EXPECT_EQ(*server_read.end, asio::error::eof) << server_read.end->message();
  EXPECT_FALSE(client_shutdown.has_value());  // it waits for the server's close_notify
  // The server answers with its own close_notify.
  server_->AsyncTlsShutdown([&](error_code ec) { server_shutdown = ec; });
  Run();
  ASSERT_TRUE(client_shutdown && server_shutdown);
  EXPECT_FALSE(*client_shutdown) << client_shutdown->message();
  EXPECT_FALSE(*server_shutdown) << server_shutdown->message();
}

// Beast's blocking WebSocket close (teardown) takes this path: hpod's own code
// closes asynchronously, so only this test runs it.
TEST_F(TlsStreamTest, TheBlockingShutdownSendsAndAwaitsCloseNotify) {
  std::optional<error_code> server_shutdown;
  error_code client_shutdown = asio::error::would_block;
  Reader server_read(*server_, 1, 1024);
  // A blocking read ignores the stream's expiry: should the server never answer,
  // the client's read fails after 30 s rather than hanging the test.
  const timeval limit{30, 0};
  ASSERT_EQ(setsockopt(client_->next_layer().socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO,
                       &limit, sizeof(limit)),
            0);
  // Its own thread: it blocks until the server's close_notify, which the server
  // sends from this one.
  std::thread client([&] { client_->TlsShutdown(client_shutdown); });
  ioc_.restart();
  while (!server_read.end.has_value() && ioc_.run_one() == 1) {
  }
  if (server_read.end.has_value()) {
    EXPECT_EQ(*server_read.end, asio::error::eof) << server_read.end->message();
    server_->AsyncTlsShutdown([&](error_code ec) { server_shutdown = ec; });
    Run();
  }
  client.join();
  ASSERT_TRUE(server_read.end.has_value());
  ASSERT_TRUE(server_shutdown.has_value());
  EXPECT_FALSE(*server_shutdown) << server_shutdown->message();
  EXPECT_FALSE(client_shutdown) << client_shutdown.message();
}

TEST_F(TlsStreamTest, AFailedSendFailsEveryWriteAfterIt) {
  // The client's socket is gone: the server's records cannot be sent.
  client_->next_layer().socket().close();
  const std::string data = RandomBytes(1 << 20, 3);
  std::optional<error_code> first, second;
  asio::async_write(*server_, asio::buffer(data), [&](error_code ec, size_t) { first = ec; });
  Run();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(*first) << "a write to a closed peer succeeded";
  server_->async_write_some(asio::buffer(data.data(), 100),
                            [&](error_code ec, size_t) { second = ec; });
  Run();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, *first) << second->message();
}

TEST_F(TlsStreamTest, AnEndWithoutCloseNotifyIsTruncated) {
  Reader server_read(*server_, 1, 1024);
  // The client's socket ends its sending side with no close_notify first (closing
  // it would reset the connection: the server's session tickets are unread there).
  client_->next_layer().socket().shutdown(asio::socket_base::shutdown_send);
  Run();
  ASSERT_TRUE(server_read.end.has_value());
  EXPECT_EQ(*server_read.end, asio::ssl::error::stream_truncated) << server_read.end->message();
  EXPECT_TRUE(IsTlsError(*server_read.end));
  EXPECT_EQ(TlsFailure(server_->ssl_handle(), *server_read.end), "the peer closed the connection");
}

}  // namespace
}  // namespace hpod::http::internal
