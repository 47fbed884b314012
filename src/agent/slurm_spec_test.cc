// ParseSlurmSpec: the `slurm` message (api::agentproto::SlurmRole) into what
// SlurmNode applies, and every refusal of a malformed one.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpod/agent/slurm_node.h"
#include "hpod/base/base64.h"

namespace hpod::agent {
namespace {

using nlohmann::json;

json GoodMessage() {
  return {{"type", "slurm"},
          {"role", "compute"},
          {"node_name", "ip-10-0-0-2"},
          {"controller_addr", "10.0.0.1"},
          {"munge_key", Base64UrlEncode(std::string(32, 'x'))},
          {"conf_hash", "abc"},
          {"node_names", {"ip-10-0-0-2", "ip-10-0-0-3"}},
          {"files", {{"slurm.conf", "a"}, {"gres.conf", "b"}}},
          {"stand_in_gpus", 4},
          {"gpu_device_dir", "/tmp/dev"},
          {"motd", "hi"},
          {"avoid_start_time", "2026-12-04T19:37:47"}};
}

TEST(ParseSlurmSpecTest, ParsesAGoodMessage) {
  auto s = ParseSlurmSpec(GoodMessage());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->role, "compute");
  EXPECT_EQ(s->node_name, "ip-10-0-0-2");
  EXPECT_EQ(s->controller_addr, "10.0.0.1");
  EXPECT_EQ(s->munge_key, std::string(32, 'x'));
  EXPECT_EQ(s->conf_hash, "abc");
  EXPECT_EQ(s->node_names, (std::vector<std::string>{"ip-10-0-0-2", "ip-10-0-0-3"}));
  EXPECT_EQ(s->files.size(), 2u);
  EXPECT_EQ(s->files.at("slurm.conf"), "a");
  EXPECT_EQ(s->files.at("gres.conf"), "b");
  EXPECT_EQ(s->stand_in_gpus, 4);
  EXPECT_EQ(s->gpu_device_dir, "/tmp/dev");
  EXPECT_EQ(s->motd, "hi");
  EXPECT_EQ(s->avoid_start_time, "2026-12-04T19:37:47");
}

TEST(ParseSlurmSpecTest, RejectsMalformedMessages) {
  auto expect_invalid = [](const json& m, const std::string& mentions) {
    auto s = ParseSlurmSpec(m);
    ASSERT_FALSE(s.ok()) << m.dump();
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << m.dump();
    EXPECT_NE(std::string(s.status().message()).find(mentions), std::string::npos)
        << s.status().message();
  };
  expect_invalid(json::array(), "not a JSON object");
  json m = GoodMessage();
  m["role"] = "worker";
  expect_invalid(m, "role");
  m = GoodMessage();
  m.erase("role");
  expect_invalid(m, "role");
  m = GoodMessage();
  m.erase("node_name");
  expect_invalid(m, "node_name");
  m = GoodMessage();
  m["node_name"] = 7;
  expect_invalid(m, "node_name");
  m = GoodMessage();
  m.erase("controller_addr");
  expect_invalid(m, "controller_addr");
  m = GoodMessage();
  m["munge_key"] = Base64UrlEncode(std::string(31, 'x'));  // too short
  expect_invalid(m, "munge_key");
  m = GoodMessage();
  m["munge_key"] = "not base64 at all!";
  expect_invalid(m, "munge_key");
  m = GoodMessage();
  m.erase("munge_key");
  expect_invalid(m, "munge_key");
  for (const char* bad : {"../slurm.conf", "a/b", "", ".hidden"}) {
    m = GoodMessage();
    m["files"][bad] = "x";
    expect_invalid(m, "files");
  }
  m = GoodMessage();
  m["files"]["slurm.conf"] = 3;
  expect_invalid(m, "files");
}

}  // namespace
}  // namespace hpod::agent
