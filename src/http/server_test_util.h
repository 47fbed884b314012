#pragma once

// Shared by the Server and Client tests (server_test.cc, server_limits_test.cc,
// client_test.cc): a raw loopback socket for what the Client cannot produce, bounded
// polls, and small constructors of servers and requests.

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
#include "hpod/http/server.h"

namespace hpod::http::testing {

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

// A loopback TCP socket bound to a free port (not listening yet): the port
// refuses connections and nobody else can take it while the socket is open.
// Returns the fd (-1 on failure) and sets `port`.
inline int BindLoopback(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Polls `condition` for up to `limit`; a bounded wait, not a speed assertion.
inline bool Eventually(const std::function<bool()>& condition,
                       milliseconds limit = milliseconds(30000)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return condition();
}

inline Response Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.headers.push_back({"Content-Type", "text/plain"});
  response.body = std::move(body);
  return response;
}

inline std::unique_ptr<Server> StartServer(ServerOptions options, Handler handler) {
  StatusOr<std::unique_ptr<Server>> server = Server::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

inline std::string UrlFor(const Server& server, std::string_view target) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + std::string(target);
}

inline Request Make(std::string method, std::string body = "", std::vector<Header> headers = {}) {
  Request request;
  request.method = std::move(method);
  request.body = std::move(body);
  request.headers = std::move(headers);
  return request;
}

inline Response Ok(const Request&) { return Text(200, "ok"); }

}  // namespace hpod::http::testing
