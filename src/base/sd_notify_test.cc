#include "hpod/base/sd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace hpod {
namespace {

TEST(SdNotifyTest, NoSocketIsANoOp) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(SdNotify("READY=1").ok());
}

TEST(SdNotifyTest, SendsTheDatagram) {
  std::string path = "/tmp/hpod-notify-" + std::to_string(getpid());
  unlink(path.c_str());
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ASSERT_TRUE(SdNotify("READY=1").ok());
  char buf[64] = {};
  ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "READY=1");
  close(fd);
  unlink(path.c_str());
  unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace hpod
