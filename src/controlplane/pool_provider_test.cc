// The pool provider (pool_provider.h) over a real SQLite store, with the host
// channels replaced by a record of what was sent and a set of connected hosts.

#include "hpod/controlplane/pool_provider.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "hpod/base/clock.h"
#include "hpod/controlplane/host_states.h"

namespace hpod::controlplane {
namespace {

using api::HostState;
using provider::NodeState;
using ::testing::HasSubstr;

class PoolProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore({});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    pool_ = std::make_unique<PoolProvider>(*store_, clock_,
                                           PoolProviderOptions{"https://10.0.0.1:8451", ""});
    pool_->SetHostLink({[this](const std::string& h) { return connected_.count(h) > 0; },
                        [this](const std::string& h, const nlohmann::json& frame) {
                          if (!connected_.count(h)) return false;
                          sent_.push_back({h, frame.value("instance_id", "?")});
                          return true;
                        }});
  }

  // A Spare host of `pool`, connected, that connected from `ip` as `name`.
  void Spare(const std::string& id, const std::string& pool, const std::string& ip,
             const std::string& name) {
    store::HostRecord h;
    h.host_id = id;
    h.machine_id = std::string(32, 'a');
    h.pool = pool;
    h.token_id = "tok";
    h.instance_type = "ml.c5.large";
    h.facts = {{"channel_address", ip}, {"hostname", name}};
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) {
                      return RecordHostJoin(tx, clock_, h, HostState::kSpare, "test");
                    })
                    .ok());
    connected_.insert(id);
  }

  store::HostRecord Get(const std::string& id) {
    store::HostRecord h;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(h, tx.GetHost(id));
                      return OkStatus();
                    })
                    .ok());
    return h;
  }

  std::vector<std::string> HistoryOf(const std::string& id) {
    std::vector<std::string> to;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto h, tx.ListHostHistory(id));
                      for (const auto& r : h) to.push_back(r.to_state);
                      return OkStatus();
                    })
                    .ok());
    return to;
  }

  static provider::LaunchSpec Spec(const std::string& id, const std::string& pool = "") {
    provider::LaunchSpec s;
    s.instance_id = id;
    s.cluster_id = "abcdefabcdef";
    s.cluster_name = "demo";
    s.group_name = "workers";
    s.instance_name = "workers-1";
    s.instance_type = "ml.c5.large";
    if (!pool.empty()) s.group_spec["HpodPool"] = pool;
    return s;
  }

  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<PoolProvider> pool_;
  std::set<std::string> connected_;
  std::vector<std::pair<std::string, std::string>> sent_;  // host, assigned instance
};

TEST_F(PoolProviderTest, DeclaresNetworkAgentsThatGetFileSourcesSent) {
  provider::NodeEnvironment env = pool_->Environment();
  EXPECT_TRUE(env.Validate().ok());
  EXPECT_EQ(env.agent_url, "https://10.0.0.1:8451");
  EXPECT_FALSE(env.sees_hpodd_files);
  EXPECT_TRUE(env.ships_file_sources);
  EXPECT_TRUE(pool_->RunsAgents());
  EXPECT_TRUE(pool_->CapacityArrives());
}

TEST_F(PoolProviderTest, ALaunchTakesASpareOfItsPoolAndTellsTheHostOnce) {
  Spare("h-0000000000000001", "default", "10.9.0.11", "rack1-a");
  Spare("h-0000000000000002", "rack2", "10.9.0.12", "rack2-a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001", "rack2")).ok());
  store::HostRecord h = Get("h-0000000000000002");
  EXPECT_EQ(h.state, "Assigned");
  EXPECT_EQ(h.instance_id, "i-00000000000000001");
  EXPECT_EQ(h.group_name, "workers");
  EXPECT_EQ(Get("h-0000000000000001").state, "Spare");
  // Again (a reconciler repeating itself): the same host, nothing more reserved.
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001", "rack2")).ok());
  EXPECT_EQ(Get("h-0000000000000001").state, "Spare");
  EXPECT_EQ(sent_.front(), std::make_pair(std::string("h-0000000000000002"),
                                          std::string("i-00000000000000001")));

  auto d = pool_->Describe("i-00000000000000001");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->state, NodeState::kRunning);
  EXPECT_EQ(d->private_ip, "10.9.0.12");
  EXPECT_EQ(d->hostname, "rack2-a");
  auto listed = pool_->List("abcdefabcdef");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, std::vector<std::string>{"i-00000000000000001"});
  EXPECT_EQ(pool_->Describe("i-99999999999999999").status().code(), StatusCode::kNotFound);
}

TEST_F(PoolProviderTest, NoSpareIsResourceExhaustedAndADisconnectedHostIsNoSpare) {
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  connected_.clear();
  Status s = pool_->Launch(Spec("i-00000000000000001"));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "no Spare host of type ml.c5.large in pool default");
  EXPECT_EQ(Get("h-0000000000000001").state, "Spare");
  connected_.insert("h-0000000000000001");
  EXPECT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
}

TEST_F(PoolProviderTest, TerminateWipesTheHostWhichIsThenSpareAgain) {
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", ""});
  ASSERT_TRUE(pool_->Terminate("i-00000000000000001").ok());
  EXPECT_EQ(sent_.back().second, "");  // serve nothing
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kTerminating);
  // The host says its tenure is gone: Spare, through Draining, each with its row.
  pool_->OnHostStatus("h-0000000000000001", {"", ""});
  store::HostRecord h = Get("h-0000000000000001");
  EXPECT_EQ(h.state, "Spare");
  EXPECT_EQ(h.instance_id, "");
  EXPECT_THAT(HistoryOf(h.host_id), ::testing::ElementsAre("Spare", "Assigned", "Draining",
                                                           "Spare"));
  EXPECT_EQ(pool_->Describe("i-00000000000000001").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(pool_->Terminate("i-00000000000000001").ok());  // gone: a no-op
}

TEST_F(PoolProviderTest, AnUnreachableHostIsTerminatedNowAndWipedWhenItReturns) {
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  connected_.clear();
  ASSERT_TRUE(pool_->Terminate("i-00000000000000001").ok());
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kTerminated);
  // The node's row goes (the roll-up ends the tenure): the host drains.
  store::HostRecord h = Get("h-0000000000000001");
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) {
                    return EndHostTenure(tx, clock_, "i-00000000000000001", "terminated");
                  })
                  .ok());
  EXPECT_EQ(Get(h.host_id).state, "Draining");
  // It comes back still holding the tenure: told to serve nothing, then Spare.
  connected_.insert(h.host_id);
  sent_.clear();
  pool_->OnHostStatus(h.host_id, {"i-00000000000000001", ""});
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "");
  EXPECT_EQ(Get(h.host_id).state, "Draining");
  pool_->OnHostStatus(h.host_id, {"", ""});
  EXPECT_EQ(Get(h.host_id).state, "Spare");
}

TEST_F(PoolProviderTest, AHostThatServesTheWrongInstanceIsToldWhatToServe) {
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  sent_.clear();
  pool_->OnHostStatus("h-0000000000000001", {"", ""});  // restarted before it started
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "i-00000000000000001");
  EXPECT_EQ(Get("h-0000000000000001").state, "Assigned");  // not taken for a wipe
  sent_.clear();
  // Its tenure is on disk but its node agent does not run (an agent restart):
  // told again, which starts it; once it runs, nothing more is said.
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", false});
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "i-00000000000000001");
  sent_.clear();
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", true});
  EXPECT_TRUE(sent_.empty());
  // A tenure that failed to start is not asked for again in a loop.
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "disk full", false});
  EXPECT_TRUE(sent_.empty());
}

TEST_F(PoolProviderTest, ARebootWaitsForANewBootIdAndFailsTheNodePastItsDeadline) {
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  auto boot = [&](const std::string& id) {
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(store::HostRecord h, tx.GetHost("h-0000000000000001"));
                      h.facts["boot_id"] = id;
                      return tx.PutHost(h);
                    })
                    .ok());
  };
  boot("boot-1");
  ASSERT_TRUE(pool_->Reboot("i-00000000000000001", "rcv-1").ok());
  EXPECT_EQ(Get("h-0000000000000001").state, "Rebooting");
  EXPECT_EQ(Get("h-0000000000000001").instance_id, "i-00000000000000001");
  ASSERT_TRUE(pool_->Reboot("i-00000000000000001", "rcv-1").ok());  // a repeat: nothing more
  EXPECT_EQ(HistoryOf("h-0000000000000001").size(), 3u);
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kPending);
  // Its agent reconnects before the machine went down: still rebooting.
  sent_.clear();
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", true});
  EXPECT_EQ(Get("h-0000000000000001").state, "Rebooting");
  EXPECT_TRUE(sent_.empty());
  // Back with a new boot: Assigned again, and told to start its node.
  boot("boot-2");
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", false});
  EXPECT_EQ(Get("h-0000000000000001").state, "Assigned");
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "i-00000000000000001");
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kRunning);

  // Another reboot that never comes back: the node fails after the deadline.
  ASSERT_TRUE(pool_->Reboot("i-00000000000000001", "rcv-2").ok());
  clock_.AdvanceTime(std::chrono::seconds(301));
  auto d = pool_->Describe("i-00000000000000001");
  EXPECT_EQ(d->state, NodeState::kFailed);
  EXPECT_THAT(d->message, HasSubstr("did not come back from reboot rcv-2 within 300 s"));
  EXPECT_EQ(pool_->Reboot("i-99999999999999999", "x").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hpod::controlplane
