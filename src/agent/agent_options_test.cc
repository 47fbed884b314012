#include "hpod/agent/agent_options.h"

#include <gtest/gtest.h>

namespace hpod::agent {
namespace {

TEST(AgentOptionsTest, ParsesConfigWithDefaults) {
  auto options = ParseAgentConfig(
      R"({"instance_id":"i-1","cluster_id":"c","endpoint":"unix:///run/a.sock",
          "bootstrap_token":"t","state_dir":"/var/lib/s","hostname":"ip-10-0-0-1",
          "private_ip":"10.0.0.1","future_field":1})");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->instance_id, "i-1");
  EXPECT_EQ(options->endpoint, "unix:///run/a.sock");
  EXPECT_EQ(options->private_ip, "10.0.0.1");
  EXPECT_EQ(options->config_dir, "/opt/ml/config");
  EXPECT_EQ(options->lifecycle_root, "/tmp");
}

TEST(AgentOptionsTest, BadConfigsSayWhy) {
  EXPECT_EQ(ParseAgentConfig("{").status().message(), "agent config: not valid JSON");
  EXPECT_EQ(ParseAgentConfig(R"({"endpoint":"unix:///a","state_dir":"/s"})").status().message(),
            "agent config: missing \"instance_id\"");
  EXPECT_EQ(ParseAgentConfig(R"({"instance_id":"i","endpoint":"tcp://x","state_dir":"/s"})")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(
      ParseAgentConfig(R"({"instance_id":1,"endpoint":"unix:///a","state_dir":"/s"})").ok());
  EXPECT_FALSE(LoadAgentConfig("/no/such/agent.json").ok());
}

}  // namespace
}  // namespace hpod::agent
