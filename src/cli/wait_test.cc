#include "hpod/cli/wait.h"

#include <gtest/gtest.h>

#include <sstream>

#include "hpod/cli/fake_transport.h"

namespace hpod::cli {
namespace {

http::Response Cluster(const std::string& status, int current, int target,
                       const std::string& failure = "") {
  Json body = {
      {"ClusterName", "ml"},
      {"ClusterStatus", status},
      {"InstanceGroups",
       {{{"InstanceGroupName", "controller"}, {"CurrentCount", 1}, {"TargetCount", 1}},
        {{"InstanceGroupName", "workers"}, {"CurrentCount", current}, {"TargetCount", target}}}}};
  if (!failure.empty()) body["FailureMessage"] = failure;
  return JsonResponse(200, body);
}

class WaitTest : public ::testing::Test {
 protected:
  Status Wait(Waiter waiter, bool live, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    ApiClientOptions options;
    options.max_attempts = 1;
    ApiClient client(options, transport_, clock_, sleeper_);
    WaitOptions wait;
    wait.waiter = waiter;
    wait.cluster_name = "ml";
    wait.timeout = timeout;
    wait.live = live;
    return WaitForCluster(client, wait, clock_, sleeper_, progress_);
  }

  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  std::ostringstream progress_;
};

TEST_F(WaitTest, InServicePollsEveryTwoSecondsWithPlainLines) {
  transport_.Queue("DescribeCluster", {Cluster("Creating", 0, 4), Cluster("Creating", 0, 4),
                                       Cluster("Creating", 2, 4), Cluster("InService", 4, 4)});
  EXPECT_TRUE(Wait(Waiter::kClusterInService, false).ok());
  EXPECT_EQ(transport_.CountCalls("DescribeCluster"), 4u);
  ASSERT_EQ(sleeper_.sleeps.size(), 3u);
  for (auto s : sleeper_.sleeps) EXPECT_EQ(s.count(), 2000);
  // One line per change, not per poll.
  EXPECT_EQ(progress_.str(),
            "ml: Creating  controller 1/1  workers 0/4  [00:00]\n"
            "ml: Creating  controller 1/1  workers 2/4  [00:04]\n"
            "ml: InService  controller 1/1  workers 4/4  [00:06]\n");
}

TEST_F(WaitTest, ASoftwareUpdateSaysWhereItStands) {
  http::Response updating = Cluster("SystemUpdating", 3, 3);
  Json body = Json::parse(updating.body);
  body["HpodSoftwareUpdate"] = {{"Status", "InProgress"},
                                {"Message", "batch 2: replacing ip-10-1-0-12 in workers"}};
  transport_.Queue("DescribeCluster", {JsonResponse(200, body), Cluster("InService", 3, 3)});
  EXPECT_TRUE(Wait(Waiter::kClusterInService, false).ok());
  EXPECT_EQ(progress_.str(),
            "ml: SystemUpdating  controller 1/1  workers 3/3  batch 2: replacing ip-10-1-0-12 in "
            "workers  [00:00]\n"
            "ml: InService  controller 1/1  workers 3/3  [00:02]\n");
}

TEST_F(WaitTest, LiveLineIsRewrittenInPlace) {
  transport_.Queue("DescribeCluster", {Cluster("Creating", 0, 4), Cluster("InService", 4, 4)});
  EXPECT_TRUE(Wait(Waiter::kClusterInService, true).ok());
  std::string out = progress_.str();
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // one line, ended once
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 2);
  EXPECT_NE(out.find("\rml: InService  controller 1/1  workers 4/4  [00:02]"), std::string::npos);
}

TEST_F(WaitTest, FailedReportsTheFailureMessage) {
  transport_.Queue("DescribeCluster",
                   {Cluster("Creating", 0, 4),
                    Cluster("Failed", 0, 4, "We currently do not have sufficient capacity.")});
  Status s = Wait(Waiter::kClusterInService, false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "Waiter ClusterInService failed: Waiter encountered a terminal failure state: "
            "ClusterStatus is Failed: We currently do not have sufficient capacity.");
}

TEST_F(WaitTest, TimesOut) {
  transport_.Queue("DescribeCluster", {Cluster("Creating", 0, 4)});
  Status s = Wait(Waiter::kClusterInService, false, std::chrono::seconds(5));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "Waiter ClusterInService failed: timed out after 5 seconds (last ClusterStatus: "
            "Creating)");
  // Polls at 0, 2, 4 and (clamped) 5 seconds.
  EXPECT_EQ(transport_.CountCalls("DescribeCluster"), 4u);
}

TEST_F(WaitTest, InServiceFailsOnUnknownCluster) {
  transport_.Queue("DescribeCluster",
                   {ErrorResponse(400, "ResourceNotFound", "Cluster ml not found")});
  Status s = Wait(Waiter::kClusterInService, false);
  EXPECT_EQ(s.message(),
            "Waiter ClusterInService failed: An error occurred (ResourceNotFound) when calling the "
            "DescribeCluster operation: Cluster ml not found");
}

TEST_F(WaitTest, DeletedSucceedsOnResourceNotFound) {
  transport_.Queue("DescribeCluster", {Cluster("Deleting", 4, 0), Cluster("Deleting", 0, 0),
                                       ErrorResponse(400, "ResourceNotFound", "gone")});
  EXPECT_TRUE(Wait(Waiter::kClusterDeleted, false).ok());
  EXPECT_EQ(transport_.CountCalls("DescribeCluster"), 3u);
  EXPECT_NE(progress_.str().find("ml: deleted"), std::string::npos);
}

TEST_F(WaitTest, DeletedFailsWhenDeletionFails) {
  transport_.Queue("DescribeCluster",
                   {Cluster("Deleting", 4, 0), Cluster("Failed", 4, 0, "could not delete")});
  Status s = Wait(Waiter::kClusterDeleted, false);
  EXPECT_EQ(s.message(),
            "Waiter ClusterDeleted failed: Waiter encountered a terminal failure state: "
            "ClusterStatus is Failed: could not delete");
}

}  // namespace
}  // namespace hpod::cli
