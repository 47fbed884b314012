#include "hpod/agent/health/network_check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hpod::agent::health {
namespace {

// A listening loopback socket; its port.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
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

TEST(NetworkCheckTest, RepeatedFailuresMeanReplaceAndOneIsNoise) {
  std::string target;
  {
    Listener l;
    target = l.Target();
  }  // closed: connects are refused now
  NetworkCheck check([&] { return target; }, std::chrono::milliseconds(500), 2);
  EXPECT_EQ(check.Run().result, Result::kOk);  // one failure: noise
  Outcome o = check.Run();
  EXPECT_EQ(o.result, Result::kFail);
  EXPECT_EQ(o.verdict, Verdict::kReplace);
  EXPECT_NE(o.reason.find(target), std::string::npos) << o.reason;
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
