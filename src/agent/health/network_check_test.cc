#include "hpod/agent/health/network_check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace hpod::agent::health {
namespace {

// A listening loopback socket; its port.
class Listener {
 public:
  explicit Listener(int backlog = 8) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, backlog), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string Target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(NetworkCheckTest, ReachableControllerIsOk) {
  Listener l;
  NetworkCheck check([&] { return l.Target(); });
  EXPECT_EQ(check.name(), "network");
  EXPECT_EQ(check.Run().result, Result::kOk);
}

TEST(NetworkCheckTest, NoControllerIsSkipped) {
  NetworkCheck check([] { return std::string(); });
  EXPECT_EQ(check.Run().result, Result::kSkipped);
}

TEST(NetworkCheckTest, ARefusedConnectionIsAWorkingLink) {
  std::string target;
  {
    Listener l;
    target = l.Target();
  }  // closed: connects are refused now, by a host that answers
  NetworkCheck check([&] { return target; }, std::chrono::milliseconds(500), 2);
  EXPECT_EQ(check.Run().result, Result::kOk);
  EXPECT_EQ(check.Run().result, Result::kOk);
}

TEST(NetworkCheckTest, RepeatedTimeoutsMeanReplaceAndOneIsNoise) {
  // A listener that never accepts, its queue full: the kernel drops further SYNs,
  // so a connect gets no answer, as across a cut link (loopback only).
  Listener l(/*backlog=*/0);
  std::vector<int> fill;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(std::stoi(l.Target().substr(10))));
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    fill.push_back(fd);
  }
  if (TcpReachable(l.Target(), std::chrono::milliseconds(300)).ok()) {
    for (int fd : fill) ::close(fd);
    GTEST_SKIP() << "this kernel answers a full listen queue";
  }
  NetworkCheck check([&] { return l.Target(); }, std::chrono::milliseconds(300), 2);
  EXPECT_EQ(check.Run().result, Result::kOk);  // one failure: noise
  Outcome o = check.Run();
  EXPECT_EQ(o.result, Result::kFail);
  EXPECT_EQ(o.verdict, Verdict::kReplace);
  EXPECT_NE(o.reason.find(l.Target()), std::string::npos) << o.reason;
  for (int fd : fill) ::close(fd);
  Listener back;
  NetworkCheck again([&] { return back.Target(); }, std::chrono::milliseconds(500), 2);
  EXPECT_EQ(again.Run().result, Result::kOk);
}

TEST(NetworkCheckTest, BadTargetsAreErrors) {
  EXPECT_FALSE(TcpReachable("nope", std::chrono::milliseconds(100)).ok());
  EXPECT_FALSE(TcpReachable("host:12", std::chrono::milliseconds(100)).ok());
  EXPECT_FALSE(TcpReachable("127.0.0.1:0", std::chrono::milliseconds(100)).ok());
}

}  // namespace
}  // namespace hpod::agent::health
