// Server and Client against each other on loopback: the HTTP/1.1 protocol (methods,
// keep-alive, Connection: close, pipelining, 100-continue) and handler threads. Limits
// and shutdown are in server_limits_test.cc, the Client's errors in client_test.cc.
// No assertion is about speed: waits are bounded polls on behaviour.

#include "hpod/http/server_test_util.h"

namespace hpod::http::testing {
namespace {

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

}  // namespace
}  // namespace hpod::http::testing
