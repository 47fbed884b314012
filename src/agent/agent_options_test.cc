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
  // Health checks: every 2 s, 5 s timeout, the defaults of docs/node-health.md.
  EXPECT_EQ(options->health.interval, std::chrono::milliseconds(2000));
  EXPECT_EQ(options->health.timeout, std::chrono::milliseconds(5000));
  EXPECT_TRUE(options->health.disk_paths.empty());
  EXPECT_EQ(options->health.min_free_bytes, 16u << 20);
  EXPECT_EQ(options->health.min_free_inodes, 64u);
  EXPECT_EQ(options->health.flag_file, "/var/run/sagemaker_healthcheck_status");
  EXPECT_EQ(options->health.kernel_log, "");
  EXPECT_EQ(options->health.nvml_library, "");
  EXPECT_EQ(options->health.gpu_max_temperature_c, 90u);
}

TEST(AgentOptionsTest, ParsesHealthOptions) {
  auto options = ParseAgentConfig(
      R"({"instance_id":"i-1","endpoint":"unix:///a","state_dir":"/s",
          "health_interval_ms":500,"health_timeout_ms":1500,
          "health_disk_paths":["/","/data"],"health_min_free_bytes":1048576,
          "health_min_free_inodes":10,"health_flag_file":"/run/flag",
          "health_kernel_log":"/var/log/kern.log","health_nvml_library":"/opt/libnvml.so",
          "health_gpu_max_temperature_c":85})");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  const health::HealthOptions& h = options->health;
  EXPECT_EQ(h.interval, std::chrono::milliseconds(500));
  EXPECT_EQ(h.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(h.disk_paths, (std::vector<std::string>{"/", "/data"}));
  EXPECT_EQ(h.min_free_bytes, 1048576u);
  EXPECT_EQ(h.min_free_inodes, 10u);
  EXPECT_EQ(h.flag_file, "/run/flag");
  EXPECT_EQ(h.kernel_log, "/var/log/kern.log");
  EXPECT_EQ(h.nvml_library, "/opt/libnvml.so");
  EXPECT_EQ(h.gpu_max_temperature_c, 85u);
  const std::string base = R"({"instance_id":"i","endpoint":"unix:///a","state_dir":"/s",)";
  EXPECT_EQ(ParseAgentConfig(base + R"("health_timeout_ms":0})").status().message(),
            "agent config: \"health_timeout_ms\" must be an integer 1..3600000");
  EXPECT_EQ(ParseAgentConfig(base + R"("health_disk_paths":["rel"]})").status().message(),
            "agent config: \"health_disk_paths\" must be an array of absolute paths");
  EXPECT_FALSE(ParseAgentConfig(base + R"("health_flag_file":1})").ok());
  EXPECT_TRUE(ParseAgentConfig(base + R"("health_interval_ms":0})").ok());  // off
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
