// The Server under bad or heavy clients (oversized bodies and headers, malformed
// requests, slow senders, thousands of idle connections, throwing handlers,
// requests that waited too long, an I/O thread held) and its shutdown. No
// assertion is about speed: waits are bounded polls on behaviour.

#include "hpod/http/server_test_util.h"
#include "hpod/http/websocket.h"

namespace hpod::http::testing {
namespace {

TEST(ServerTest, OversizedBodyGets413AndTheServerStaysUp) {
  ServerOptions options;
  options.body_limit_bytes = 1024;
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  Client client;
  for (size_t size : {size_t{4096}, size_t{1024 * 1024}}) {
    StatusOr<Response> response =
        client.Send(UrlFor(*server, "/"), Make("POST", std::string(size, 'b')));
    ASSERT_TRUE(response.ok()) << size << ": " << response.status().ToString();
    EXPECT_EQ(response->status, 413) << size;
  }
  StatusOr<Response> response =
      client.Send(UrlFor(*server, "/"), Make("POST", std::string(1024, 'b')));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);

  // Chunked bodies are counted as they arrive.
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string chunk = "800\r\n" + std::string(0x800, 'c') + "\r\n";
  raw.Send(chunk);
  std::string got;
  EXPECT_TRUE(raw.WaitClosed(seconds(10), &got));
  EXPECT_TRUE(StartsWith(got, "HTTP/1.1 413 Payload Too Large\r\n")) << got;
}

TEST(ServerTest, HugeHeadersGet431) {
  ServerOptions options;
  options.header_limit_bytes = 1024;
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  Client client;
  StatusOr<Response> response =
      client.Send(UrlFor(*server, "/"), Make("GET", "", {{"X-Big", std::string(4096, 'h')}}));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 431);
  response = client.Send(UrlFor(*server, "/"), Make("GET", "", {{"X-Small", "h"}}));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
}

TEST(ServerTest, MalformedRequestGets400AndIsClosed) {
  auto server = StartServer({}, Ok);
  ASSERT_NE(server, nullptr);
  for (const char* garbage : {"THIS IS NOT HTTP\r\n\r\n", "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
                              "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n"}) {
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.Send(garbage));
    std::string got;
    EXPECT_TRUE(raw.WaitClosed(seconds(10), &got)) << garbage;
    EXPECT_TRUE(StartsWith(got, "HTTP/1.1 400 Bad Request\r\n")) << garbage << " -> " << got;
  }
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 200);
}

TEST(ServerTest, RequestTimeoutClosesASlowLoris) {
  ServerOptions options;
  options.request_timeout = milliseconds(200);
  options.idle_timeout = seconds(60);
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("GET / HTTP/1.1\r\n"));
  // Keeps dribbling header lines; each one is far within any per-read timeout, so
  // only a whole-request limit ends this.
  bool closed = false;
  for (int i = 0; i < 400 && !closed; ++i) {
    if (!raw.Send("X-A: b\r\n")) break;
    std::string ignored;
    closed = !raw.ReadSome(&ignored, milliseconds(50));
  }
  EXPECT_TRUE(closed || raw.WaitClosed(seconds(10)));

  // An idle connection is not a slow loris: it lives until idle_timeout.
  RawConnection idle(server->port());
  ASSERT_TRUE(Eventually([&] { return server->open_connections() == 1; }));
  std::string ignored;
  EXPECT_TRUE(idle.ReadSome(&ignored, milliseconds(400)));  // still open
  ASSERT_TRUE(idle.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(StartsWith(idle.ReadResponse(), "HTTP/1.1 200 OK\r\n"));
}

TEST(ServerTest, IdleTimeoutClosesKeepAliveConnections) {
  ServerOptions options;
  options.idle_timeout = milliseconds(200);
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(StartsWith(raw.ReadResponse(), "HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(raw.WaitClosed(seconds(10)));
  EXPECT_TRUE(Eventually([&] { return server->open_connections() == 0; }));
}

TEST(ServerTest, ThrowingHandlerGets500AndTheServerKeepsServing) {
  auto server = StartServer({}, [](const Request& request) -> Response {
    if (request.Path() == "/throw") throw std::runtime_error("boom: secret detail");
    if (request.Path() == "/throw-int") throw 42;
    if (request.Path() == "/bad-status") return Text(1000, "x");
    if (request.Path() == "/no-content-with-body") return Text(204, "x");
    return Text(200, "ok");
  });
  ASSERT_NE(server, nullptr);
  Client client;
  for (const char* path : {"/throw", "/throw-int", "/bad-status", "/no-content-with-body"}) {
    StatusOr<Response> response = client.Send(UrlFor(*server, path), Make("POST", "{}"));
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->status, 500) << path;
    EXPECT_TRUE(StartsWith(response->body, R"({"__type":"InternalFailure","message":")"))
        << response->body;
    EXPECT_EQ(response->body.find("secret"), std::string::npos);  // details stay in the log
    EXPECT_EQ(response->HeaderValue("Content-Type"), "application/x-amz-json-1.1");
  }
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(server->accepted_connections(), 1u);  // a 500 does not cost the connection
}

TEST(ServerTest, EmptyHandlerGets500) {
  auto server = StartServer({}, Handler());
  ASSERT_NE(server, nullptr);
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 500);
}

TEST(ServerTest, HoldsTwoThousandIdleConnectionsAndStillAnswers) {
  constexpr size_t kConnections = 2000;
  auto server = StartServer({}, Ok);
  ASSERT_NE(server, nullptr);
  std::vector<RawConnection> idle;
  idle.reserve(kConnections);
  for (size_t i = 0; i < kConnections; ++i) {
    idle.emplace_back(server->port());
    ASSERT_TRUE(idle.back().connected()) << i << ": " << std::strerror(errno);
  }
  ASSERT_TRUE(Eventually([&] { return server->open_connections() == kConnections; }))
      << server->open_connections();
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  // And the held ones still work.
  ASSERT_TRUE(idle[kConnections / 2].Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(StartsWith(idle[kConnections / 2].ReadResponse(), "HTTP/1.1 200 OK\r\n"));
  idle.clear();
  EXPECT_TRUE(Eventually([&] { return server->open_connections() == 1; }));
}

TEST(ServerTest, ConnectionsBeyondMaxAreClosed) {
  ServerOptions options;
  options.max_connections = 1;
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  RawConnection first(server->port());
  ASSERT_TRUE(Eventually([&] { return server->open_connections() == 1; }));
  RawConnection second(server->port());
  EXPECT_TRUE(second.WaitClosed(seconds(10)));
  ASSERT_TRUE(first.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(StartsWith(first.ReadResponse(), "HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(server->accepted_connections(), 2u);
}

TEST(ServerTest, ShutdownLetsAnInFlightRequestFinish) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto server = StartServer({}, [&](const Request& request) {
    if (request.Path() == "/slow") {
      entered.set_value();
      released.wait();
      return Text(200, "done");
    }
    return Text(200, "ok");
  });
  ASSERT_NE(server, nullptr);
  uint16_t port = server->port();
  RawConnection idle(port);  // an idle keep-alive connection is closed at once
  ASSERT_TRUE(Eventually([&] { return server->open_connections() == 1; }));

  StatusOr<Response> slow = InternalError("not sent");
  std::thread caller([&] { slow = Client().Send(UrlFor(*server, "/slow"), Make("GET")); });
  entered.get_future().wait();
  std::thread stopper([&] { server->Shutdown(seconds(30)); });
  // Once new connections are refused the server is shutting down; only then may
  // the handler return, so the request is in flight across the start of Shutdown.
  EXPECT_TRUE(Eventually([&] { return !RawConnection(port).connected(); }));
  EXPECT_TRUE(idle.WaitClosed(seconds(10)));
  release.set_value();
  caller.join();
  stopper.join();
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->status, 200);
  EXPECT_EQ(slow->body, "done");
  EXPECT_EQ(slow->HeaderValue("Connection"), "close");
  EXPECT_EQ(server->open_connections(), 0u);
}

TEST(ServerTest, ShutdownGraceBoundsTheWaitForStuckConnections) {
  auto server = StartServer({}, Ok);
  ASSERT_NE(server, nullptr);
  RawConnection partial(server->port());
  ASSERT_TRUE(partial.Send("GET / HTTP/1.1\r\n"));  // mid-request: not idle
  ASSERT_TRUE(Eventually([&] { return server->open_connections() == 1; }));
  server->Shutdown(milliseconds(100));
  EXPECT_EQ(server->open_connections(), 0u);
  EXPECT_TRUE(partial.WaitClosed(seconds(10)));
}

TEST(ServerTest, ShutdownIsIdempotentAndSafeFromManyThreads) {
  auto server = StartServer({}, Ok);
  ASSERT_NE(server, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { server->Shutdown(milliseconds(50)); });
  for (std::thread& t : threads) t.join();
  server->Shutdown(milliseconds(0));
  server->Shutdown(milliseconds(0));
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("GET"));
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  server.reset();  // the destructor's Shutdown is a no-op now
}

TEST(ServerTest, ShutdownFromInsideTheHandlerDoesNotDeadlock) {
  std::atomic<Server*> self{nullptr};
  auto server = StartServer({}, [&](const Request&) {
    self.load()->Shutdown(seconds(30));
    return Text(200, "stopping");
  });
  ASSERT_NE(server, nullptr);
  self = server.get();
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("POST"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->body, "stopping");
  EXPECT_EQ(response->HeaderValue("Connection"), "close");
  server.reset();
}

// A request that waited in the handler queue longer than max_queue_wait is answered
// 503 without reaching the handler (its client has likely given up); one that did
// not wait is served, and so is an upgrade request, shed the same way.
TEST(ServerTest, RequestsThatWaitedTooLongAreShedWith503) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> late_handled{0};
  std::atomic<int> upgrades_handled{0};
  ServerOptions options;
  options.handler_threads = 1;
  options.max_queue_wait = milliseconds(50);
  auto started = Server::Start(
      options,
      [&](const Request& request) {
        if (request.Path() == "/slow") {
          entered.set_value();
          released.wait();
        }
        if (request.Path() == "/late") late_handled++;
        return Text(200, "ok");
      },
      [&](const Request&, std::shared_ptr<WebSocket>) -> UpgradeResult {
        upgrades_handled++;
        return Text(403, "no");
      });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<Server> server = std::move(*started);

  RawConnection slow(server->port());
  ASSERT_TRUE(slow.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
  entered.get_future().wait();
  // Both queue behind /slow, which the one handler thread holds well past 50 ms.
  RawConnection late(server->port());
  ASSERT_TRUE(late.Send("GET /late HTTP/1.1\r\nHost: x\r\n\r\n"));
  RawConnection upgrade(server->port());
  ASSERT_TRUE(upgrade.Send(
      "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  std::this_thread::sleep_for(milliseconds(500));
  release.set_value();

  EXPECT_TRUE(StartsWith(slow.ReadResponse(), "HTTP/1.1 200 OK\r\n"));
  std::string got = late.ReadResponse();
  EXPECT_TRUE(StartsWith(got, "HTTP/1.1 503 Service Unavailable\r\n")) << got;
  EXPECT_NE(got.find("Retry-After: 1\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("\"__type\":\"ServiceUnavailable\""), std::string::npos) << got;
  got = upgrade.ReadResponse();
  EXPECT_TRUE(StartsWith(got, "HTTP/1.1 503 Service Unavailable\r\n")) << got;
  EXPECT_EQ(late_handled.load(), 0);
  EXPECT_EQ(upgrades_handled.load(), 0);
  EXPECT_EQ(server->shed_requests(), 2u);

  // The shed connection stays usable, and a request that did not wait is served.
  ASSERT_TRUE(late.Send("GET /late HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(StartsWith(late.ReadResponse(), "HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(late_handled.load(), 1);
  EXPECT_EQ(server->shed_requests(), 2u);
}

// A callback that holds the only I/O thread holds every read behind it: IoLag
// says how late the server runs, for a peer's silence not to be taken for its own.
TEST(ServerTest, IoLagTellsHowLongTheIoThreadsWereHeld) {
  ServerOptions options;
  options.threads = 1;
  auto server = Server::Start(options, &Ok, [](const Request&, std::shared_ptr<WebSocket>) {
    WebSocketCallbacks callbacks;
    callbacks.on_message = [](WebSocketMessage) {
      std::this_thread::sleep_for(std::chrono::seconds(2));
    };
    return UpgradeResult(std::move(callbacks));
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto client = WebSocketClient::Connect(
      "ws://127.0.0.1:" + std::to_string((*server)->port()) + "/ws", {}, {});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Send("hold the I/O thread", false).ok());
  // While it is held, and after: a probe overdue, then a probe that ran late.
  EXPECT_TRUE(Eventually([&] { return (*server)->IoLag() >= milliseconds(1000); }));
  std::this_thread::sleep_for(milliseconds(2500));
  EXPECT_GE((*server)->IoLag(), milliseconds(1000)) << "kept for a window after";
}

TEST(ServerTest, StartReportsBindErrors) {
  auto first = StartServer({}, Ok);
  ASSERT_NE(first, nullptr);
  ServerOptions options;
  options.port = first->port();
  StatusOr<std::unique_ptr<Server>> second = Server::Start(options, Ok);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(first->port())),
            std::string::npos)
      << second.status().message();

  options.address = "not-an-address";
  options.port = 0;
  second = Server::Start(options, Ok);
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);

  options.address = "::1";  // IPv6 loopback may be disabled in a container
  second = Server::Start(options, Ok);
  if (second.ok()) {
    Client client;
    StatusOr<Response> response =
        client.Send("http://[::1]:" + std::to_string((*second)->port()) + "/", Make("GET"));
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->status, 200);
  }
}

}  // namespace
}  // namespace hpod::http::testing
