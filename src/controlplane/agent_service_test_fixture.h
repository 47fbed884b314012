#pragma once

// The AgentService fixture shared by agent_service_test.cc and
// agent_service_config_test.cc: AgentService on a real http::Server (Unix socket
// for agents, TCP loopback for users) with a real store, and WebSocket clients
// that play the agent.
//
// Thread contract: one test thread; the service's callbacks record under mu_.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "hpod/base/clock.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/http/server.h"
#include "hpod/http/websocket.h"
#include "hpod/store/store.h"

namespace hpod::controlplane::agent_test {

using nlohmann::json;
using std::chrono::seconds;

constexpr auto kWait = std::chrono::seconds(10);

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hpod-agents-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = std::move(store::OpenSqliteStore({}).value());
    logs_ = std::make_unique<NodeLogs>(NodeLogsOptions{(dir_ / "logs").string()});
    AgentServiceOptions o;
    o.heartbeat_interval = std::chrono::milliseconds(1234);
    o.lifecycle_timeout = seconds(99);
    agents_ = std::make_unique<AgentService>(*store_, *logs_, clock_, o, "key",
                                             [this](const std::string& id) {
                                               std::lock_guard<std::mutex> l(mu_);
                                               changed_.push_back(id);
                                             });
    http::ServerOptions so;
    so.unix_path = (dir_ / "agent.sock").string();
    auto refuse = [](const http::Request&) { return http::Response{404, {}, ""}; };
    agent_server_ =
        std::move(http::Server::Start(so, refuse, [this](const http::Request& r, auto ws) {
                    return agents_->HandleAgentUpgrade(r, std::move(ws));
                  }).value());
    user_server_ =
        std::move(http::Server::Start({}, refuse, [this](const http::Request& r, auto ws) {
                    return agents_->HandleClientSessionUpgrade(r, std::move(ws));
                  }).value());
    // One cluster, two nodes; the second has no address yet.
    ASSERT_TRUE(store_
                    ->Write([](store::WriteTx& tx) -> Status {
                      store::ClusterRecord c;
                      c.id = "abcdefabcdef";
                      c.name = "demo";
                      c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
                      c.status = "Creating";
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
                      store::GroupRecord g;
                      g.cluster_id = c.id;
                      g.name = "workers";
                      g.spec = {{"InstanceType", "ml.c5.xlarge"},
                                {"LifeCycleConfig",
                                 {{"SourceS3Uri", "file:///lcs/"}, {"OnCreate", "on_create.sh"}}}};
                      g.target_count = 2;
                      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                      for (int i = 1; i <= 2; ++i) {
                        store::NodeRecord n;
                        n.instance_id = "i-0000000000000000" + std::to_string(i);
                        n.cluster_id = c.id;
                        n.group_name = "workers";
                        n.ordinal = i;
                        n.status = "Pending";
                        n.private_ip = i == 1 ? "10.77.0.10" : "";
                        HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                      }
                      return OkStatus();
                    })
                    .ok());
  }
  void TearDown() override {
    agents_->Shutdown();
    user_server_->Shutdown(std::chrono::milliseconds(100));
    agent_server_->Shutdown(std::chrono::milliseconds(100));
    std::filesystem::remove_all(dir_);
  }

  StatusOr<std::unique_ptr<http::WebSocketClient>> Dial(const std::string& path,
                                                        const std::string& id,
                                                        const std::string& auth) {
    http::WebSocketClientOptions o;
    o.unix_socket_path = (dir_ / "agent.sock").string();
    return http::WebSocketClient::Connect("ws://localhost" + path,
                                          {{"X-Hpod-Instance-Id", id}, {"Authorization", auth}}, o);
  }
  static json Next(http::WebSocketClient& ws) {
    auto m = ws.Receive(kWait);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? json::parse(m->data) : json();
  }
  // Bootstraps node 1 and returns its channel after `hello`.
  std::unique_ptr<http::WebSocketClient> Register(std::string* secret) {
    auto ws = Dial("/agent/v1/channel", kNode1, "HpodBootstrap " + agents_->BootstrapToken(kNode1));
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    json cred = Next(**ws);
    EXPECT_EQ(cred["type"], "credential");
    *secret = cred["secret"];
    EXPECT_TRUE((*ws)->Send(Hello().dump(), false).ok());
    // hello is handled in order before anything this test sends next.
    EXPECT_TRUE((*ws)->Send(json{{"type", "get_config"}}.dump(), false).ok());
    EXPECT_EQ(Next(**ws)["type"], "config_pending");
    return std::move(*ws);
  }

  static json Hello(int64_t version = api::agentproto::kProtocolVersion) {
    return json{{"type", "hello"}, {"protocol_version", version}, {"agent_version", "t"}};
  }
  // What the store holds of a node's agent (a default record when none).
  store::AgentRecord AgentOf(const std::string& instance_id) {
    store::AgentRecord a;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(a, tx.GetAgent(instance_id));
                      return OkStatus();
                    })
                    .ok());
    return a;
  }
  // Descriptions of node 1's events, oldest first.
  std::vector<std::string> NodeEvents() {
    std::vector<std::string> out;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      store::EventQuery q;
                      q.cluster_id = "abcdefabcdef";
                      q.instance_id = kNode1;
                      q.ascending = true;
                      HPOD_ASSIGN_OR_RETURN(auto events, tx.QueryEvents(q));
                      for (const auto& e : events) out.push_back(e.description);
                      return OkStatus();
                    })
                    .ok());
    return out;
  }
  template <typename Pred>
  static bool WaitFor(Pred pred) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  const std::string kNode1 = "i-00000000000000001";
  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeLogs> logs_;
  std::unique_ptr<AgentService> agents_;
  std::unique_ptr<http::Server> agent_server_, user_server_;
  std::mutex mu_;
  std::vector<std::string> changed_;
};

}  // namespace hpod::controlplane::agent_test
