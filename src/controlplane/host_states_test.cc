// The host state machine (host_states.h), the choice of a spare (host_pool.h)
// and the host operations that move a host by hand (host_api.h: HpodListHosts' filters, HpodDescribeHost,
// HpodReleaseHost, HpodRetireHost), over a real SQLite store.

#include "hpod/controlplane/host_states.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpod/auth/pki.h"
#include "hpod/controlplane/host_api.h"
#include "hpod/controlplane/host_pool.h"
#include "hpod/controlplane/join_service.h"

namespace hpod::controlplane {
namespace {

using api::HostState;
using ::testing::HasSubstr;

constexpr double kDay = 24 * 3600;

class HostStatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore({});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  // A host in `state`, written straight to the store with its first history row.
  store::HostRecord Put(const std::string& id, HostState state,
                        const std::string& instance_id = "", const std::string& token = "tok") {
    store::HostRecord h;
    h.host_id = id;
    h.machine_id = std::string(32, 'a');
    h.pool = "default";
    h.token_id = token;
    h.instance_type = "ml.c5.large";
    h.instance_id = instance_id;
    if (!instance_id.empty()) {
      h.cluster_id = "abcdefabcdef";
      h.group_name = "workers";
    }
    EXPECT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) {
                      return RecordHostJoin(tx, clock_, h, state, "made by the test");
                    })
                    .ok());
    return h;
  }

  Status Change(store::HostRecord& h, HostState to, const std::string& why = "because",
                const HostPlacement& where = {}) {
    return store_->Write(
        [&](store::WriteTx& tx) { return ChangeHostState(tx, clock_, h, to, why, where); });
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

  std::vector<store::HostHistoryRecord> History(const std::string& id) {
    std::vector<store::HostHistoryRecord> out;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(out, tx.ListHostHistory(id));
                      return OkStatus();
                    })
                    .ok());
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(HostStatesTest, TheMachineMakesOnlyItsChanges) {
  EXPECT_TRUE(HostTransitionAllowed(HostState::kJoining, HostState::kSpare));
  EXPECT_TRUE(HostTransitionAllowed(HostState::kSpare, HostState::kAssigned));
  EXPECT_TRUE(HostTransitionAllowed(HostState::kAssigned, HostState::kDraining));
  EXPECT_TRUE(HostTransitionAllowed(HostState::kDraining, HostState::kSpare));
  EXPECT_TRUE(HostTransitionAllowed(HostState::kQuarantined, HostState::kSpare));
  EXPECT_TRUE(HostTransitionAllowed(HostState::kRetired, HostState::kSpare));
  EXPECT_TRUE(HostTransitionAllowed(HostState::kAssigned, HostState::kRetired));
  // A host never serves without having been a spare, nor goes back to joining
  // except by joining.
  EXPECT_FALSE(HostTransitionAllowed(HostState::kQuarantined, HostState::kAssigned));
  EXPECT_FALSE(HostTransitionAllowed(HostState::kRetired, HostState::kAssigned));
  EXPECT_FALSE(HostTransitionAllowed(HostState::kJoining, HostState::kQuarantined));
  EXPECT_FALSE(HostTransitionAllowed(HostState::kDraining, HostState::kAssigned));

  store::HostRecord h = Put("h-1", HostState::kQuarantined);
  Status s = Change(h, HostState::kAssigned);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "host h-1 is Quarantined, and a host that is Quarantined cannot become "
                         "Assigned");
  EXPECT_EQ(Get("h-1").state, "Quarantined");
  EXPECT_EQ(History("h-1").size(), 1u);  // the refused change wrote nothing
}

TEST_F(HostStatesTest, EachChangeIsWrittenWithItsHistoryAndPlacement) {
  store::HostRecord h = Put("h-1", HostState::kSpare);
  clock_.AdvanceTime(std::chrono::seconds(10));
  ASSERT_TRUE(Change(h, HostState::kAssigned, "serves i-1",
                     {"abcdefabcdef", "workers", "i-0000000000000000a"})
                  .ok());
  ASSERT_TRUE(Change(h, HostState::kAssigned, "again").ok());  // the same state: nothing
  store::HostRecord got = Get("h-1");
  EXPECT_EQ(got.state, "Assigned");
  EXPECT_EQ(got.instance_id, "i-0000000000000000a");
  EXPECT_EQ(got.group_name, "workers");
  EXPECT_EQ(got.state_reason, "serves i-1");
  EXPECT_EQ(got.state_changed, clock_.NowEpochSeconds());
  clock_.AdvanceTime(std::chrono::seconds(10));
  ASSERT_TRUE(Change(h, HostState::kDraining, "its cluster was deleted").ok());
  got = Get("h-1");
  EXPECT_EQ(got.instance_id, "");  // leaving Assigned ends the placement
  EXPECT_EQ(got.cluster_id, "");
  auto history = History("h-1");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[1].from_state, "Spare");
  EXPECT_EQ(history[1].instance_id, "i-0000000000000000a");
  EXPECT_EQ(history[2].from_state, "Assigned");
  EXPECT_EQ(history[2].to_state, "Draining");
  // The row of a change that ends a tenure names that tenure.
  EXPECT_EQ(history[2].instance_id, "i-0000000000000000a");
  EXPECT_EQ(history[2].reason, "its cluster was deleted");
}

TEST_F(HostStatesTest, TheThirdFailureIn30DaysRetiresTheHost) {
  store::HostRecord h = Put("h-1", HostState::kSpare);
  auto fail = [&](const std::string& why) {
    return store_->Write(
        [&](store::WriteTx& tx) { return QuarantineHost(tx, clock_, h, why); });
  };
  ASSERT_TRUE(fail("kill-node").ok());
  EXPECT_EQ(Get("h-1").state, "Quarantined");
  ASSERT_TRUE(Change(h, HostState::kSpare, "released").ok());
  // A failure older than 30 days no longer counts.
  clock_.AdvanceTime(std::chrono::seconds(static_cast<int64_t>(31 * kDay)));
  ASSERT_TRUE(fail("disk:/fsx").ok());
  ASSERT_TRUE(Change(h, HostState::kSpare, "released").ok());
  clock_.AdvanceTime(std::chrono::seconds(static_cast<int64_t>(kDay)));
  ASSERT_TRUE(fail("heartbeat").ok());
  EXPECT_EQ(Get("h-1").state, "Quarantined");
  EXPECT_EQ(FailuresSince(History("h-1"), clock_.NowEpochSeconds() - kHostFailureWindowSeconds),
            2);
  ASSERT_TRUE(Change(h, HostState::kSpare, "released").ok());
  ASSERT_TRUE(fail("gpu").ok());
  store::HostRecord got = Get("h-1");
  EXPECT_EQ(got.state, "Retired");
  EXPECT_EQ(got.state_reason,
            "failed 3 times in 30 days; release it (hpod release-host) once repaired");
  auto history = History("h-1");
  EXPECT_EQ(history.back().from_state, "Quarantined");
  EXPECT_EQ(history[history.size() - 2].reason, "gpu");
}

TEST_F(HostStatesTest, TheEndOfAnInstanceRetiresItsOneLaunchHostAndDrainsAPoolHost) {
  store::JoinTokenRecord launch;
  launch.id = "launch01";
  launch.instance_id = "i-0000000000000000a";
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutJoinToken(launch); }).ok());
  store::HostRecord local_host =
      Put("h-local", HostState::kAssigned, "i-0000000000000000a", "launch01");
  local_host.instance_type.clear();  // a launch's host declares none
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutHost(local_host));
                    return tx.PutCertificate({"0abc", "h-local", 1e12, 1, 0});
                  })
                  .ok());
  Put("h-pool", HostState::kAssigned, "i-0000000000000000b", "pool0001");
  Put("h-rebooting", HostState::kRebooting, "i-0000000000000000f", "pool0001");
  Put("h-spare", HostState::kSpare);
  auto end = [&](const std::string& instance) {
    return store_->Write([&](store::WriteTx& tx) {
      return EndHostTenure(tx, clock_, instance, "instance " + instance + " was terminated");
    });
  };
  ASSERT_TRUE(end("i-0000000000000000a").ok());
  ASSERT_TRUE(end("i-0000000000000000b").ok());
  ASSERT_TRUE(end("i-0000000000000000c").ok());  // no host served it
  ASSERT_TRUE(end("").ok());
  store::HostRecord local = Get("h-local");
  EXPECT_EQ(local.state, "Retired");
  EXPECT_EQ(local.state_reason,
            "instance i-0000000000000000a was terminated; it joined for that instance only");
  EXPECT_EQ(local.instance_id, "");
  // Its key was on the instance's disk: its certificate is revoked with it.
  ASSERT_TRUE(store_
                  ->Read([](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(store::CertificateRecord c, tx.GetCertificate("0abc"));
                    EXPECT_GT(c.revoked, 0);
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(Get("h-pool").state, "Draining");
  // A node replaced while its host rebooted: the host leaves it all the same.
  ASSERT_TRUE(end("i-0000000000000000f").ok());
  EXPECT_EQ(Get("h-rebooting").state, "Draining");
  EXPECT_EQ(Get("h-spare").state, "Spare");
  ASSERT_TRUE(end("i-0000000000000000a").ok());  // again: nothing serves it now
  EXPECT_EQ(History("h-local").size(), 2u);
}

TEST_F(HostStatesTest, ASpareIsChosenByFailuresThenIdleTimeAndReservedOnce) {
  auto reserve = [&](const std::string& instance, const std::string& type = "ml.c5.large",
                     const std::function<bool(const store::HostRecord&)>& usable = nullptr) {
    StatusOr<store::HostRecord> got = InternalError("not run");
    Status s = store_->Write([&](store::WriteTx& tx) -> Status {
      SpareRequest r;
      r.instance_type = type;
      r.placement = {"abcdefabcdef", "workers", instance};
      r.reason = "serves " + instance;
      got = ReserveSpare(tx, clock_, r, usable);
      return got.status();
    });
    return got;
  };
  store::HostRecord flaky = Put("h-a-flaky", HostState::kSpare);  // lowest id, but failed
  clock_.AdvanceTime(std::chrono::seconds(10));
  Put("h-b-newer", HostState::kSpare);
  clock_.AdvanceTime(std::chrono::seconds(10));
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(QuarantineHost(tx, clock_, flaky, "kill-node"));
                    return ChangeHostState(tx, clock_, flaky, HostState::kSpare, "released");
                  })
                  .ok());
  clock_.AdvanceTime(std::chrono::seconds(10));
  Put("h-c-newest", HostState::kSpare);
  store::HostRecord other_type = Put("h-d-gpu", HostState::kSpare);
  other_type.instance_type = "ml.g5.xlarge";
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutHost(other_type); }).ok());

  // Never failed and idle longest first; the one that failed comes last.
  auto first = reserve("i-0000000000000000a");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->host_id, "h-b-newer");
  EXPECT_EQ(first->state, "Assigned");
  EXPECT_EQ(Get("h-b-newer").instance_id, "i-0000000000000000a");
  // A host whose agent is away is passed over.
  auto second = reserve("i-0000000000000000b", "ml.c5.large",
                        [](const store::HostRecord& h) { return h.host_id != "h-c-newest"; });
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->host_id, "h-a-flaky");
  EXPECT_EQ(reserve("i-0000000000000000c")->host_id, "h-c-newest");
  auto none = reserve("i-0000000000000000d");
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(none.status().message(), "no Spare host of type ml.c5.large in pool default");
  EXPECT_EQ(reserve("i-0000000000000000e", "ml.g5.xlarge")->host_id, "h-d-gpu");
}

// The operations a person uses on a host, through HostApi.
class HostApiTest : public HostStatesTest {
 protected:
  void SetUp() override {
    HostStatesTest::SetUp();
    auto ca = auth::pki::CreateCa("hpod test CA", std::chrono::hours(24), clock_);
    ASSERT_TRUE(ca.ok());
    joins_ = std::make_unique<JoinService>(*store_, clock_, *ca, *auth::pki::CaPin(ca->cert_pem),
                                           JoinServiceOptions{}, nullptr);
    HostApiHooks hooks;
    hooks.connected = [](const store::HostRecord& h) { return h.host_id == "h-busy"; };
    hooks.health = [](const std::string& instance) {
      api::agentproto::HealthReport r;
      api::agentproto::HealthCheck c;
      c.name = "disk:/fsx";
      c.result = "fail";
      c.verdict = "Replace";
      c.reason = "/fsx is not mounted on " + instance;
      r.checks.push_back(c);
      return std::optional<api::agentproto::HealthReport>(r);
    };
    api_ = std::make_unique<HostApi>(*store_, clock_, joins_.get(), hooks);
    store::ClusterRecord c;
    c.id = "abcdefabcdef";
    c.name = "demo";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
    c.status = "InService";
    store::NodeRecord n;
    n.instance_id = "i-0000000000000000a";
    n.cluster_id = c.id;
    n.group_name = "workers";
    n.status = "Running";
    n.hostname = "ip-10-200-0-12";
    n.private_ip = "10.200.0.12";
    n.logical_id = "workers-1-0123abcd";
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) {
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
                      return tx.PutNode(n);
                    })
                    .ok());
  }

  StatusOr<nlohmann::ordered_json> Call(const std::string& op, const nlohmann::json& req) {
    return api_->Call(op, req);
  }

  std::unique_ptr<JoinService> joins_;
  std::unique_ptr<HostApi> api_;
};

TEST_F(HostApiTest, ListHostsFiltersByStateAndType) {
  Put("h-busy", HostState::kAssigned, "i-0000000000000000a");
  Put("h-spare", HostState::kSpare);
  Put("h-bad", HostState::kQuarantined);
  auto spares = Call("HpodListHosts", {{"State", "Spare"}});
  ASSERT_TRUE(spares.ok());
  ASSERT_EQ((*spares)["Hosts"].size(), 1u);
  EXPECT_EQ((*spares)["Hosts"][0]["HostId"], "h-spare");
  auto busy = Call("HpodListHosts", {{"State", "Assigned"}, {"InstanceType", "ml.c5.large"}});
  ASSERT_EQ((*busy)["Hosts"].size(), 1u);
  EXPECT_EQ((*busy)["Hosts"][0]["ClusterName"], "demo");
  EXPECT_EQ((*busy)["Hosts"][0]["InstanceGroupName"], "workers");
  EXPECT_EQ((*busy)["Hosts"][0]["InstanceId"], "i-0000000000000000a");
  EXPECT_EQ((*busy)["Hosts"][0]["Connected"], true);
  EXPECT_TRUE((*Call("HpodListHosts", {{"InstanceType", "ml.g5.xlarge"}}))["Hosts"].empty());
  EXPECT_EQ((*Call("HpodListHosts", nlohmann::json::object()))["Hosts"].size(), 3u);
}

TEST_F(HostApiTest, DescribeHostShowsWhatItServesItsHealthAndHistory) {
  store::HostRecord h = Put("h-busy", HostState::kSpare);
  clock_.AdvanceTime(std::chrono::seconds(3));
  ASSERT_TRUE(Change(h, HostState::kAssigned, "serves workers-1",
                     {"abcdefabcdef", "workers", "i-0000000000000000a"})
                  .ok());
  auto d = Call("HpodDescribeHost", {{"HostId", "h-busy"}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)["Status"], "Assigned");
  EXPECT_EQ((*d)["InstanceType"], "ml.c5.large");
  EXPECT_EQ((*d)["FailuresLast30Days"], 0);
  const auto& cur = (*d)["CurrentInstance"];
  EXPECT_EQ(cur["ClusterName"], "demo");
  EXPECT_EQ(cur["NodeLogicalId"], "workers-1-0123abcd");
  EXPECT_EQ(cur["Hostname"], "ip-10-200-0-12");
  EXPECT_EQ(cur["InstanceStatus"], "Running");
  EXPECT_EQ((*d)["LastHealthReport"][0]["Reason"], "/fsx is not mounted on i-0000000000000000a");
  ASSERT_EQ((*d)["History"].size(), 2u);
  EXPECT_FALSE((*d)["History"][0].contains("From"));
  EXPECT_EQ((*d)["History"][1]["From"], "Spare");
  EXPECT_EQ((*d)["History"][1]["To"], "Assigned");
  EXPECT_EQ((*d)["History"][1]["ClusterName"], "demo");
  EXPECT_EQ(Call("HpodDescribeHost", {{"HostId", "h-0000000000000000"}}).status().code(),
            StatusCode::kNotFound);
}

TEST_F(HostApiTest, ReleaseAndRetireMoveOnlyHostsThatMayMove) {
  Put("h-busy", HostState::kAssigned, "i-0000000000000000a");
  Put("h-bad", HostState::kQuarantined);
  auto refused = Call("HpodRetireHost", {{"HostId", "h-busy"}});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("replace that node first"));
  EXPECT_EQ(Call("HpodReleaseHost", {{"HostId", "h-busy"}}).status().code(),
            StatusCode::kFailedPrecondition);

  // A quarantined host has no certificate in this test's store: give it one, as
  // a join would, so that it is not taken for a revoked host.
  ASSERT_TRUE(store_
                  ->Write([](store::WriteTx& tx) {
                    return tx.PutCertificate({"0abc", "h-bad", 1e12, 1, 0});
                  })
                  .ok());
  auto released = Call("HpodReleaseHost", {{"HostId", "h-bad"}, {"Reason", "new DIMM"}});
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_EQ((*released)["Status"], "Spare");
  EXPECT_EQ((*released)["PreviousStatus"], "Quarantined");
  EXPECT_EQ(Get("h-bad").state_reason, "new DIMM");
  EXPECT_EQ((*Call("HpodReleaseHost", {{"HostId", "h-bad"}}))["Status"], "Spare");  // again

  auto retired = Call("HpodRetireHost", {{"HostId", "h-bad"}});
  ASSERT_TRUE(retired.ok());
  EXPECT_EQ((*retired)["Status"], "Retired");
  EXPECT_THAT(Get("h-bad").state_reason, HasSubstr("retired by an admin"));
  EXPECT_EQ((*Call("HpodReleaseHost", {{"HostId", "h-bad"}}))["Status"], "Spare");
  EXPECT_EQ(Call("HpodRetireHost", {{"HostId", "h-0000000000000000"}}).status().code(),
            StatusCode::kNotFound);

  // A host that joined for one launch has no type: no cluster could take it.
  store::HostRecord launch = Put("h-launch", HostState::kRetired);
  launch.instance_type.clear();
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutHost(launch); }).ok());
  auto untyped = Call("HpodReleaseHost", {{"HostId", "h-launch"}});
  EXPECT_EQ(untyped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(untyped.status().message(), HasSubstr("has no instance type"));
}

TEST_F(HostApiTest, WithoutTheAgentsListenerHostsAreReadAndTokensRefused) {
  Put("h-spare", HostState::kSpare);
  HostApi bare(*store_, clock_, /*joins=*/nullptr, HostApiHooks{});
  auto listed = bare.Call("HpodListHosts", nlohmann::json::object());
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ((*listed)["Hosts"][0]["HostId"], "h-spare");
  EXPECT_EQ((*listed)["Hosts"][0]["Connected"], false);
  EXPECT_TRUE(bare.Call("HpodDescribeHost", {{"HostId", "h-spare"}}).ok());
  EXPECT_EQ((*bare.Call("HpodRetireHost", {{"HostId", "h-spare"}}))["Status"], "Retired");
  auto refused = bare.Call("HpodCreateJoinToken", nlohmann::json::object());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("--agent-listen"));
  // Revocation needs no CA: a compromised host is cut off all the same.
  ASSERT_TRUE(store_
                  ->Write([](store::WriteTx& tx) {
                    return tx.PutCertificate({"0abc", "h-spare", 1e12, 1, 0});
                  })
                  .ok());
  auto revoked = bare.Call("HpodRevokeHost", {{"HostId", "h-spare"}});
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_EQ((*revoked)["RevokedSerials"], nlohmann::json::array({"0abc"}));
}

}  // namespace
}  // namespace hpod::controlplane
