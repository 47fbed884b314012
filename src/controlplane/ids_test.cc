#include "hpod/controlplane/ids.h"

#include <gtest/gtest.h>

#include "hpod/api/validate.h"

namespace hpod::controlplane {
namespace {

TEST(IdsTest, FormsMatchTheModel) {
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(api::MatchesPattern("[a-z0-9]{12}", NewClusterId()));
    EXPECT_TRUE(api::MatchesPattern("i-[a-f0-9]{8}(?:[a-f0-9]{9})?", NewInstanceId()));
    EXPECT_TRUE(api::MatchesPattern(
        "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", NewEventId()));
  }
  EXPECT_EQ(NewInstanceId().size(), 19u);
  EXPECT_TRUE(
      api::MatchesPattern("[a-zA-Z0-9][a-zA-Z0-9\\-]*[a-zA-Z0-9]", NewNodeLogicalId("workers-3")));
}

TEST(IdsTest, ArnRoundTrip) {
  std::string arn = ClusterArn("us-west-2", "123456789012", "2hd31rmi9mde");
  EXPECT_EQ(arn, "arn:aws:sagemaker:us-west-2:123456789012:cluster/2hd31rmi9mde");
  EXPECT_EQ(ClusterIdFromArn(arn), "2hd31rmi9mde");
  EXPECT_EQ(ClusterIdFromArn("demo"), std::nullopt);
  EXPECT_EQ(ClusterIdFromArn("arn:aws:sagemaker:us-west-2:123:cluster/2hd31rmi9mde"), std::nullopt);
}

TEST(IdsTest, HostnamesAndTargets) {
  EXPECT_EQ(HostnameFromIp("10.1.57.141"), "ip-10-1-57-141");
  EXPECT_EQ(PrivateDnsName("10.1.5.138", "us-west-2"), "ip-10-1-5-138.us-west-2.compute.internal");
  EXPECT_EQ(PrivateDnsName("10.1.5.138", "us-east-1"), "ip-10-1-5-138.ec2.internal");
  EXPECT_EQ(SessionTarget("2hd31rmi9mde", "controller-machine", "i-09e7576cbc230c181"),
            "sagemaker-cluster:2hd31rmi9mde_controller-machine-i-09e7576cbc230c181");
}

}  // namespace
}  // namespace hpod::controlplane
