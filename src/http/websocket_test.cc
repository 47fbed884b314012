// WebSocketClient against http::Server's WebSockets, over loopback TCP and a Unix
// socket, plus a raw socket for a peer that stops reading, and the plain HTTP
// Client over a Unix socket. Waits are bounded polls on behaviour, never on speed.

#include "hpod/http/websocket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hpod/http/client.h"
#include "hpod/http/server.h"

namespace hpod::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Generous: the tests share two loaded cores with other builds.
constexpr milliseconds kWait{10000};

bool WaitUntil(const std::function<bool()>& done, milliseconds timeout = kWait) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

Response PlainHandler(const Request& request) {
  Response response;
  response.body = "plain " + request.target + " from " + request.remote_address;
  return response;
}

// Counts callbacks and keeps the accepted sockets, for the tests to drive.
struct Recorder {
  std::mutex mu;
  std::vector<std::shared_ptr<WebSocket>> sockets;  // GUARDED_BY(mu)
  std::vector<Request> requests;                    // GUARDED_BY(mu)
  std::atomic<int> closes{0};
  std::atomic<int> progress{0};  // on_progress calls, all connections

  std::shared_ptr<WebSocket> socket(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    return i < sockets.size() ? sockets[i] : nullptr;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return sockets.size();
  }
};

// Accepts every upgrade; echoes each message back unless `echo` is false.
UpgradeHandler Accepting(Recorder* recorder, bool echo = true) {
  return [recorder, echo](const Request& request, std::shared_ptr<WebSocket> socket) {
    {
      std::lock_guard<std::mutex> lock(recorder->mu);
      recorder->sockets.push_back(socket);
      recorder->requests.push_back(request);
    }
    WebSocketCallbacks callbacks;
    std::weak_ptr<WebSocket> weak = socket;
    callbacks.on_message = [weak, echo](WebSocketMessage message) {
      auto socket = weak.lock();
      if (echo && socket != nullptr) socket->Send(std::move(message.data), message.binary);
    };
    callbacks.on_close = [recorder] { recorder->closes.fetch_add(1); };
    callbacks.on_progress = [recorder] { recorder->progress.fetch_add(1); };
    callbacks.response_headers.push_back({"X-Hpod-Test", "yes"});
    return UpgradeResult(std::move(callbacks));
  };
}

std::unique_ptr<Server> StartServer(UpgradeHandler upgrade, ServerOptions options = {}) {
  auto server = Server::Start(options, &PlainHandler, std::move(upgrade));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::string WsUrl(const Server& server, const std::string& target = "/ws") {
  return "ws://127.0.0.1:" + std::to_string(server.port()) + target;
}

std::unique_ptr<WebSocketClient> MustConnect(const std::string& url,
                                             WebSocketClientOptions options = {}) {
  auto client = WebSocketClient::Connect(url, {{"Authorization", "Bearer t"}}, options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

// A temporary directory for Unix sockets, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hpod-ws-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void ExpectEcho(WebSocketClient& client) {
  ASSERT_TRUE(client.Send("hello", false).ok());
  std::string binary("\x00\x01\xff\x7f", 4);
  ASSERT_TRUE(client.Send(binary, true).ok());
  auto first = client.Receive(kWait);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->data, "hello");
  EXPECT_FALSE(first->binary);
  auto second = client.Receive(kWait);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->data, binary);
  EXPECT_TRUE(second->binary);
}

TEST(WebSocketTest, EchoesTextAndBinaryOverTcp) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server, "/ws?node=n1"));
  ASSERT_NE(client, nullptr);
  ExpectEcho(*client);
  ASSERT_EQ(recorder.count(), 1u);
  std::lock_guard<std::mutex> lock(recorder.mu);
  EXPECT_EQ(recorder.requests[0].target, "/ws?node=n1");
  EXPECT_EQ(recorder.requests[0].HeaderValue("Authorization"), "Bearer t");
  EXPECT_EQ(recorder.sockets[0]->remote_address().rfind("127.0.0.1:", 0), 0u);
}

// SendShared queues the caller's buffer itself on each connection (hpodd sends one
// config to every node of a group): every peer gets the bytes, with its own
// frame type, and the server lets go of the buffer once written.
TEST(WebSocketTest, ASharedMessageReachesEveryConnectionAndIsReleasedOnceWritten) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder, /*echo=*/false));
  ASSERT_NE(server, nullptr);
  auto first = MustConnect(WsUrl(*server));
  auto second = MustConnect(WsUrl(*server));
  ASSERT_TRUE(first != nullptr && second != nullptr);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 2; }));
  auto shared = std::make_shared<const std::string>(std::string(1 << 20, 'c') + "end");
  ASSERT_TRUE(recorder.socket(0)->SendShared(shared, false));
  ASSERT_TRUE(recorder.socket(1)->SendShared(shared, true));
  auto got = first->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->data, *shared);
  EXPECT_FALSE(got->binary);
  got = second->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->data, *shared);
  EXPECT_TRUE(got->binary);
  EXPECT_TRUE(WaitUntil([&] { return shared.use_count() == 1; }));
}

TEST(WebSocketTest, HttpUrlsWorkLikeWsUrls) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect("http://localhost:" + std::to_string(server->port()) + "/ws");
  ASSERT_NE(client, nullptr);
  ExpectEcho(*client);
}

TEST(WebSocketTest, EchoesOverAUnixSocket) {
  TempDir dir;
  std::string path = dir.path("agent.sock");
  Recorder recorder;
  ServerOptions options;
  options.unix_path = path;
  auto server = StartServer(Accepting(&recorder), options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->port(), 0);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  WebSocketClientOptions client_options;
  client_options.unix_socket_path = path;
  auto client = MustConnect("ws://hpodd/agent", client_options);
  ASSERT_NE(client, nullptr);
  ExpectEcho(*client);
  EXPECT_EQ(recorder.socket(0)->remote_address(), "unix");
  client.reset();
  server->Shutdown(seconds(5));
  EXPECT_NE(stat(path.c_str(), &st), 0) << "Shutdown leaves the socket file behind";
}

TEST(WebSocketTest, UnixListenerReplacesAStaleSocketButNotOtherFiles) {
  TempDir dir;
  std::string path = dir.path("agent.sock");
  ServerOptions options;
  options.unix_path = path;
  // A socket file left by a dead process (bound, then closed without unlink).
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  auto second = Server::Start(options, &PlainHandler);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  (*second)->Shutdown(seconds(1));

  std::string regular = dir.path("regular");
  std::ofstream(regular) << "data";
  options.unix_path = regular;
  auto refused = Server::Start(options, &PlainHandler);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::filesystem::exists(regular));
}

TEST(WebSocketTest, PlainHttpOverAUnixSocketWithTheClient) {
  TempDir dir;
  ServerOptions options;
  options.unix_path = dir.path("api.sock");
  auto server = Server::Start(options, &PlainHandler);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ClientOptions client_options;
  client_options.unix_socket_path = options.unix_path;
  Client client(client_options);
  Request request;
  request.method = "GET";
  auto response = client.Send("http://hpodd/ping", request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "plain /ping from unix");
}

TEST(WebSocketTest, PlainHttpStillWorksOnAWebSocketServer) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  auto ws = MustConnect(WsUrl(*server));
  ASSERT_NE(ws, nullptr);
  Client client;
  Request request;
  request.method = "GET";
  auto response = client.Send("http://127.0.0.1:" + std::to_string(server->port()) + "/x", request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->body.rfind("plain /x from 127.0.0.1:", 0), 0u);
  ExpectEcho(*ws);
  EXPECT_EQ(server->open_connections(), 2u);
}

TEST(WebSocketTest, RefusedUpgradesMapToStatusCodesWithTheBody) {
  std::atomic<int> status{401};
  auto server = StartServer([&](const Request&, std::shared_ptr<WebSocket> socket) {
    // The refused socket is dead from the start.
    EXPECT_TRUE(socket != nullptr);
    Response response;
    response.status = status.load();
    response.body = "refused " + std::to_string(response.status);
    return UpgradeResult(response);
  });
  ASSERT_NE(server, nullptr);
  const std::vector<std::pair<int, StatusCode>> cases = {
      {401, StatusCode::kUnauthenticated}, {403, StatusCode::kPermissionDenied},
      {404, StatusCode::kNotFound},        {400, StatusCode::kInvalidArgument},
      {503, StatusCode::kUnavailable},
  };
  for (const auto& [http_status, code] : cases) {
    status = http_status;
    auto client = WebSocketClient::Connect(WsUrl(*server), {});
    ASSERT_FALSE(client.ok()) << http_status;
    EXPECT_EQ(client.status().code(), code) << client.status().ToString();
    EXPECT_NE(client.status().message().find("refused " + std::to_string(http_status)),
              std::string::npos)
        << client.status().ToString();
  }
}

TEST(WebSocketTest, WithoutAnUpgradeHandlerTheUpgradeReachesTheHandler) {
  auto server = Server::Start({}, [](const Request& request) {
    Response response;
    response.status = 404;
    response.body = "no websocket at " + request.target;
    return response;
  });
  ASSERT_TRUE(server.ok());
  auto client =
      WebSocketClient::Connect("ws://127.0.0.1:" + std::to_string((*server)->port()) + "/ws", {});
  EXPECT_EQ(client.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.status().message(), "no websocket at /ws");
}

TEST(WebSocketTest, AThrowingUpgradeHandlerRefusesWith500) {
  auto server = StartServer([](const Request&, std::shared_ptr<WebSocket>) -> UpgradeResult {
    throw std::runtime_error("boom");
  });
  ASSERT_NE(server, nullptr);
  auto client = WebSocketClient::Connect(WsUrl(*server), {});
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("500"), std::string::npos);
}

TEST(WebSocketTest, ServerSendsFromAnotherThreadWhileTheClientReceives) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder, /*echo=*/false));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 1; }));
  constexpr int kMessages = 200;
  std::thread sender([socket = recorder.socket(0)] {
    for (int i = 0; i < kMessages; ++i) EXPECT_TRUE(socket->Send(std::to_string(i), i % 2 == 1));
  });
  for (int i = 0; i < kMessages; ++i) {
    auto message = client->Receive(kWait);
    ASSERT_TRUE(message.ok()) << i << ": " << message.status().ToString();
    EXPECT_EQ(message->data, std::to_string(i));
    EXPECT_EQ(message->binary, i % 2 == 1);
  }
  sender.join();
  EXPECT_EQ(client->Receive(milliseconds(20)).status().code(), StatusCode::kDeadlineExceeded);
}

TEST(WebSocketTest, ServerCloseIsSeenAfterTheEarlierMessages) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder, /*echo=*/false));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 1; }));
  auto socket = recorder.socket(0);
  EXPECT_TRUE(socket->Send("one", false));
  EXPECT_TRUE(socket->Send("two", false));
  socket->Close("bye now");
  socket->Close("again");  // idempotent
  EXPECT_FALSE(socket->Send("three", false));
  EXPECT_EQ(client->Receive(kWait)->data, "one");
  EXPECT_EQ(client->Receive(kWait)->data, "two");
  auto closed = client->Receive(kWait);
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(closed.status().message().find("bye now"), std::string::npos)
      << closed.status().ToString();
  EXPECT_EQ(client->Send("late", false).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(WaitUntil([&] { return recorder.closes.load() == 1; }));
}

TEST(WebSocketTest, ClientCloseCallsOnCloseExactlyOnce) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 1; }));
  client->Close("done");
  client->Close("done");
  EXPECT_EQ(client->Receive(kWait).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(WaitUntil([&] { return recorder.closes.load() == 1; }));
  ASSERT_TRUE(WaitUntil([&] { return server->open_connections() == 0; }));
  EXPECT_FALSE(recorder.socket(0)->Send("to nobody", false));
  client.reset();
  server->Shutdown(seconds(5));
  EXPECT_EQ(recorder.closes.load(), 1);
}

TEST(WebSocketTest, DestroyingTheClientWithoutCloseIsSeenByTheServer) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 1; }));
  client.reset();
  EXPECT_TRUE(WaitUntil([&] { return recorder.closes.load() == 1; }));
}

TEST(WebSocketTest, ShutdownClosesOpenWebSocketsPromptly) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<WebSocketClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(MustConnect(WsUrl(*server)));
    ASSERT_NE(clients.back(), nullptr);
  }
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 3; }));
  auto start = std::chrono::steady_clock::now();
  server->Shutdown(seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
  EXPECT_EQ(recorder.closes.load(), 3);  // on_close has run when Shutdown returns
  for (auto& client : clients) {
    auto closed = client->Receive(kWait);
    EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(closed.status().message().find("server shutting down"), std::string::npos)
        << closed.status().ToString();
  }
  EXPECT_FALSE(recorder.socket(0)->Send("after shutdown", false));
}

TEST(WebSocketTest, CarriesAOneMebibyteMessageBothWays) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server));
  ASSERT_NE(client, nullptr);
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(client->Send(big, true).ok());
  auto echoed = client->Receive(kWait);
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
  EXPECT_TRUE(echoed->data == big);
  // The server read it in parts, and said so before the whole (a busy server's
  // reading of a large message is no silence of the peer's).
  EXPECT_GT(recorder.progress.load(), 0);
}

TEST(WebSocketTest, AMessageOverTheServerLimitClosesTheConnection) {
  Recorder recorder;
  ServerOptions options;
  options.body_limit_bytes = 1024;
  auto server = StartServer(Accepting(&recorder), options);
  ASSERT_NE(server, nullptr);
  auto client = MustConnect(WsUrl(*server));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send(std::string(1000, 'a'), false).ok());
  EXPECT_EQ(client->Receive(kWait)->data.size(), 1000u);
  // Sending may succeed or fail, depending on when the server closes.
  Status ignored = client->Send(std::string(2000, 'b'), false);
  (void)ignored;
  EXPECT_EQ(client->Receive(kWait).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(WaitUntil([&] { return recorder.closes.load() == 1; }));
}

TEST(WebSocketTest, AMessageOverTheClientLimitClosesTheConnection) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder));
  ASSERT_NE(server, nullptr);
  WebSocketClientOptions options;
  options.max_message_bytes = 100;
  auto client = MustConnect(WsUrl(*server), options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send(std::string(500, 'x'), false).ok());  // echoed back: too large
  EXPECT_EQ(client->Receive(kWait).status().code(), StatusCode::kUnavailable);
}

// Opens a WebSocket by hand and then never reads.
int RawHandshake(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int small = 4096;  // fills up sooner
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string request =
      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(request.size())) {
    close(fd);
    return -1;
  }
  // Reads the 101 byte by byte, so that no frame is consumed with it.
  std::string response;
  while (response.find("\r\n\r\n") == std::string::npos && response.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    char c;
    if (poll(&p, 1, static_cast<int>(kWait.count())) <= 0 || recv(fd, &c, 1, 0) != 1) break;
    response += c;
  }
  if (response.rfind("HTTP/1.1 101", 0) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(WebSocketTest, SendQueueOverflowClosesAPeerThatDoesNotRead) {
  Recorder recorder;
  ServerOptions options;
  options.websocket_send_queue_bytes = 64 * 1024;
  auto server = StartServer(Accepting(&recorder, /*echo=*/false), options);
  ASSERT_NE(server, nullptr);
  int fd = RawHandshake(server->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 1; }));
  auto socket = recorder.socket(0);
  std::string chunk(16 * 1024, 'z');
  // The kernel's buffers take some megabytes first; then the queue fills.
  bool refused = false;
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    refused = !socket->Send(chunk, true);
    if (!refused) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_TRUE(refused);
  EXPECT_TRUE(WaitUntil([&] { return recorder.closes.load() == 1; }));
  EXPECT_FALSE(socket->Send("x", false));
  close(fd);
}

// A large message goes out as one frame, not cut into frames of beast's 4 KB
// write buffer (each its own system call: hpodd sends every node its megabyte
// config).
TEST(WebSocketTest, ALargeMessageIsSentAsOneFrame) {
  Recorder recorder;
  auto server = StartServer(Accepting(&recorder, /*echo=*/false));
  ASSERT_NE(server, nullptr);
  int fd = RawHandshake(server->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WaitUntil([&] { return recorder.count() == 1; }));
  constexpr uint64_t kSize = 256 * 1024;
  ASSERT_TRUE(recorder.socket(0)->Send(std::string(kSize, 'z'), true));
  // The header: FIN and opcode, then 127 (unmasked, a 64-bit length) and the length.
  std::string header;
  while (header.size() < 10) {
    pollfd p{fd, POLLIN, 0};
    char c;
    if (poll(&p, 1, static_cast<int>(kWait.count())) <= 0 || recv(fd, &c, 1, 0) != 1) break;
    header += c;
  }
  close(fd);
  ASSERT_EQ(header.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(header[0]), 0x82) << "FIN, binary";
  EXPECT_EQ(static_cast<unsigned char>(header[1]), 127);
  uint64_t length = 0;
  for (int i = 2; i < 10; ++i) length = length << 8 | static_cast<unsigned char>(header[i]);
  EXPECT_EQ(length, kSize);
}

TEST(WebSocketTest, ConnectToAClosedPortIsUnavailable) {
  uint16_t port;
  {
    auto server = Server::Start({}, &PlainHandler);
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
  }
  auto client = WebSocketClient::Connect("ws://127.0.0.1:" + std::to_string(port) + "/", {});
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
  // wss:// is TLS (tls_websocket_test.cc); to a closed port it is unreachable too.
  auto tls = WebSocketClient::Connect("wss://127.0.0.1:" + std::to_string(port) + "/", {});
  EXPECT_EQ(tls.status().code(), StatusCode::kUnavailable) << tls.status().ToString();
  WebSocketClientOptions options;
  options.unix_socket_path = "/nonexistent/hpod.sock";
  EXPECT_EQ(WebSocketClient::Connect("ws://x/", {}, options).status().code(),
            StatusCode::kUnavailable);
}

TEST(WebSocketTest, ConnectTimesOutAgainstASilentServer) {
  // A listening socket that never answers: the handshake's response never comes.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t length = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length);
  WebSocketClientOptions options;
  options.connect_timeout = milliseconds(200);
  auto client = WebSocketClient::Connect(
      "ws://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/", {}, options);
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded) << client.status().ToString();
  close(listener);
}

}  // namespace
}  // namespace hpod::http
