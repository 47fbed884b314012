// JoinHpodd against an in-process stand-in for hpodd's agents' listener (TLS, a
// CA made here and pinned by the token): what each answer to the join request
// becomes. A refusal is kPermissionDenied (the configured agent then exits 78);
// an hpodd that cannot take the join now (503, 429, 5xx) is kUnavailable (it
// tries again); neither leaves a join on the machine's disk.

#include "hpod/agent/join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>

#include "hpod/agent/test_util.h"
#include "hpod/auth/join_token.h"
#include "hpod/auth/pki.h"
#include "hpod/base/clock.h"
#include "hpod/http/server.h"

namespace hpod::agent {
namespace {

using testing::TempDir;
using testing::WriteTestFile;

class JoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = auth::pki::CreateCa("hpodd", std::chrono::hours(1), RealClock::Get());
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = *ca;
    auto server_cert = auth::pki::IssueServerCertificate(ca_, {"127.0.0.1"},
                                                         std::chrono::hours(1), RealClock::Get());
    ASSERT_TRUE(server_cert.ok()) << server_cert.status().ToString();
    WriteTestFile(dir_.path() + "/server.pem", server_cert->cert_pem);
    WriteTestFile(dir_.path() + "/server.key", server_cert->key_pem, 0600);
    http::ServerOptions options;
    options.tls.enabled = true;
    options.tls.cert_file = dir_.path() + "/server.pem";
    options.tls.key_file = dir_.path() + "/server.key";
    auto server = http::Server::Start(options, [this](const http::Request& r) {
      if (r.target == "/join/v1/ca") return http::Response{200, {}, ca_.cert_pem};
      return http::Response{join_status_.load(), {{"Content-Type", "application/json"}},
                            R"({"error": "the answer under test"})"};
    });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    auto pin = auth::pki::CaPin(ca_.cert_pem);
    ASSERT_TRUE(pin.ok());
    options_.server = "https://127.0.0.1:" + std::to_string(server_->port());
    options_.token = auth::FormatJoinToken(auth::NewJoinToken(*pin));
    options_.state_dir = dir_.path() + "/state";
    options_.facts = {{"machine_id", std::string(32, 'a')}};
    options_.timeout = std::chrono::seconds(10);
  }

  bool Joined() const {
    return std::filesystem::exists(NodeIdentityPaths(options_.state_dir).join);
  }

  TempDir dir_;
  auth::pki::Issued ca_;
  std::atomic<int> join_status_{503};
  std::unique_ptr<http::Server> server_;
  JoinOptions options_;
};

TEST_F(JoinTest, AnHpoddThatCannotTakeTheJoinNowIsWorthTryingAgain) {
  for (int status : {503, 429, 500}) {
    join_status_ = status;
    auto joined = JoinHpodd(options_);
    ASSERT_FALSE(joined.ok()) << status;
    EXPECT_EQ(joined.status().code(), StatusCode::kUnavailable) << joined.status().ToString();
    EXPECT_NE(joined.status().message().find("could not take the join now (HTTP " +
                                             std::to_string(status) + ": the answer under test)"),
              std::string::npos)
        << joined.status().ToString();
    EXPECT_FALSE(Joined());
  }
}

TEST_F(JoinTest, ARefusalIsFinal) {
  for (int status : {403, 409, 400}) {
    join_status_ = status;
    auto joined = JoinHpodd(options_);
    ASSERT_FALSE(joined.ok()) << status;
    EXPECT_EQ(joined.status().code(), StatusCode::kPermissionDenied) << joined.status().ToString();
    EXPECT_EQ(joined.status().message(), "hpodd refused the join: the answer under test");
    EXPECT_FALSE(Joined());
  }
}

}  // namespace
}  // namespace hpod::agent
