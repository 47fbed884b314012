// TrainingApi (HpodListTrainingRuns, HpodGetTrainingMetrics) and AgentService's
// QueryTraining against agents played by WebSocket clients over the real
// http::Server on a Unix socket (as in node_api_test.cc): which node is asked,
// what the answers become, and each error.

#include "hpod/controlplane/training_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "hpod/api/errors.h"
#include "hpod/api/model.h"
#include "hpod/base/clock.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/node_api.h"
#include "hpod/http/server.h"
#include "hpod/http/websocket.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {
namespace {

namespace proto = api::agentproto;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr auto kWait = std::chrono::seconds(10);
constexpr char kClusterId[] = "abcdefabcdef";
constexpr char kController[] = "i-00000000000000001";
constexpr char kWorker[] = "i-00000000000000002";
constexpr char kPendingWorker[] = "i-00000000000000003";

class TrainingApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hpod-training-api-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = std::move(store::OpenSqliteStore({}).value());
    logs_ = std::make_unique<NodeLogs>(NodeLogsOptions{(dir_ / "logs").string()});
    ASSERT_TRUE(store_
                    ->Write([](store::WriteTx& tx) -> Status {
                      store::ClusterRecord c;
                      c.id = kClusterId;
                      c.name = "demo";
                      c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
                      c.status = "InService";
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
                      // "a-workers" sorts before "controller": the controller group
                      // is asked first by its role, not its name.
                      store::GroupRecord g;
                      g.cluster_id = c.id;
                      g.name = "controller";
                      g.spec = {{"InstanceType", "ml.c5.xlarge"},
                                {"SlurmConfig", {{"NodeType", "Controller"}}}};
                      g.target_count = 1;
                      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                      g.name = "a-workers";
                      g.spec = {{"InstanceType", "ml.c5.xlarge"}};
                      g.target_count = 2;
                      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                      for (const auto& [id, group, status] :
                           {std::tuple{kController, "controller", "Running"},
                            std::tuple{kWorker, "a-workers", "Running"},
                            std::tuple{kPendingWorker, "a-workers", "Pending"}}) {
                        store::NodeRecord n;
                        n.instance_id = id;
                        n.cluster_id = c.id;
                        n.group_name = group;
                        n.ordinal = id == std::string(kPendingWorker) ? 1 : 2;
                        n.status = status;
                        n.private_ip = "10.77.0.1";
                        HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                      }
                      return OkStatus();
                    })
                    .ok());
    AgentServiceOptions o;
    agents_ = std::make_unique<AgentService>(*store_, *logs_, clock_, o, "key",
                                             [](const std::string&) {});
    http::ServerOptions so;
    so.unix_path = (dir_ / "agent.sock").string();
    auto refuse = [](const http::Request&) { return http::Response{404, {}, ""}; };
    agent_server_ =
        std::move(http::Server::Start(so, refuse, [this](const http::Request& r, auto ws) {
                    return agents_->HandleAgentUpgrade(r, std::move(ws));
                  }).value());
  }
  void TearDown() override {
    agents_->Shutdown();
    agent_server_->Shutdown(std::chrono::milliseconds(100));
    std::filesystem::remove_all(dir_);
  }

  // An agent: bootstraps and says hello; connected once a command round trip
  // shows hello was handled.
  std::unique_ptr<http::WebSocketClient> Connect(const char* instance) {
    http::WebSocketClientOptions o;
    o.unix_socket_path = (dir_ / "agent.sock").string();
    auto ws = http::WebSocketClient::Connect(
        "ws://localhost/agent/v1/channel",
        {{"X-Hpod-Instance-Id", instance},
         {"Authorization", "HpodBootstrap " + agents_->BootstrapToken(instance)}},
        o);
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    if (!ws.ok()) return nullptr;
    EXPECT_EQ(Next(**ws)["type"], "credential");
    EXPECT_TRUE((*ws)->Send(json{{"type", "hello"}, {"agent_version", "t"}}.dump(), false).ok());
    EXPECT_TRUE(agents_->Liveness(instance).connected);
    return std::move(*ws);
  }
  static json Next(http::WebSocketClient& ws) {
    auto m = ws.Receive(kWait);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? json::parse(m->data) : json();
  }

  // Calls `op` on another thread (the agent's part is played on this one).
  std::future<StatusOr<ordered_json>> CallAsync(TrainingApi& api, const std::string& op,
                                                const json& request) {
    return std::async(std::launch::async, [&api, op, request] { return api.Call(op, request); });
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeLogs> logs_;
  std::unique_ptr<AgentService> agents_;
  std::unique_ptr<http::Server> agent_server_;
};

TEST(TrainingApiModelTest, OperationsAreReadOnlyHpodOperations) {
  for (const char* name : {"HpodListTrainingRuns", "HpodGetTrainingMetrics"}) {
    const api::Operation* op = api::ServiceModel::Get().FindOperation(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_TRUE(op->input->IsRequired("ClusterName"));
    EXPECT_TRUE(NodeApi::Handles(name));
    EXPECT_TRUE(ClusterApi::IsReadOnly(name));
  }
  const api::Operation* get = api::ServiceModel::Get().FindOperation("HpodGetTrainingMetrics");
  EXPECT_TRUE(get->input->IsRequired("Path"));
  const api::Member* points =
      get->output->FindMember("Series")->shape->member->FindMember("Points");
  ASSERT_NE(points, nullptr);
  EXPECT_NE(points->shape->member->FindMember("WallTime"), nullptr);
}

TEST_F(TrainingApiTest, ListAsksTheControllerFirstAndRendersTheRuns) {
  auto worker = Connect(kWorker);
  auto controller = Connect(kController);
  TrainingApi api(*store_, agents_.get());
  auto call = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  json q = Next(*controller);
  ASSERT_EQ(q["type"], "training_query") << q.dump();
  EXPECT_EQ(q["op"], "list_runs");
  proto::TrainingResult r;
  r.id = q["id"];
  r.runs = {{"/fsx/llama/tb", "tensorboard", 1700000000.5, 4096},
            {"/fsx/llama/metrics.jsonl", "jsonl", 1699999999, 980}};
  r.warnings = {"stopped after 20000 entries under /fsx; runs further down were not looked for"};
  ASSERT_TRUE(controller->Send(r.ToJson().dump(), false).ok());
  auto out = call.get();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(
      out->dump(),
      R"({"TrainingRuns":[{"Path":"/fsx/llama/tb","Kind":"tensorboard",)"
      R"("LastModifiedTime":1700000000.5,"SizeBytes":4096},{"Path":"/fsx/llama/metrics.jsonl",)"
      R"("Kind":"jsonl","LastModifiedTime":1699999999.0,"SizeBytes":980}],)"
      R"("NodeId":"i-00000000000000001","Warnings":["stopped after 20000 entries under /fsx; )"
      R"(runs further down were not looked for"]})");
}

TEST_F(TrainingApiTest, MetricsFromAWorkerWhenTheControllerIsAway) {
  auto worker = Connect(kWorker);
  TrainingApi api(*store_, agents_.get());
  auto call = CallAsync(api, "HpodGetTrainingMetrics",
                        {{"ClusterName", "demo"}, {"Path", "/fsx/llama/tb"}, {"MaxPoints", 50}});
  json q = Next(*worker);
  EXPECT_EQ(q["op"], "read_run");
  EXPECT_EQ(q["path"], "/fsx/llama/tb");
  EXPECT_EQ(q["max_points"], 50);
  proto::TrainingResult r;
  r.id = q["id"];
  r.series = {{"train/loss", {{1, 1700000000.25, 6.25}, {2, 1700000001.5, 6.0}}}};
  r.warnings = {"tb.0: bad data checksum in the record at offset 1120"};
  ASSERT_TRUE(worker->Send(r.ToJson().dump(), false).ok());
  auto out = call.get();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->dump(),
            R"({"Series":[{"Tag":"train/loss","Points":[{"Step":1,"WallTime":1700000000.25,)"
            R"("Value":6.25},{"Step":2,"WallTime":1700000001.5,"Value":6.0}]}],)"
            R"("Warnings":["tb.0: bad data checksum in the record at offset 1120"],)"
            R"("NodeId":"i-00000000000000002"})");
}

TEST_F(TrainingApiTest, ErrorsInTheAwsShape) {
  TrainingApi none(*store_, nullptr);
  auto no_agents = none.Call("HpodListTrainingRuns", {{"ClusterName", "demo"}});
  EXPECT_EQ(no_agents.status().code(), StatusCode::kFailedPrecondition);

  TrainingApi api(*store_, agents_.get());
  auto unknown = api.Call("HpodListTrainingRuns", {{"ClusterName", "nope"}});
  EXPECT_EQ(api::ToApiError(unknown.status()).type, "ResourceNotFound");

  // Only the Pending node's agent is connected: no node can answer.
  auto pending = Connect(kPendingWorker);
  auto nobody = api.Call("HpodListTrainingRuns", {{"ClusterName", "demo"}});
  ASSERT_EQ(nobody.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(nobody.status().message(),
            "Cluster demo has no Running node with a connected hpod agent to read /fsx from; "
            "wait until a node is Running (hpod list-cluster-nodes)");
  EXPECT_EQ(api::ToApiError(nobody.status()).type, "ConflictException");

  // The agent refuses the path: a ValidationException with its words.
  auto controller = Connect(kController);
  auto call =
      CallAsync(api, "HpodGetTrainingMetrics", {{"ClusterName", "demo"}, {"Path", "/fsx/../etc"}});
  json q = Next(*controller);
  ASSERT_TRUE(controller
                  ->Send(proto::TrainingResult::Failed(
                             q["id"], InvalidArgumentError("path /fsx/../etc is outside /fsx"))
                             .ToJson()
                             .dump(),
                         false)
                  .ok());
  auto refused = call.get();
  EXPECT_EQ(api::ToApiError(refused.status()).type, "ValidationException");
  EXPECT_EQ(refused.status().message(), "path /fsx/../etc is outside /fsx");

  // Busy: the agent's code stays, named after the node.
  call = CallAsync(api, "HpodGetTrainingMetrics", {{"ClusterName", "demo"}, {"Path", "/fsx/a"}});
  q = Next(*controller);
  ASSERT_TRUE(controller
                  ->Send(proto::TrainingResult::Failed(q["id"], ResourceExhaustedError("busy"))
                             .ToJson()
                             .dump(),
                         false)
                  .ok());
  auto busy = call.get();
  EXPECT_EQ(busy.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(busy.status().message(), "the agent of i-00000000000000001: busy");

  // A disconnect before the answer fails the call at once (not at its timeout).
  call = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  q = Next(*controller);
  controller->Close();
  auto gone = call.get();
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable) << gone.status().ToString();
  EXPECT_EQ(api::ToApiError(gone.status()).type, "ServiceUnavailable");
}

TEST_F(TrainingApiTest, SilenceIsATimeoutAndAStrayAnswerIsIgnored) {
  auto controller = Connect(kController);
  auto worker = Connect(kWorker);
  TrainingApi api(*store_, agents_.get(), TrainingApiOptions{std::chrono::milliseconds(300)});
  auto call = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  json q = Next(*controller);
  // Another node answering the controller's query is not its answer.
  ASSERT_TRUE(
      worker->Send(proto::TrainingResult{q["id"], true, "", "", {}, {}, {}}.ToJson().dump(), false)
          .ok());
  auto late = call.get();
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
  // Within what was left of the query's 300 ms when the node was asked.
  EXPECT_EQ(
      late.status().message().rfind("no answer from the agent of i-00000000000000001 within ", 0),
      0u)
      << late.status().message();
}

TEST_F(TrainingApiTest, OneQueryAtATimeTheOthersAreThrottledAtOnce) {
  EXPECT_EQ(TrainingApiOptions{}.timeout, std::chrono::milliseconds(5000));
  auto controller = Connect(kController);
  TrainingApi api(*store_, agents_.get());
  auto first = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  json q = Next(*controller);  // the first is now waiting for the agent
  const auto start = std::chrono::steady_clock::now();
  auto second = api.Call("HpodGetTrainingMetrics", {{"ClusterName", "demo"}, {"Path", "tb"}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  ASSERT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status().ToString();
  const api::ApiError error = api::ToApiError(second.status());
  EXPECT_EQ(error.type, "ThrottlingException");
  EXPECT_EQ(error.http_status, 400);
  // An unknown cluster is still told as such, not throttled.
  EXPECT_EQ(
      api::ToApiError(api.Call("HpodListTrainingRuns", {{"ClusterName", "nope"}}).status()).type,
      "ResourceNotFound");
  proto::TrainingResult r;
  r.id = q["id"];
  ASSERT_TRUE(controller->Send(r.ToJson().dump(), false).ok());
  ASSERT_TRUE(first.get().ok());
  // The slot is free again.
  auto third = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  q = Next(*controller);
  r.id = q["id"];
  ASSERT_TRUE(controller->Send(r.ToJson().dump(), false).ok());
  EXPECT_TRUE(third.get().ok());
}

TEST_F(TrainingApiTest, ANodeWithoutFsxPassesTheQueryToTheNext) {
  auto controller = Connect(kController);
  auto worker = Connect(kWorker);
  TrainingApi api(*store_, agents_.get());
  auto call = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  json q = Next(*controller);
  auto no_fsx = [](const json& query) {
    return proto::TrainingResult::Failed(query["id"],
                                         FailedPreconditionError("/fsx is not a directory on "
                                                                 "this node"))
        .ToJson()
        .dump();
  };
  ASSERT_TRUE(controller->Send(no_fsx(q), false).ok());
  q = Next(*worker);
  ASSERT_EQ(q["op"], "list_runs");
  proto::TrainingResult r;
  r.id = q["id"];
  r.runs = {{"/fsx/tb", "tensorboard", 1700000000, 1}};
  ASSERT_TRUE(worker->Send(r.ToJson().dump(), false).ok());
  auto out = call.get();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["NodeId"], kWorker);
  // When every node asked says so: a ConflictException naming the last.
  call = CallAsync(api, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  ASSERT_TRUE(controller->Send(no_fsx(Next(*controller)), false).ok());
  ASSERT_TRUE(worker->Send(no_fsx(Next(*worker)), false).ok());
  auto none = call.get();
  ASSERT_EQ(none.status().code(), StatusCode::kFailedPrecondition) << none.status().ToString();
  EXPECT_EQ(api::ToApiError(none.status()).type, "ConflictException");
  EXPECT_EQ(none.status().message(),
            "no node of cluster demo could read /fsx (2 asked): the agent of "
            "i-00000000000000002: /fsx is not a directory on this node");
  // At most max_nodes are asked.
  TrainingApi one(*store_, agents_.get(), TrainingApiOptions{std::chrono::seconds(5), 1});
  call = CallAsync(one, "HpodListTrainingRuns", {{"ClusterName", "demo"}});
  ASSERT_TRUE(controller->Send(no_fsx(Next(*controller)), false).ok());
  EXPECT_NE(call.get().status().message().find("(1 asked)"), std::string::npos);
}

// A connection that is closing: it takes no more frames.
class ClosingSocket : public http::WebSocket {
 public:
  bool Send(std::string, bool) override { return false; }
  void Close(std::string_view) override {}
  const std::string& remote_address() const override { return address_; }

 private:
  std::string address_ = "unix";
};

TEST_F(TrainingApiTest, AQueryThatCannotBeSentIsADisconnectNotATimeout) {
  http::Request upgrade;
  upgrade.method = "GET";
  upgrade.target = "/agent/v1/channel";
  upgrade.headers = {{"X-Hpod-Instance-Id", kController},
                     {"Authorization", "HpodBootstrap " + agents_->BootstrapToken(kController)}};
  auto accepted = agents_->HandleAgentUpgrade(upgrade, std::make_shared<ClosingSocket>());
  ASSERT_TRUE(std::holds_alternative<http::WebSocketCallbacks>(accepted));
  const auto start = std::chrono::steady_clock::now();
  auto result = agents_->QueryTraining(kController, proto::TrainingQuery{"", "list_runs", "", 0},
                                       std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_EQ(result.status().message(),
            "the agent of i-00000000000000001 disconnected before the query could be sent");
}

}  // namespace
}  // namespace hpod::controlplane
