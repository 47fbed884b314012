#include "hpod/agent/health/network_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hpod::agent::health {

Status TcpReachable(const std::string& target, std::chrono::milliseconds timeout) {
  size_t colon = target.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("not host:port: " + target);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  int port = std::atoi(target.c_str() + colon + 1);
  if (port <= 0 || port > 65535 ||
      ::inet_pton(AF_INET, target.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    return InvalidArgumentError("not an IPv4 host:port: " + target);
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return InternalError(std::string("socket: ") + std::strerror(errno));
  Status result = OkStatus();
  // A refused connection proves the link: the peer's kernel answered (only the
  // daemon is down, which is the controller's business, not this node's).
  auto failed = [&](int err) {
    if (err == ECONNREFUSED) return;
    result = UnavailableError(std::string("connect: ") + std::strerror(err));
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      failed(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      int n;
      do {
        n = ::poll(&p, 1, static_cast<int>(timeout.count()));
      } while (n < 0 && errno == EINTR);
      int err = 0;
      socklen_t len = sizeof(err);
      if (n == 0) {
        result =
            DeadlineExceededError("no answer within " + std::to_string(timeout.count()) + " ms");
      } else if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        failed(errno);
      } else if (err != 0) {
        failed(err);
      }
    }
  }
  ::close(fd);
  return result;
}

Outcome NetworkCheck::Run() {
  const std::string target = target_();
  if (target.empty()) {
    failed_runs_ = 0;
    return Outcome::Skipped("no Slurm controller to reach from this node");
  }
  Status s = TcpReachable(target, timeout_);
  if (s.ok()) {
    failed_runs_ = 0;
    return Outcome::Ok();
  }
  // One lost connect is noise (a busy controller); several in a row are a link.
  if (++failed_runs_ < failures_) return Outcome::Ok();
  return Outcome::Fail(Verdict::kReplace, "the node cannot reach slurmctld at " + target + ": " +
                                              std::string(s.message()));
}

}  // namespace hpod::agent::health
