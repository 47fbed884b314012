// Server and Client against each other on loopback, plus raw sockets for what the
// Client cannot produce (malformed requests, slow senders, thousands of idle
// connections). No assertion is about speed: waits are bounded polls on behaviour.

#include "hpod/http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hpod/http/client.h"

namespace hpod::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A blocking loopback socket with bounded reads.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(RawConnection&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  RawConnection& operator=(RawConnection&&) = delete;

  bool connected() const { return fd_ >= 0; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads whatever arrives within `timeout`. Returns false once the peer has closed
  // (EOF or reset).
  bool ReadSome(std::string* out, milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return true;
    char buf[8192];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    out->append(buf, static_cast<size_t>(n));
    return true;
  }

  // True when the peer closes within `timeout` (anything it sends meanwhile is
  // appended to `out`).
  bool WaitClosed(milliseconds timeout, std::string* out = nullptr) {
    std::string ignored;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!ReadSome(out != nullptr ? out : &ignored, milliseconds(50))) return true;
    }
    return false;
  }

  // Reads one response framed by Content-Length. Leaves later bytes in `pending_`.
  std::string ReadResponse(milliseconds timeout = milliseconds(10000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      size_t end = pending_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = ContentLength(pending_.substr(0, end));
        if (pending_.size() >= end + 4 + length) {
          std::string response = pending_.substr(0, end + 4 + length);
          pending_.erase(0, end + 4 + length);
          return response;
        }
      }
      if (!ReadSome(&pending_, milliseconds(50))) break;
    }
    return std::exchange(pending_, "");
  }

 private:
  static size_t ContentLength(const std::string& head) {
    std::string lower;
    for (char c : head) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t at = lower.find("\r\ncontent-length:");
    if (at == std::string::npos) return 0;
    return std::stoul(lower.substr(at + 17));
  }

  int fd_ = -1;
  std::string pending_;
};

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Polls `condition` for up to `limit`; a bounded wait, not a speed assertion.
bool Eventually(const std::function<bool()>& condition, milliseconds limit = milliseconds(30000)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return condition();
}

Response Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.headers.push_back({"Content-Type", "text/plain"});
  response.body = std::move(body);
  return response;
}

std::unique_ptr<Server> StartServer(ServerOptions options, Handler handler) {
  StatusOr<std::unique_ptr<Server>> server = Server::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::string UrlFor(const Server& server, std::string_view target) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + std::string(target);
}

Request Make(std::string method, std::string body = "", std::vector<Header> headers = {}) {
  Request request;
  request.method = std::move(method);
  request.body = std::move(body);
  request.headers = std::move(headers);
  return request;
}

Response Ok(const Request&) { return Text(200, "ok"); }

TEST(ServerTest, RoundTripCarriesMethodTargetHeadersAndBody) {
  std::mutex mu;
  std::vector<Request> seen;
  auto server = StartServer({}, [&](const Request& request) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(request);
    Response response;
    response.status = 201;
    response.headers = {{"Content-Type", "application/x-amz-json-1.1"},
                        {"x-amzn-RequestId", "req-1"}};
    response.body = R"({"method":")" + request.method + R"("})";
    return response;
  });
  ASSERT_NE(server, nullptr);
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/a/b?x=1&y=2"),
                                            Make("POST", R"({"ClusterName":"c1"})",
                                                 {{"X-Amz-Target", "SageMaker.DescribeCluster"},
                                                  {"Content-Type", "application/x-amz-json-1.1"}}));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->body, R"({"method":"POST"})");
  EXPECT_EQ(response->HeaderValue("x-amzn-requestid"), "req-1");
  EXPECT_EQ(response->HeaderValue("content-type"), "application/x-amz-json-1.1");
  EXPECT_EQ(response->HeaderValue("Content-Length"), std::to_string(response->body.size()));

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 1u);
  const Request& got = seen[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/a/b?x=1&y=2");
  EXPECT_EQ(got.Path(), "/a/b");
  EXPECT_EQ(got.Query(), "x=1&y=2");
  EXPECT_EQ(got.body, R"({"ClusterName":"c1"})");
  EXPECT_EQ(got.HeaderValue("X-Amz-Target"), "SageMaker.DescribeCluster");
  EXPECT_EQ(got.HeaderValue("Content-Type"), "application/x-amz-json-1.1");
  EXPECT_EQ(got.HeaderValue("Content-Length"), "20");
  EXPECT_EQ(got.HeaderValue("Host"), "127.0.0.1:" + std::to_string(server->port()));
  EXPECT_TRUE(StartsWith(got.remote_address, "127.0.0.1:")) << got.remote_address;
  // Nothing the caller did not ask for (it would break SigV4 signatures).
  EXPECT_EQ(got.HeaderValue("Expect"), "");
  EXPECT_EQ(got.HeaderValue("Accept"), "");
}

TEST(ServerTest, ClientSendsEachMethodAsGiven) {
  std::mutex mu;
  std::vector<Request> seen;
  auto server = StartServer({}, [&](const Request& request) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(request);
    return Text(request.method == "DELETE" ? 404 : 200, request.method == "HEAD" ? "" : "body");
  });
  ASSERT_NE(server, nullptr);
  Client client;
  // A body larger than curl's 100-continue threshold: no Expect may be sent anyway.
  std::string big(2 * 1024 * 1024, 'x');
  struct Case {
    std::string method;
    std::string body;
    int status;
  };
  for (const Case& c : std::vector<Case>{{"GET", "", 200},
                                         {"POST", "", 200},
                                         {"PUT", "put-body", 200},
                                         {"PUT", big, 200},
                                         {"DELETE", "", 404},
                                         {"PATCH", "p", 200},
                                         {"HEAD", "", 200}}) {
    StatusOr<Response> response = client.Send(UrlFor(*server, "/m"), Make(c.method, c.body));
    ASSERT_TRUE(response.ok()) << c.method << ": " << response.status().ToString();
    EXPECT_EQ(response->status, c.status) << c.method;
    EXPECT_EQ(response->body, c.method == "HEAD" ? "" : "body") << c.method;
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].HeaderValue("Content-Length"), "");
  EXPECT_EQ(seen[1].method, "POST");
  EXPECT_EQ(seen[1].HeaderValue("Content-Length"), "0");
  EXPECT_EQ(seen[2].method, "PUT");
  EXPECT_EQ(seen[2].body, "put-body");
  EXPECT_EQ(seen[3].body.size(), big.size());
  EXPECT_EQ(seen[4].method, "DELETE");
  EXPECT_EQ(seen[5].method, "PATCH");
  EXPECT_EQ(seen[6].method, "HEAD");
  for (const Request& r : seen) {
    EXPECT_EQ(r.HeaderValue("Expect"), "") << r.method;
    // curl's default for bodies is application/x-www-form-urlencoded.
    EXPECT_EQ(r.HeaderValue("Content-Type"), "") << r.method;
  }
}

TEST(ServerTest, KeepAliveReusesOneConnection) {
  auto server = StartServer({}, Ok);
  ASSERT_NE(server, nullptr);
  Client client;
  for (int i = 0; i < 5; ++i) {
    StatusOr<Response> response = client.Send(UrlFor(*server, "/"), Make("POST", "{}"));
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->status, 200);
  }
  EXPECT_EQ(server->accepted_connections(), 1u);
  EXPECT_EQ(server->open_connections(), 1u);
}

TEST(ServerTest, ConnectionCloseIsHonouredBothWays) {
  auto server = StartServer({}, [](const Request& request) {
    Response response = Text(200, "ok");
    if (request.Path() == "/bye") response.headers.push_back({"Connection", "close"});
    return response;
  });
  ASSERT_NE(server, nullptr);
  {
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.Send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(raw.WaitClosed(seconds(10), &got));
    EXPECT_TRUE(StartsWith(got, "HTTP/1.1 200 OK\r\n")) << got;
  }
  {
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.Send("GET /bye HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(raw.WaitClosed(seconds(10), &got));
    EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
  }
  {
    // HTTP/1.0 closes unless asked otherwise.
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.Send("GET / HTTP/1.0\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(raw.WaitClosed(seconds(10), &got));
    EXPECT_TRUE(StartsWith(got, "HTTP/1.0 200 OK\r\n")) << got;
  }
  Client client;
  StatusOr<Response> response = client.Send(UrlFor(*server, "/bye"), Make("GET"));
  ASSERT_TRUE(response.ok());
  response = client.Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 200);
}

TEST(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  auto server = StartServer(
      {}, [](const Request& request) { return Text(200, std::string(request.Path())); });
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(
      raw.Send("GET /one HTTP/1.1\r\nHost: x\r\n\r\nPOST /two HTTP/1.1\r\nHost: x\r\n"
               "Content-Length: 3\r\n\r\nabcGET /three HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (const char* path : {"/one", "/two", "/three"}) {
    std::string response = raw.ReadResponse();
    EXPECT_TRUE(StartsWith(response, "HTTP/1.1 200 OK\r\n")) << response;
    EXPECT_TRUE(response.ends_with(std::string("\r\n\r\n") + path)) << response;
  }
  EXPECT_EQ(server->accepted_connections(), 1u);
}

TEST(ServerTest, ExpectContinueGetsAnInterimResponse) {
  auto server = StartServer({}, [](const Request& request) { return Text(200, request.body); });
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(
      raw.Send("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  std::string interim;
  ASSERT_TRUE(Eventually([&] {
    raw.ReadSome(&interim, milliseconds(50));
    return interim.find("\r\n\r\n") != std::string::npos;
  }));
  EXPECT_TRUE(StartsWith(interim, "HTTP/1.1 100 Continue\r\n")) << interim;
  ASSERT_TRUE(raw.Send("hello"));
  std::string response = raw.ReadResponse();
  EXPECT_TRUE(StartsWith(response, "HTTP/1.1 200 OK\r\n")) << response;
  EXPECT_TRUE(response.ends_with("\r\n\r\nhello")) << response;
}

// The handler runs on its own threads: while the only handler thread is busy, the only
// I/O thread still accepts, answers a malformed request, and queues the next request.
TEST(ServerTest, ABusyHandlerDoesNotStallIoOnOtherConnections) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ServerOptions options;
  options.threads = 1;
  options.handler_threads = 1;
  auto server = StartServer(options, [&](const Request& request) {
    if (request.Path() == "/block") {
      entered.set_value();
      released.wait();
      return Text(200, "unblocked");
    }
    return Text(200, "next");
  });
  ASSERT_NE(server, nullptr);
  RawConnection blocked(server->port());
  ASSERT_TRUE(blocked.Send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  entered.get_future().wait();
  RawConnection queued(server->port());
  EXPECT_TRUE(queued.Send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n"));
  RawConnection garbage(server->port());
  EXPECT_TRUE(garbage.Send("THIS IS NOT HTTP\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(garbage.WaitClosed(seconds(10), &got));
  EXPECT_TRUE(StartsWith(got, "HTTP/1.1 400 Bad Request\r\n")) << got;
  release.set_value();
  std::string first = blocked.ReadResponse();
  EXPECT_TRUE(StartsWith(first, "HTTP/1.1 200 OK\r\n")) << first;
  EXPECT_NE(first.find("unblocked"), std::string::npos) << first;
  std::string second = queued.ReadResponse();
  EXPECT_TRUE(StartsWith(second, "HTTP/1.1 200 OK\r\n")) << second;
  EXPECT_NE(second.find("next"), std::string::npos) << second;
}

TEST(ServerTest, StartRejectsBadThreadCounts) {
  ServerOptions options;
  options.threads = 0;
  EXPECT_EQ(Server::Start(options, Ok).status().code(), StatusCode::kInvalidArgument);
  options.threads = 1;
  options.handler_threads = -1;
  EXPECT_EQ(Server::Start(options, Ok).status().code(), StatusCode::kInvalidArgument);
  options.handler_threads = 3;  // more handler threads than I/O threads is fine
  auto server = StartServer(options, Ok);
  ASSERT_NE(server, nullptr);
  StatusOr<Response> response = Client().Send(UrlFor(*server, "/"), Make("GET"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
}

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

TEST(ClientTest, ClosedPortIsUnavailableWithTheAwsMessage) {
  // A bound but not listening socket: its port refuses connections and cannot be
  // taken by anyone else while the test runs.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/";

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
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 0), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  uint16_t port = ntohs(addr.sin_port);
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
}  // namespace hpod::http
