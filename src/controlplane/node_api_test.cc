// NodeApi's HpodListSlurmNodes: without agents, and with a real AgentService fed
// by an agent channel over a Unix socket (as in agent_service_test.cc); and
// HpodInjectFault against a provider that records what it was asked.

#include "hpod/controlplane/node_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "hpod/api/model.h"
#include "hpod/base/clock.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/http/server.h"
#include "hpod/http/websocket.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr auto kWait = std::chrono::seconds(10);
constexpr char kClusterId[] = "abcdefabcdef";
constexpr char kClusterArn[] = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
constexpr char kController[] = "i-00000000000000001";
constexpr char kWorker[] = "i-00000000000000002";

// Records InjectFault calls; answers with `answer`.
class RecordingProvider final : public provider::Provider {
 public:
  Status Launch(const provider::LaunchSpec&) override { return OkStatus(); }
  Status Terminate(const std::string&) override { return OkStatus(); }
  StatusOr<provider::NodeObservation> Describe(const std::string&) override {
    return provider::NodeObservation{};
  }
  StatusOr<std::vector<std::string>> List(const std::string&) override {
    return std::vector<std::string>{};
  }
  Status InjectFault(const std::string& id, const provider::FaultSpec& f) override {
    calls.push_back(id + " " + std::string(provider::FaultKindName(f.kind)) + " " +
                    std::to_string(f.seconds) + " " + std::to_string(f.xid));
    return answer;
  }
  std::vector<std::string> calls;
  Status answer;
};

class NodeApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hpod-node-api-" + std::to_string(getpid()) + "-" +
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
                      c.arn = kClusterArn;
                      c.status = "InService";
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
                      store::GroupRecord g;
                      g.cluster_id = c.id;
                      g.name = "controller";
                      // Only the controller group's agent may report Slurm's table.
                      g.spec = {{"InstanceType", "ml.c5.xlarge"},
                                {"SlurmConfig", {{"NodeType", "Controller"}}}};
                      g.target_count = 1;
                      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                      store::NodeRecord n;
                      n.instance_id = kController;
                      n.cluster_id = c.id;
                      n.group_name = "controller";
                      n.ordinal = 1;
                      n.status = "Running";
                      n.private_ip = "10.77.0.10";
                      HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                      g.name = "workers";
                      g.spec = {{"InstanceType", "ml.c5.xlarge"}};
                      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                      n.instance_id = kWorker;
                      n.group_name = "workers";
                      n.private_ip = "10.77.0.11";
                      return tx.PutNode(n);
                    })
                    .ok());
  }
  void TearDown() override {
    if (agents_ != nullptr) agents_->Shutdown();
    if (agent_server_ != nullptr) agent_server_->Shutdown(std::chrono::milliseconds(100));
    std::filesystem::remove_all(dir_);
  }

  // Starts an AgentService behind a Unix-socket agent listener.
  void StartAgents() {
    agents_ = std::make_unique<AgentService>(*store_, *logs_, clock_, AgentServiceOptions{}, "key",
                                             [this](const std::string&) {
                                               std::lock_guard<std::mutex> l(mu_);
                                               changed_.notify_all();
                                             });
    http::ServerOptions so;
    so.unix_path = (dir_ / "agent.sock").string();
    auto refuse = [](const http::Request&) { return http::Response{404, {}, ""}; };
    agent_server_ =
        std::move(http::Server::Start(so, refuse, [this](const http::Request& r, auto ws) {
                    return agents_->HandleAgentUpgrade(r, std::move(ws));
                  }).value());
  }

  // The controller's agent: bootstraps and says hello.
  std::unique_ptr<http::WebSocketClient> ConnectController(const char* instance = kController) {
    http::WebSocketClientOptions o;
    o.unix_socket_path = (dir_ / "agent.sock").string();
    auto ws = http::WebSocketClient::Connect(
        "ws://localhost/agent/v1/channel",
        {{"X-Hpod-Instance-Id", instance},
         {"Authorization", "HpodBootstrap " + agents_->BootstrapToken(instance)}},
        o);
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    if (!ws.ok()) return nullptr;
    auto cred = (*ws)->Receive(kWait);
    EXPECT_TRUE(cred.ok() && json::parse(cred->data)["type"] == "credential");
    EXPECT_TRUE((*ws)->Send(json{{"type", "hello"}, {"agent_version", "t"}}.dump(), false).ok());
    return std::move(*ws);
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

  // Waits (on AgentService's change callback, never by sleeping) until the
  // cluster has a Slurm report.
  bool WaitForReport() {
    std::unique_lock<std::mutex> l(mu_);
    return changed_.wait_for(l, kWait, [&] { return agents_->SlurmNodes(kClusterId).has_value(); });
  }

  StatusOr<ordered_json> Inject(NodeApi& api, const json& request) {
    const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodInjectFault");
    if (op == nullptr) return InternalError("no HpodInjectFault in the model");
    return api.Call(*op, request, Caller{.admin = true});
  }
  void MarkLaunched(const char* instance) {
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(store::NodeRecord n, tx.GetNode(kClusterId, instance));
                      n.launched = true;
                      return tx.PutNode(n);
                    })
                    .ok());
  }
  std::vector<store::EventRecord> NodeEvents(const char* instance) {
    store::EventQuery q;
    q.cluster_id = kClusterId;
    q.instance_id = instance;
    std::vector<store::EventRecord> events;
    Status s = store_->Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(events, tx.QueryEvents(q));
      return OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return events;
  }

  StatusOr<ordered_json> List(NodeApi& api, const std::string& cluster) {
    const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodListSlurmNodes");
    if (op == nullptr) return InternalError("no HpodListSlurmNodes in the model");
    return api.Call(*op, json{{"ClusterName", cluster}}, Caller{.admin = true});
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeLogs> logs_;
  std::unique_ptr<AgentService> agents_;
  std::unique_ptr<http::Server> agent_server_;
  std::mutex mu_;
  std::condition_variable changed_;
};

TEST(NodeApiModelTest, ListSlurmNodesIsAReadOnlyHpodOperation) {
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodListSlurmNodes");
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE(op->input->IsRequired("ClusterName"));
  const api::Member* nodes = op->output->FindMember("SlurmNodes");
  ASSERT_NE(nodes, nullptr);
  ASSERT_EQ(nodes->shape->type, api::ShapeType::kList);
  EXPECT_NE(nodes->shape->member->FindMember("SlurmdStartTime"), nullptr);
  ASSERT_NE(op->output->FindMember("Available"), nullptr);
  EXPECT_EQ(op->output->FindMember("Available")->shape->type, api::ShapeType::kBoolean);
  EXPECT_NE(op->output->FindMember("ReportedBy"), nullptr);
  EXPECT_TRUE(NodeApi::Handles("HpodListSlurmNodes"));
  EXPECT_TRUE(ClusterApi::IsReadOnly("HpodListSlurmNodes"));
}

TEST_F(NodeApiTest, WithoutAgentsSlurmIsUnavailable) {
  NodeApi api(*store_, clock_, nullptr, *logs_, nullptr);
  for (const std::string name : {"demo", kClusterArn}) {
    auto out = List(api, name);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, ordered_json({{"SlurmNodes", ordered_json::array()}, {"Available", false}}));
  }
}

TEST_F(NodeApiTest, UnknownClusterIsResourceNotFound) {
  NodeApi api(*store_, clock_, nullptr, *logs_, nullptr);
  auto out = List(api, "nope");
  // The API's ResourceNotFound is derived from the code (api/errors.cc).
  EXPECT_EQ(out.status().code(), StatusCode::kNotFound);
}

TEST_F(NodeApiTest, ServesTheControllerAgentsReport) {
  StartAgents();
  NodeApi api(*store_, clock_, agents_.get(), *logs_, nullptr);
  // Connected agents but no report yet: still unavailable.
  auto before = List(api, "demo");
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ((*before)["Available"], false);

  auto ws = ConnectController();
  ASSERT_NE(ws, nullptr);
  json report = {{"type", "slurm_nodes"},
                 {"nodes",
                  {{{"name", "ip-10-77-0-11"},
                    {"state", "IDLE"},
                    {"reason", ""},
                    {"slurmd_start_time", "2025-01-02T03:04:05"}},
                   {{"name", "ip-10-77-0-12"},
                    {"state", "DOWN+DRAIN+NOT_RESPONDING"},
                    {"reason", "Not responding"},
                    {"slurmd_start_time", "None"}}}}};
  ASSERT_TRUE(ws->Send(report.dump(), false).ok());
  ASSERT_TRUE(WaitForReport());

  auto out = List(api, kClusterArn);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["Available"], true);
  EXPECT_EQ((*out)["ReportedBy"], kController);
  ASSERT_EQ((*out)["SlurmNodes"].size(), 2u);
  EXPECT_EQ((*out)["SlurmNodes"][0], ordered_json({{"NodeName", "ip-10-77-0-11"},
                                                   {"State", "IDLE"},
                                                   {"Reason", ""},
                                                   {"SlurmdStartTime", "2025-01-02T03:04:05"}}));
  EXPECT_EQ((*out)["SlurmNodes"][1]["State"], "DOWN+DRAIN+NOT_RESPONDING");
  EXPECT_EQ((*out)["SlurmNodes"][1]["Reason"], "Not responding");
  ws->Close();
}

TEST_F(NodeApiTest, OnlyTheControllersAgentMayReportSlurmsTable) {
  StartAgents();
  auto ws = ConnectController(kWorker);
  ASSERT_NE(ws, nullptr);
  json forged = {{"type", "slurm_nodes"}, {"nodes", json::array()}};
  ASSERT_TRUE(ws->Send(forged.dump(), false).ok());
  // Frames of one channel are handled in order: once get_config is answered, the
  // forged table has been handled too.
  ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
  auto reply = ws->Receive(kWait);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_FALSE(agents_->SlurmNodes(kClusterId).has_value());
  ws->Close();
}

TEST(NodeApiModelTest, ClusterNodeDetailsHasHpodsClockOffset) {
  const api::Shape* details = api::ServiceModel::Get().FindShape("ClusterNodeDetails");
  ASSERT_NE(details, nullptr);
  const api::Member* offset = details->FindMember("HpodClockOffsetSeconds");
  ASSERT_NE(offset, nullptr);
  EXPECT_EQ(offset->shape->type, api::ShapeType::kDouble);
  EXPECT_NE(details->FindMember("LaunchTime"), nullptr);  // AWS's members are all still there
}

// DescribeClusterNode as the API server answers it (ClusterApi, then NodeApi's
// facts from the agents): the node's clock offset, from the `time` of its
// agent's heartbeats, only while it is known.
TEST_F(NodeApiTest, DescribeClusterNodeShowsTheNodesClockOffset) {
  StartAgents();
  NodeApi nodes(*store_, clock_, agents_.get(), *logs_, nullptr);
  ControlPlaneOptions options;
  ClusterApi cluster(*store_, clock_, options, PageTokenCodec("secret"), [](const std::string&) {});
  const api::Operation* op = api::ServiceModel::Get().FindOperation("DescribeClusterNode");
  ASSERT_NE(op, nullptr);
  auto describe = [&]() -> ordered_json {
    auto out = cluster.Call(*op, json{{"ClusterName", "demo"}, {"NodeId", kWorker}});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return ordered_json();
    nodes.AddNodeFacts("DescribeClusterNode", *out);
    return (*out)["NodeDetails"];
  };
  EXPECT_FALSE(describe().contains("HpodClockOffsetSeconds")) << "no agent connected";

  auto ws = ConnectController(kWorker);
  ASSERT_NE(ws, nullptr);
  auto beat = [&](int seq, std::optional<double> node_time) {
    json b = {{"type", "heartbeat"}, {"seq", seq}};
    if (node_time) b["time"] = *node_time;
    ASSERT_TRUE(ws->Send(b.dump(), false).ok());
    // Frames are handled in order: once get_config is answered the beat counted.
    ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
    auto answer = ws->Receive(kWait);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  };
  beat(1, std::nullopt);  // an agent older than heartbeat.time
  EXPECT_FALSE(agents_->ClockOffset(kWorker).has_value());
  EXPECT_FALSE(describe().contains("HpodClockOffsetSeconds"));

  // The node's clock runs 90 s behind hpodd's.
  const double now = clock_.NowEpochSeconds();
  beat(2, now - 90);
  ASSERT_TRUE(agents_->ClockOffset(kWorker).has_value());
  EXPECT_DOUBLE_EQ(*agents_->ClockOffset(kWorker), -90);
  ordered_json details = describe();
  EXPECT_EQ(details["InstanceId"], kWorker);
  EXPECT_DOUBLE_EQ(details["HpodClockOffsetSeconds"].get<double>(), -90);
  EXPECT_EQ(details.back(), details["HpodClockOffsetSeconds"]) << "in model order: last";
  // A beat that took 2 s to arrive reads 2 s lower; the least delayed one stands.
  clock_.AdvanceTime(std::chrono::seconds(2));
  beat(3, now - 90);
  EXPECT_DOUBLE_EQ(*agents_->ClockOffset(kWorker), -90);
  // The node's clock stepped to 90 s ahead: shown once the older samples aged out.
  for (int seq = 4; seq < 4 + static_cast<int>(AgentService::kClockSamples); ++seq) {
    beat(seq, clock_.NowEpochSeconds() + 90.25);
  }
  EXPECT_DOUBLE_EQ(*agents_->ClockOffset(kWorker), 90.25);
  EXPECT_DOUBLE_EQ(describe()["HpodClockOffsetSeconds"].get<double>(), 90.25);
  // Not known once the agent is gone.
  ws->Close();
  ASSERT_TRUE(WaitFor([&] { return !agents_->Liveness(kWorker).connected; }));
  EXPECT_FALSE(describe().contains("HpodClockOffsetSeconds"));
}

TEST(NodeApiModelTest, InjectFaultIsAnAdminOperation) {
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodInjectFault");
  ASSERT_NE(op, nullptr);
  for (const char* m : {"ClusterName", "NodeId", "Kind"}) EXPECT_TRUE(op->input->IsRequired(m));
  EXPECT_TRUE(NodeApi::Handles("HpodInjectFault"));
  // A user (read-only) key is refused by ApiServer for every op outside this set.
  EXPECT_FALSE(ClusterApi::IsReadOnly("HpodInjectFault"));
}

TEST_F(NodeApiTest, InjectFaultAsksTheProviderAndRecordsAWarnEvent) {
  MarkLaunched(kWorker);
  RecordingProvider provider;
  NodeApi api(*store_, clock_, nullptr, *logs_, &provider);
  auto out = Inject(
      api, {{"ClusterName", "demo"}, {"NodeId", kWorker}, {"Kind", "partition"}, {"Seconds", 20}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(provider.calls, std::vector<std::string>{std::string(kWorker) + " partition 20 0"});
  EXPECT_EQ(*out, ordered_json({{"NodeId", kWorker},
                                {"Kind", "partition"},
                                {"InjectedTime", clock_.NowEpochSeconds()}}));
  auto gpu = Inject(
      api,
      {{"ClusterName", kClusterArn}, {"NodeId", kWorker}, {"Kind", "gpu-xid"}, {"XidCode", 79}});
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ(provider.calls.back(), std::string(kWorker) + " gpu-xid 0 79");
  auto events = NodeEvents(kWorker);
  ASSERT_EQ(events.size(), 2u);
  std::vector<std::string> descriptions;
  for (const auto& e : events) {
    EXPECT_EQ(e.level, "Warn");
    EXPECT_EQ(e.resource_type, "Instance");
    EXPECT_EQ(e.group_name, "workers");
    descriptions.push_back(e.description);
  }
  std::sort(descriptions.begin(), descriptions.end());
  EXPECT_EQ(descriptions,
            (std::vector<std::string>{"Fault injected by hpod inject-fault: gpu-xid (Xid 79)",
                                      "Fault injected by hpod inject-fault: partition for 20 s"}));
}

TEST_F(NodeApiTest, InjectFaultSaysWhatToFix) {
  RecordingProvider provider;
  NodeApi api(*store_, clock_, nullptr, *logs_, &provider);
  auto partition =
      Inject(api, {{"ClusterName", "demo"}, {"NodeId", kWorker}, {"Kind", "partition"}});
  EXPECT_EQ(partition.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(partition.status().message(),
            "Kind partition needs Seconds: how long the node's link stays down (--seconds 1-3600)");
  auto xid = Inject(api, {{"ClusterName", "demo"}, {"NodeId", kWorker}, {"Kind", "gpu-xid"}});
  EXPECT_EQ(xid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(xid.status().message(),
            "Kind gpu-xid needs XidCode: the Xid to report, e.g. 79 (--xid-code 1-1000)");
  auto cluster = Inject(api, {{"ClusterName", "nope"}, {"NodeId", kWorker}, {"Kind", "hang"}});
  EXPECT_EQ(cluster.status().code(), StatusCode::kNotFound);
  auto node =
      Inject(api, {{"ClusterName", "demo"}, {"NodeId", "i-0000000000000000f"}, {"Kind", "hang"}});
  EXPECT_EQ(node.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(node.status().aws_type(), "ResourceNotFound");
  EXPECT_EQ(node.status().message(),
            "Node i-0000000000000000f not found in cluster demo (see list-cluster-nodes)");
  auto unlaunched = Inject(api, {{"ClusterName", "demo"}, {"NodeId", kWorker}, {"Kind", "hang"}});
  EXPECT_EQ(unlaunched.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unlaunched.status().message(),
            std::string("Node ") + kWorker +
                " of cluster demo has not been launched yet; wait until it is Pending or Running");
  EXPECT_TRUE(provider.calls.empty());
  EXPECT_TRUE(NodeEvents(kWorker).empty());
}

TEST_F(NodeApiTest, InjectFaultWithoutProviderOrRefusedByItRecordsNothing) {
  MarkLaunched(kWorker);
  const json request = {{"ClusterName", "demo"}, {"NodeId", kWorker}, {"Kind", "disk-full"}};
  NodeApi none(*store_, clock_, nullptr, *logs_, nullptr);
  auto out = Inject(none, request);
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(), "hpodd runs no node provider, so it cannot inject faults");
  RecordingProvider provider;
  provider.answer = FailedPreconditionError("node has no sized disk");
  NodeApi api(*store_, clock_, nullptr, *logs_, &provider);
  out = Inject(api, request);
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(), "node has no sized disk");
  EXPECT_TRUE(NodeEvents(kWorker).empty());
}

}  // namespace
}  // namespace hpod::controlplane
