// AgentService's `config` message: it waits for every node's address (a
// `config_pending` is reused for 250 ms), then describes the cluster
// (resource_config.json), and a group's config is reused for a second.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/agent_service_test_fixture.h"

namespace hpod::controlplane {
namespace {

using agent_test::AgentServiceTest;
using nlohmann::json;

TEST_F(AgentServiceTest, ConfigWaitsForEveryAddressThenDescribesTheCluster) {
  std::string secret;
  auto ws = Register(&secret);
  ASSERT_TRUE(store_
                  ->Write([](store::WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto n, tx.GetNodeById("i-00000000000000002"));
                    n.private_ip = "10.77.0.11";
                    return tx.PutNode(n);
                  })
                  .ok());
  // The `config_pending` Register saw is what a node asking within 250 ms gets.
  ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
  json config = Next(*ws);
  EXPECT_EQ(config["type"], "config_pending") << config.dump();
  EXPECT_EQ(config["retry_ms"], 300) << "a small cluster's nodes ask again soon";
  clock_.AdvanceTime(std::chrono::milliseconds(250));
  ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
  config = Next(*ws);
  ASSERT_EQ(config["type"], "config") << config.dump();
  EXPECT_EQ(config["heartbeat_interval_ms"], 1234);
  EXPECT_EQ(config["lifecycle"]["source_s3_uri"], "file:///lcs/");
  EXPECT_EQ(config["lifecycle"]["timeout_s"], 99);
  const json& rc = config["resource_config"];
  EXPECT_EQ(rc["ClusterConfig"]["ClusterName"], "demo");
  ASSERT_EQ(rc["InstanceGroups"].size(), 1u);
  const json& instances = rc["InstanceGroups"][0]["Instances"];
  ASSERT_EQ(instances.size(), 2u);
  EXPECT_EQ(instances[1]["InstanceName"], "workers-2");
  EXPECT_EQ(instances[1]["CustomerIpAddress"], "10.77.0.11");
}

// A group's config is built once and reused for a second (10,000 nodes asking
// at once must not make 10,000 renderings of the cluster), then built again.
TEST_F(AgentServiceTest, AGroupsConfigIsReusedForASecond) {
  std::string secret;
  auto ws = Register(&secret);
  auto set_ip = [&](const std::string& ip) {
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto n, tx.GetNodeById("i-00000000000000002"));
                      n.private_ip = ip;
                      return tx.PutNode(n);
                    })
                    .ok());
  };
  auto second_ip = [&] {
    EXPECT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
    json config = Next(*ws);
    EXPECT_EQ(config["type"], "config") << config.dump();
    return config["resource_config"]["InstanceGroups"][0]["Instances"][1]["CustomerIpAddress"];
  };
  set_ip("10.77.0.11");
  clock_.AdvanceTime(std::chrono::milliseconds(250));  // past Register's config_pending
  EXPECT_EQ(second_ip(), "10.77.0.11");
  set_ip("10.77.0.12");
  EXPECT_EQ(second_ip(), "10.77.0.11") << "the snapshot of a moment ago";
  clock_.AdvanceTime(std::chrono::milliseconds(1000));
  EXPECT_EQ(second_ip(), "10.77.0.12");
}

}  // namespace
}  // namespace hpod::controlplane
