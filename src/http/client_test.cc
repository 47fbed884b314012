// The Client's errors against closed ports, dropped connections and slow servers, in
// the AWS SDK's words.

#include "hpod/http/server_test_util.h"

namespace hpod::http::testing {
namespace {

TEST(ClientTest, ClosedPortIsUnavailableWithTheAwsMessage) {
  // A bound but not listening socket: its port refuses connections and cannot be
  // taken by anyone else while the test runs.
  uint16_t port = 0;
  int fd = BindLoopback(&port);
  ASSERT_GE(fd, 0);
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";

  Client client;
  StatusOr<Response> response = client.Send(url, Make("GET"));
  close(fd);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(response.status().message(), "Could not connect to the endpoint URL: \"" + url + "\"");
}

TEST(ClientTest, ConnectionClosedWithoutResponseIsUnavailable) {
  ServerOptions options;
  options.max_connections = 0;  // every connection is accepted and closed at once
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("POST", "{}"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(response.status().message(),
            "Connection was closed before we received a valid response from endpoint URL: \"" +
                UrlFor(*server, "/") + "\".");
}

TEST(ClientTest, TimeoutIsDeadlineExceeded) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto server = StartServer({}, [&](const Request&) {
    released.wait();
    return Text(200, "late");
  });
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.timeout = milliseconds(200);
  Client client(options);
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("GET"));
  release.set_value();
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(response.status().message(),
            "Read timeout on endpoint URL: \"" + UrlFor(*server, "/") + "\"");
  // The handle recovers for the next call.
  response = client.Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->body, "late");
}

TEST(ClientTest, TimeoutOnAReusedConnectionIsAReadTimeout) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto server = StartServer({}, [&](const Request& request) {
    if (request.Path() == "/slow") released.wait();
    return Text(200, "ok");
  });
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.timeout = milliseconds(200);
  Client client(options);
  ASSERT_TRUE(client.Send(UrlFor(*server, "/fast"), Make("GET")).ok());
  StatusOr<Response> response = client.Send(UrlFor(*server, "/slow"), Make("GET"));
  release.set_value();
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(StartsWith(response.status().message(), "Read timeout on endpoint URL: "))
      << response.status().message();
}

TEST(ClientTest, ConnectTimeoutIsDeadlineExceeded) {
  // A listener with a full accept queue drops further SYNs, so connecting hangs.
  uint16_t port = 0;
  int fd = BindLoopback(&port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(listen(fd, 0), 0);
  // Backlog 0 admits one completed connection; it is sent before the client's SYN.
  RawConnection filler(port);
  ASSERT_TRUE(filler.connected());

  ClientOptions options;
  options.connect_timeout = milliseconds(200);
  options.timeout = milliseconds(5000);
  Client client(options);
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  StatusOr<Response> response = client.Send(url, Make("GET"));
  close(fd);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded)
      << response.status().ToString();
  EXPECT_EQ(response.status().message(), "Connect timeout on endpoint URL: \"" + url + "\"");
}

TEST(ClientTest, BadUrlIsInvalidArgument) {
  Client client;
  StatusOr<Response> response = client.Send("ftp://127.0.0.1/", Make("GET"));
  EXPECT_EQ(response.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hpod::http::testing
