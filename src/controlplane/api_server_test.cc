// ApiServer on requests signed as the aws CLI signs them (auth::SignRequest) with
// keys from the store: HpodGetCallerIdentity for each role, and the checks every
// operation passes first (signature, key, role).

#include "hpod/controlplane/api_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpod/auth/sigv4.h"
#include "hpod/base/clock.h"
#include "hpod/controlplane/init.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/controlplane/node_logs.h"
#include "hpod/store/store.h"
#include "hpod/store/store_test_util.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hpod-api-server-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = std::move(store::OpenSqliteStore({}).value());
    logs_ = std::make_unique<NodeLogs>(NodeLogsOptions{(dir_ / "logs").string()});
    api_ = std::make_unique<ClusterApi>(*store_, clock_, options_, PageTokenCodec("secret"),
                                        [](const std::string&) {});
    node_api_ = std::make_unique<NodeApi>(*store_, clock_, nullptr, *logs_, nullptr);
    admin_ = CreateAccessKey(*store_, store::Role::kAdmin, "admin", clock_).value();
    user_ = CreateAccessKey(*store_, store::Role::kUser, "user", clock_).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<ApiServer> Server(bool insecure = false, Metrics* metrics = nullptr) {
    ApiServerOptions o;
    o.insecure_no_auth = insecure;
    return std::make_unique<ApiServer>(*store_, *api_, *node_api_, clock_, o, metrics);
  }

  // POST / for SageMaker.<op>, signed with `key` (unsigned when null).
  http::Request Signed(const std::string& op, const std::string& body,
                       const store::AccessKeyRecord* key, const std::string& secret = "") {
    auth::SignableRequest sr;
    sr.method = "POST";
    sr.target = "/";
    sr.headers = {{"host", "127.0.0.1:8450"},
                  {"content-type", "application/x-amz-json-1.1"},
                  {"x-amz-target", "SageMaker." + op}};
    sr.body = body;
    if (key != nullptr) {
      auth::Credentials c{key->access_key_id, secret.empty() ? key->secret_access_key : secret, ""};
      EXPECT_TRUE(auth::SignRequest(sr, c, "us-west-2", "sagemaker", clock_.Now()).ok());
    }
    http::Request r;
    r.method = sr.method;
    r.target = sr.target;
    for (const auto& [name, value] : sr.headers) r.headers.push_back({name, value});
    r.body = sr.body;
    return r;
  }

  static json Body(const http::Response& r) { return json::parse(r.body); }

  std::filesystem::path dir_;
  FakeClock clock_;
  ControlPlaneOptions options_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeLogs> logs_;
  std::unique_ptr<ClusterApi> api_;
  std::unique_ptr<NodeApi> node_api_;
  store::AccessKeyRecord admin_, user_;
};

TEST_F(ApiServerTest, GetCallerIdentityNamesTheSigningKeyAndItsRole) {
  auto server = Server();
  http::Response admin = server->Handle(Signed("HpodGetCallerIdentity", "{}", &admin_));
  ASSERT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(admin.HeaderValue("Content-Type"), "application/x-amz-json-1.1");
  EXPECT_EQ(Body(admin), json({{"AccessKeyId", admin_.access_key_id}, {"Role", "admin"}}));
  // A user key (read-only) may ask too.
  http::Response user = server->Handle(Signed("HpodGetCallerIdentity", "{}", &user_));
  ASSERT_EQ(user.status, 200) << user.body;
  EXPECT_EQ(Body(user), json({{"AccessKeyId", user_.access_key_id}, {"Role", "user"}}));
  EXPECT_NE(admin_.access_key_id, user_.access_key_id);
  EXPECT_TRUE(ClusterApi::IsReadOnly("HpodGetCallerIdentity"));
  // ... which is not so for a change.
  http::Response denied =
      server->Handle(Signed("DeleteCluster", R"({"ClusterName":"demo"})", &user_));
  EXPECT_EQ(denied.status, 400) << denied.body;
  EXPECT_EQ(Body(denied)["__type"], "AccessDeniedException");
}

TEST_F(ApiServerTest, GetCallerIdentityNeedsAValidSignatureAndTakesNoInput) {
  auto server = Server();
  http::Response unsigned_request = server->Handle(Signed("HpodGetCallerIdentity", "{}", nullptr));
  EXPECT_EQ(unsigned_request.status, 403);
  EXPECT_EQ(Body(unsigned_request)["__type"], "MissingAuthenticationTokenException");
  http::Response wrong_secret =
      server->Handle(Signed("HpodGetCallerIdentity", "{}", &admin_, "not-the-secret"));
  EXPECT_EQ(wrong_secret.status, 403);
  EXPECT_EQ(Body(wrong_secret)["__type"], "InvalidSignatureException");
  store::AccessKeyRecord unknown = admin_;
  unknown.access_key_id = "AKIAUNKNOWNUNKNOWN00";
  http::Response unknown_key = server->Handle(Signed("HpodGetCallerIdentity", "{}", &unknown));
  EXPECT_EQ(unknown_key.status, 403);
  EXPECT_EQ(Body(unknown_key)["__type"], "UnrecognizedClientException");
  http::Response extra =
      server->Handle(Signed("HpodGetCallerIdentity", R"({"Role":"admin"})", &user_));
  EXPECT_EQ(extra.status, 400);
  EXPECT_EQ(Body(extra)["__type"], "ValidationException");
}

// A key read for one request serves the next ones for a few seconds, not longer;
// a key added meanwhile (by `hpodd` commands in another process) works at once.
TEST_F(ApiServerTest, AKeyIsReadAgainOnceItsFewSecondsAreUp) {
  auto server = Server();
  ASSERT_EQ(server->Handle(Signed("HpodGetCallerIdentity", "{}", &admin_)).status, 200);
  // The record changes under the server (no command does this; it shows the bound).
  store::AccessKeyRecord changed = admin_;
  changed.secret_access_key = "a-secret-written-later";
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutAccessKey(changed); }).ok());
  clock_.AdvanceTime(std::chrono::seconds(4));
  EXPECT_EQ(server->Handle(Signed("HpodGetCallerIdentity", "{}", &admin_)).status, 200);
  clock_.AdvanceTime(std::chrono::seconds(1));
  EXPECT_EQ(server->Handle(Signed("HpodGetCallerIdentity", "{}", &admin_)).status, 403);
  EXPECT_EQ(server->Handle(Signed("HpodGetCallerIdentity", "{}", &changed)).status, 200);

  auto added = CreateAccessKey(*store_, store::Role::kUser, "added", clock_);
  ASSERT_TRUE(added.ok());
  http::Response r = server->Handle(Signed("HpodGetCallerIdentity", "{}", &*added));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["Role"], "user");
}

TEST_F(ApiServerTest, WithoutAuthEveryCallerIsAnAdminWithoutAKey) {
  http::Response r =
      Server(/*insecure=*/true)->Handle(Signed("HpodGetCallerIdentity", "{}", nullptr));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r), json({{"AccessKeyId", ""}, {"Role", "admin"}}));
}

// A read-only answer is served again from the response cache while the store is
// unchanged, and read afresh after any write (response_cache.h).
TEST_F(ApiServerTest, ReadAnswersAreServedAgainUntilTheStoreIsWritten) {
  store::ClusterRecord c = store::test_util::Cluster("c1", "demo", 1.0);
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutCluster(c); }).ok());
  Metrics metrics("test");
  auto server = Server(/*insecure=*/false, &metrics);
  auto describe = [&] {
    http::Response r =
        server->Handle(Signed("DescribeCluster", R"({"ClusterName":"demo"})", &user_));
    EXPECT_EQ(r.status, 200) << r.body;
    return r;
  };
  auto lookups = [&](const std::string& result) {
    std::string text = metrics.Scrape().value();
    std::string line = "hpod_api_response_cache_lookups_total{result=\"" + result + "\"} ";
    size_t at = text.find(line);
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + line.size()));
  };
  http::Response first = describe();
  EXPECT_EQ(Body(first)["ClusterStatus"], "Creating");
  http::Response again = describe();
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(lookups("hit"), 1);
  EXPECT_EQ(lookups("miss"), 1);
  // Each answer has its own request id, cached or not.
  EXPECT_NE(again.HeaderValue("x-amzn-RequestId"), first.HeaderValue("x-amzn-RequestId"));

  c.status = "InService";
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutCluster(c); }).ok());
  EXPECT_EQ(Body(describe())["ClusterStatus"], "InService");
  EXPECT_EQ(Body(describe())["ClusterStatus"], "InService");
  EXPECT_EQ(lookups("hit"), 2);
  EXPECT_EQ(lookups("miss"), 2);

  // An error is never kept: a cluster created after a NotFound is found.
  http::Response missing =
      server->Handle(Signed("DescribeCluster", R"({"ClusterName":"later"})", &user_));
  EXPECT_EQ(missing.status, 400);
  store::ClusterRecord later = store::test_util::Cluster("c2", "later", 2.0);
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutCluster(later); }).ok());
  EXPECT_EQ(server->Handle(Signed("DescribeCluster", R"({"ClusterName":"later"})", &user_)).status,
            200);
  // Nor is an answer that is not the store's alone.
  EXPECT_FALSE(ClusterApi::AnswersFromStoreOnly("DescribeClusterNode"));
  EXPECT_FALSE(ClusterApi::AnswersFromStoreOnly("HpodGetCallerIdentity"));
}

}  // namespace
}  // namespace hpod::controlplane
