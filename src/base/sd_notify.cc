#include "hpod/base/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hpod {

Status SdNotify(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return OkStatus();
  std::string p(path);
  if (p.size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgumentError("NOTIFY_SOCKET path too long");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, p.data(), p.size());
  if (p[0] == '@') addr.sun_path[0] = '\0';
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + p.size());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return InternalError(std::string("socket: ") + std::strerror(errno));
  ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                       reinterpret_cast<sockaddr*>(&addr), len);
  int err = errno;
  ::close(fd);
  if (n < 0) return UnavailableError(std::string("sd_notify: ") + std::strerror(err));
  return OkStatus();
}

}  // namespace hpod
