#pragma once

// Test helpers: a temporary directory and a fake hpod agent on a real Unix socket.
//
// Thread contract: FakeAgentServer serves on its own thread; Requests() may be called
// from any thread. TempDir is not thread-safe.

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hpod::spank::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hpod-spank-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path(const std::string& name = "") const {
    return name.empty() ? path_ : path_ + "/" + name;
  }

 private:
  std::string path_;
};

// Reads one line per connection and answers what the handler returns; nullopt means
// never answer (the connection is held until the server stops), "" closes at once.
class FakeAgentServer {
 public:
  using Handler = std::function<std::optional<std::string>(const nlohmann::json& request)>;

  FakeAgentServer(const std::string& path, Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_, 16);
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeAgentServer() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) close(fd);
    close(listen_fd_);
  }

  std::vector<nlohmann::json> Requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string line;
      char c;
      while (read(fd, &c, 1) == 1 && c != '\n') line += c;
      nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      std::optional<std::string> answer = handler_(request);
      if (!answer) {
        held_.push_back(fd);
        continue;
      }
      if (!answer->empty()) {
        std::string out = *answer + "\n";
        ssize_t ignored = write(fd, out.data(), out.size());
        (void)ignored;
      }
      close(fd);
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;  // the server thread's only
  mutable std::mutex mu_;
  std::vector<nlohmann::json> requests_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace hpod::spank::testing
