#include "hpod/agent/local_socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

// Connects, sends `request` as is and closes its side, returns everything the
// server wrote.
std::string Exchange(const std::string& path, const std::string& request) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  (void)!::write(fd, request.data(), request.size());
  ::shutdown(fd, SHUT_WR);  // a request without its newline ends here
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

class LocalSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpod-local-socket-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/run/hpod-agent/agent.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(LocalSocketTest, RelaysOneRequestLineAndAnswersOneLine) {
  Json seen;
  std::atomic<uid_t> peer{static_cast<uid_t>(-2)};
  LocalSocketServer server(path_, [&](const Json& request, uid_t uid) -> StatusOr<Json> {
    seen = request;
    peer = uid;
    return Json{{"verdict", "healthy"}};
  });
  ASSERT_TRUE(server.Start().ok());
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u) << "any user's srun may ask";
  EXPECT_EQ(Exchange(path_, R"({"op":"job_health","job_id":"7"})"
                            "\n"),
            R"({"verdict":"healthy"})"
            "\n");
  EXPECT_EQ(seen["job_id"], "7");
  // Who asked, from the kernel (the node's systemctl changes units for root only).
  EXPECT_EQ(peer.load(), ::getuid());
  // Several clients, one after the other and at once.
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back(
        [&] { ok += Exchange(path_, "{\"op\":\"x\"}\n") == "{\"verdict\":\"healthy\"}\n"; });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 6);
}

TEST_F(LocalSocketTest, BadRequestsAndHpoddErrorsAreAnsweredWithAnError) {
  LocalSocketServer server(path_, [](const Json& request, uid_t) -> StatusOr<Json> {
    if (request.value("op", "") == "down") return UnavailableError("not connected to hpodd");
    return Json::array();
  });
  ASSERT_TRUE(server.Start().ok());
  EXPECT_THAT(Exchange(path_, "not json\n"), HasSubstr("not a JSON object"));
  EXPECT_THAT(Exchange(path_, "[1,2]\n"), HasSubstr("not a JSON object"));
  EXPECT_EQ(Exchange(path_, "{\"op\":\"down\"}\n"), "{\"error\":\"not connected to hpodd\"}\n");
  EXPECT_THAT(Exchange(path_, "{\"op\":\"x\"}\n"), HasSubstr("answer is not an object"));
  // A request without its newline, the client's side then closed, still counts.
  EXPECT_THAT(Exchange(path_, "{\"op\":\"down\"}"), HasSubstr("not connected"));
}

TEST_F(LocalSocketTest, AStaleSocketFileIsReplacedAndStopRemovesNothingElse) {
  {
    LocalSocketServer first(path_,
                            [](const Json&, uid_t) -> StatusOr<Json> { return Json::object(); });
    ASSERT_TRUE(first.Start().ok());
  }  // stopped; its socket file stays, as after a crash
  LocalSocketServer second(path_, [](const Json&, uid_t) -> StatusOr<Json> {
    return Json{{"ok", true}};
  });
  ASSERT_TRUE(second.Start().ok());
  EXPECT_EQ(Exchange(path_, "{}\n"), "{\"ok\":true}\n");
}

TEST(PendingQueriesTest, AnAnswerReachesItsQuestionAndSilenceTimesOut) {
  PendingQueries q;
  std::string sent;
  std::thread answerer;
  auto answer = q.Ask(
      [&](const std::string& id) {
        sent = id;
        answerer = std::thread([&q, id] {
          q.Deliver("q-unknown", Json{{"wrong", true}});  // dropped
          q.Deliver(id, Json{{"ok", true}});
        });
      },
      std::chrono::seconds(30));
  answerer.join();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["ok"], true);
  EXPECT_EQ(sent, "q-1");
  auto silent = q.Ask([](const std::string&) {}, std::chrono::milliseconds(10));
  EXPECT_EQ(silent.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(silent.status().message(), HasSubstr("did not answer"));
}

}  // namespace
}  // namespace hpod::agent
