// Deep health checks (deep_health.h): OnStartDeepHealthChecks holding new nodes,
// StartClusterHealthCheck's validation, a run's commands on the nodes (the
// Slurm reservation, hpod-deep-check stress and connectivity) and its results:
// events, DescribeClusterNode, and a Replace recovery for a node that failed.

#include "hpod/controlplane/deep_health.h"

#include <gtest/gtest.h>

#include <mutex>

#include "hpod/controlplane/deep_health_exec.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

json Controller() {
  json g = Harness::Group("controller", 1);
  g["SlurmConfig"] = {{"NodeType", "Controller"}};
  return g;
}

json Workers(int count, json checks = json()) {
  json g = Harness::Group("workers", count);
  g["SlurmConfig"] = {{"NodeType", "Compute"}, {"PartitionNames", {"dev"}}};
  if (!checks.is_null()) g["OnStartDeepHealthChecks"] = checks;
  return g;
}

// The commands a run sends, and hpod-deep-check's answers: stress passes unless
// the node is in `failing_stress`; connectivity's rank 0 reports no failure.
struct FakeNodes {
  std::mutex mu;
  std::vector<std::pair<std::string, std::vector<std::string>>> runs;
  std::set<std::string> failing_stress;
  std::set<std::string> unreachable;   // their agent is not connected
  std::set<std::string> without_tool;  // stress-ng is not installed there
  std::string jobs;                    // what squeue prints ("JOB HOSTLIST" lines)
  bool reserved = false;               // Slurm's hpod-deep-health reservation exists
  std::string stress_answer;           // when set, what every stress run prints
  bool connectivity_error = false;     // the world does not form

  StatusOr<CommandResult> Run(const std::string& id, const std::vector<std::string>& argv,
                              std::chrono::milliseconds) {
    std::lock_guard<std::mutex> lock(mu);
    runs.emplace_back(id, argv);
    if (unreachable.count(id)) return FailedPreconditionError("the node's agent is not connected");
    CommandResult r;
    if (argv[0] == "squeue") r.stdout_data = jobs;
    if (argv[0] == "scontrol" && argv[1] == "create") reserved = true;
    if (argv[0] == "scontrol" && argv[1] == "delete") {
      if (!reserved) {  // as Slurm answers for one that is not there
        r.exit_code = 1;
        r.stderr_data =
            "delete_reservation reservation=hpod-deep-health: Requested reservation is invalid\n";
      }
      reserved = false;
    }
    if (argv[0] == "hpod-deep-check" && argv[1] == "stress" && !stress_answer.empty()) {
      r.stdout_data = stress_answer;
    } else if (argv[0] == "hpod-deep-check" && argv[1] == "stress" && without_tool.count(id)) {
      r.exit_code = 1;
      r.stdout_data = json{
          {"check", "InstanceStress"},
          {"error", "cannot run stress-ng (install Debian's stress-ng package)"},
          {"missing_tool",
           true}}.dump();
    } else if (argv[0] == "hpod-deep-check" && argv[1] == "stress") {
      const bool ok = !failing_stress.count(id);
      r.stdout_data = json{{"check", "InstanceStress"},
                           {"passed", ok},
                           {"message", ok ? "cpu 880/s" : "cpu ran at 7 bogo-ops/s"},
                           {"detail", json::object()}}
                          .dump();
    } else if (argv[0] == "hpod-deep-check" && argv[1] == "connectivity" && connectivity_error) {
      r.exit_code = 1;
      r.stdout_data = json{
          {"check", "InstanceConnectivity"},
          {"rank", std::stoi(argv[3])},
          {"error", "rank 1 did not arrive within 30 s"},
          {"missing_tool",
           false}}.dump();
    } else if (argv[0] == "hpod-deep-check" && argv[1] == "connectivity") {
      const int world = std::stoi(argv[5]);
      r.stdout_data = argv[3] == "0" ? json{{"check", "InstanceConnectivity"},
                                            {"failures", std::vector<std::string>(world, "")},
                                            {"message", "2 nodes, every pair connected"},
                                            {"detail", json::object()}}
                                           .dump()
                                     : json{{"rank", std::stoi(argv[3])}}.dump();
    }
    return r;
  }
  std::vector<std::string> Commands(const std::string& program) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& [id, argv] : runs) {
      if (argv[0] != program) continue;
      std::string line = id;
      for (const auto& a : argv) line += " " + a;
      out.push_back(line);
    }
    return out;
  }
};

class DeepHealthTest : public ::testing::Test {
 protected:
  DeepHealthTest()
      : checker_(
            *h_.store_, h_.clock_, DeepHealthOptions{},
            [this](const std::string& id, const std::vector<std::string>& argv,
                   std::chrono::milliseconds t) { return nodes_.Run(id, argv, t); },
            [this](const std::string& id) { h_.queue_->Add(id); }) {}

  std::string ClusterId() { return h_.ClusterId("demo"); }
  std::vector<store::NodeRecord> Nodes(const std::string& group) {
    return h_.NodesOf("demo", group);
  }
  json DescribeNode(const std::string& id) {
    auto r = h_.Call("DescribeClusterNode", {{"ClusterName", "demo"}, {"NodeId", id}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return json::parse(r->dump())["NodeDetails"];
  }
  bool HasEvent(const std::string& text) {
    auto r = h_.Call("ListClusterEvents", {{"ClusterName", "demo"}, {"MaxResults", 100}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return false;
    const json events = json::parse(r->dump())["Events"];  // not a temporary's member
    for (const auto& e : events) {
      if (e["Description"].get<std::string>().find(text) != std::string::npos) return true;
    }
    ADD_FAILURE() << "no event with \"" << text << "\" in " << r->dump(1);
    return false;
  }

  Harness h_;
  FakeNodes nodes_;
  DeepHealthChecker checker_;
};

TEST_F(DeepHealthTest, OnStartChecksNameEachCheckOnce) {
  auto r = h_.Call(
      "CreateCluster",
      {{"ClusterName", "demo"},
       {"InstanceGroups", {Controller(), Workers(1, {"InstanceStress", "InstanceStress"})}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "InstanceGroups[1].OnStartDeepHealthChecks names InstanceStress twice; give each "
            "check once");
}

TEST_F(DeepHealthTest, OnStartChecksHoldNewNodesUntilTheyPass) {
  ASSERT_TRUE(h_.Call("CreateCluster",
                      {{"ClusterName", "demo"},
                       {"InstanceGroups",
                        {Controller(), Workers(2, {"InstanceStress", "InstanceConnectivity"})}}})
                  .ok());
  h_.Converge();
  auto workers = Nodes("workers");
  ASSERT_EQ(workers.size(), 2u);
  for (const auto& n : workers) {
    EXPECT_EQ(n.status, "DeepHealthCheckInProgress");
    EXPECT_NE(n.message.find("Deep health checks InstanceStress, InstanceConnectivity are due"),
              std::string::npos)
        << n.message;
  }
  EXPECT_EQ(Nodes("controller")[0].status, "Running");  // its group asks for none
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "Creating");

  ASSERT_TRUE(checker_.Pass().ok());
  // The workers were held in a maintenance reservation on the controller.
  auto scontrol = nodes_.Commands("scontrol");
  const std::string ctl = Nodes("controller")[0].instance_id;
  ASSERT_EQ(scontrol.size(), 2u);
  EXPECT_EQ(scontrol[0], ctl + " scontrol delete reservation=hpod-deep-health");
  EXPECT_NE(scontrol[1].find(ctl +
                             " scontrol create reservation reservationname=hpod-deep-health "
                             "nodes=" +
                             workers[0].hostname + "," + workers[1].hostname),
            std::string::npos)
      << scontrol[1];
  EXPECT_NE(scontrol[1].find("flags=maint,ignore_jobs"), std::string::npos);
  EXPECT_EQ(nodes_.Commands("squeue").size(), 1u);
  EXPECT_TRUE(nodes_.reserved);  // until a pass finds no check left to hold
  // Stress on each, connectivity on both with rank 0's address as the master.
  auto checks = nodes_.Commands("hpod-deep-check");
  ASSERT_EQ(checks.size(), 4u);
  auto ring = workers;  // ranked by hostname
  std::sort(ring.begin(), ring.end(),
            [](const auto& a, const auto& b) { return a.hostname < b.hostname; });
  int ranks = 0;
  for (const auto& c : checks) {
    if (c.find(" connectivity ") == std::string::npos) continue;
    ++ranks;
    EXPECT_NE(c.find("--master " + ring[0].private_ip + " "), std::string::npos) << c;
    EXPECT_NE(c.find("--names " + ring[0].hostname + "," + ring[1].hostname), std::string::npos)
        << c;
  }
  EXPECT_EQ(ranks, 2);

  h_.Converge();
  for (const auto& n : Nodes("workers")) EXPECT_EQ(n.status, "Running") << n.message;
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  json d = DescribeNode(workers[0].instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(d["Status"], "Passed");
  EXPECT_EQ(d["Origin"], "OnStartDeepHealthChecks");
  EXPECT_NE(d["Message"].get<std::string>().find(
                "InstanceStress passed: cpu 880/s; InstanceConnectivity passed: 2 nodes"),
            std::string::npos)
      << d;
  EXPECT_TRUE(HasEvent("Deep health checks started on instance " + workers[0].instance_id +
                       " (OnStartDeepHealthChecks): InstanceStress, InstanceConnectivity"));
  // Nothing is checked twice; the reservation ends.
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_EQ(nodes_.Commands("hpod-deep-check").size(), 4u);
  EXPECT_FALSE(nodes_.reserved);
  EXPECT_EQ(nodes_.Commands("scontrol").back(),
            ctl + " scontrol delete reservation=hpod-deep-health");
}

TEST_F(DeepHealthTest, StartClusterHealthCheckValidatesThenReplacesANodeThatFails) {
  ASSERT_TRUE(h_.Call("CreateCluster",
                      {{"ClusterName", "demo"}, {"InstanceGroups", {Controller(), Workers(2)}}})
                  .ok());
  auto start = [&](json configs) {
    return h_.Call("StartClusterHealthCheck",
                   {{"ClusterName", "demo"}, {"DeepHealthCheckConfigurations", configs}});
  };
  json stress = {{"InstanceGroupName", "workers"}, {"DeepHealthChecks", {"InstanceStress"}}};
  auto creating = start({stress});
  ASSERT_FALSE(creating.ok());
  EXPECT_NE(creating.status().message().find("is Creating; deep health checks start on an "
                                             "InService cluster"),
            std::string::npos);
  h_.Converge();
  ASSERT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  auto workers = Nodes("workers");
  EXPECT_EQ(start({{{"InstanceGroupName", "gpus"}, {"DeepHealthChecks", {"InstanceStress"}}}})
                .status()
                .message(),
            "Instance group 'gpus' not found in cluster demo");
  json wrong = stress;
  wrong["InstanceIds"] = {Nodes("controller")[0].instance_id};
  EXPECT_NE(start({wrong}).status().message().find("is not a node of instance group 'workers'"),
            std::string::npos);
  EXPECT_NE(start({stress, stress}).status().message().find("more than once"), std::string::npos);

  json one = stress;
  one["InstanceIds"] = {workers[1].instance_id};
  auto ok = start({one});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(json::parse(ok->dump())["ClusterArn"], h_.Describe("demo")["ClusterArn"]);
  EXPECT_NE(start({one}).status().message().find("is already being checked"), std::string::npos);
  // A node being recovered, or replacing one, is not checked until that is done.
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    store::RecoveryRecord r;
                    r.recovery_id = "rcv-000000000001";
                    r.cluster_id = workers[0].cluster_id;
                    r.instance_id = "i-0000000000000000a";
                    r.replacement_id = workers[0].instance_id;
                    r.status = "InProgress";
                    return tx.PutRecovery(r);
                  })
                  .ok());
  json zero = stress;
  zero["InstanceIds"] = {workers[0].instance_id};
  EXPECT_NE(start({zero}).status().message().find("is being recovered"), std::string::npos);
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto r, tx.GetRecovery("rcv-000000000001"));
                    r.status = "Succeeded";
                    return tx.PutRecovery(r);
                  })
                  .ok());
  h_.Converge(3);
  EXPECT_EQ(Nodes("workers")[1].status, "DeepHealthCheckInProgress");
  EXPECT_EQ(Nodes("workers")[0].status, "Running");
  EXPECT_EQ(DescribeNode(workers[1].instance_id)["HpodDeepHealthCheck"]["Status"], "Requested");

  nodes_.failing_stress.insert(workers[1].instance_id);
  ASSERT_TRUE(checker_.RunCluster(ClusterId()).ok());
  json d = DescribeNode(workers[1].instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(d["Status"], "Failed");
  EXPECT_EQ(d["Origin"], "StartClusterHealthCheck");
  EXPECT_NE(d["Message"].get<std::string>().find("Deep health check failed at "),
            std::string::npos);
  EXPECT_NE(d["Message"].get<std::string>().find("InstanceStress failed: cpu ran at 7 bogo-ops/s"),
            std::string::npos)
      << d;
  EXPECT_TRUE(HasEvent("Deep health check failed at "));
  EXPECT_TRUE(HasEvent("is unhealthy: deep health check InstanceStress failed: cpu ran at 7"));
  // Only the named node was checked, alone: its connectivity was not asked for.
  EXPECT_EQ(nodes_.Commands("hpod-deep-check").size(), 1u);
  std::vector<store::RecoveryRecord> recoveries;
  const std::string cluster_id = ClusterId();
  ASSERT_TRUE(h_.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(recoveries, tx.ListRecoveries(cluster_id));
                    return OkStatus();
                  })
                  .ok());
  ASSERT_EQ(recoveries.size(), 2u);  // the one written above, then the check's
  EXPECT_EQ(recoveries[1].instance_id, workers[1].instance_id);
  EXPECT_EQ(recoveries[1].action, "Replace");
  EXPECT_EQ(recoveries[1].source, "DeepHealthCheck");
  EXPECT_EQ(recoveries[1].check, "InstanceStress");
}

TEST_F(DeepHealthTest, ANodeCheckedAloneIsMeasuredAgainstARunningPeerThatIsNotJudged) {
  ASSERT_TRUE(h_.Call("CreateCluster",
                      {{"ClusterName", "demo"}, {"InstanceGroups", {Controller(), Workers(2)}}})
                  .ok());
  h_.Converge();
  auto workers = Nodes("workers");
  ASSERT_TRUE(
      h_.Call("StartClusterHealthCheck", {{"ClusterName", "demo"},
                                          {"DeepHealthCheckConfigurations",
                                           {{{"InstanceGroupName", "workers"},
                                             {"InstanceIds", {workers[0].instance_id}},
                                             {"DeepHealthChecks", {"InstanceConnectivity"}}}}}})
          .ok());
  ASSERT_TRUE(checker_.Pass().ok());
  std::set<std::string> ran;
  for (const auto& c : nodes_.Commands("hpod-deep-check")) {
    EXPECT_NE(c.find(" connectivity "), std::string::npos) << c;
    EXPECT_NE(c.find("--world 2 "), std::string::npos) << c;
    ran.insert(c.substr(0, c.find(' ')));
  }
  EXPECT_EQ(ran, (std::set<std::string>{workers[0].instance_id, workers[1].instance_id}));
  json d = DescribeNode(workers[0].instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(d["Status"], "Passed");
  EXPECT_NE(
      d["Message"].get<std::string>().find("(against " + workers[1].hostname + ", a Running peer)"),
      std::string::npos)
      << d;
  EXPECT_FALSE(DescribeNode(workers[1].instance_id).contains("HpodDeepHealthCheck"));
}

// What the checks could not say is not a node's failure: an agent away is tried
// again (three times, 10 s apart, then taken for unreachable), a missing tool
// leaves the node as it is, and nothing a node prints throws.
TEST_F(DeepHealthTest, InconclusiveAndUnavailableChecksAreNotFailures) {
  ASSERT_TRUE(
      h_.Call("CreateCluster", {{"ClusterName", "demo"},
                                {"InstanceGroups", {Controller(), Workers(3, {"InstanceStress"})}}})
          .ok());
  h_.Converge();
  auto w = Nodes("workers");
  nodes_.unreachable.insert(w[0].instance_id);
  nodes_.without_tool.insert(w[1].instance_id);
  ASSERT_TRUE(checker_.Pass().ok());
  h_.Converge(3);
  json d0 = DescribeNode(w[0].instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(d0["Status"], "Requested");
  EXPECT_NE(d0["Message"].get<std::string>().find("could not complete"), std::string::npos) << d0;
  EXPECT_NE(d0["Message"].get<std::string>().find("(attempt 2 of 3)"), std::string::npos) << d0;
  EXPECT_EQ(Nodes("workers")[0].status, "DeepHealthCheckInProgress");
  json d1 = DescribeNode(w[1].instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(d1["Status"], "Unavailable");
  EXPECT_NE(d1["Message"].get<std::string>().find("install Debian's stress-ng package"),
            std::string::npos);
  EXPECT_EQ(Nodes("workers")[1].status, "Running");  // left as it is, reported
  EXPECT_EQ(DescribeNode(w[2].instance_id)["HpodDeepHealthCheck"]["Status"], "Passed");
  // Not again before its retry is due; then twice more, and it is replaced.
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_EQ(DescribeNode(w[0].instance_id)["HpodDeepHealthCheck"]["Message"], d0["Message"]);
  for (int i = 0; i < 2; ++i) {
    h_.clock_.AdvanceTime(std::chrono::seconds(11));
    ASSERT_TRUE(checker_.Pass().ok());
  }
  json failed = DescribeNode(w[0].instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(failed["Status"], "Failed");
  EXPECT_NE(failed["Message"].get<std::string>().find("is not connected"), std::string::npos);
  EXPECT_TRUE(
      HasEvent("is unhealthy: deep health check could not complete 3 times, the node "
               "taken for unreachable: InstanceStress inconclusive"));
}

// A replacement that fails its OnStart check is not taken for a good one: it is
// in Failure, and the recovery that launched it ends Failed.
TEST_F(DeepHealthTest, AReplacementThatFailsItsCheckFailsItsRecovery) {
  ASSERT_TRUE(
      h_.Call("CreateCluster", {{"ClusterName", "demo"},
                                {"InstanceGroups", {Controller(), Workers(2, {"InstanceStress"})}}})
          .ok());
  h_.Converge();
  ASSERT_TRUE(checker_.Pass().ok());
  h_.Converge();
  ASSERT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  auto bad = Nodes("workers")[0];
  nodes_.failing_stress.insert(bad.instance_id);
  ASSERT_TRUE(h_.Call("StartClusterHealthCheck", {{"ClusterName", "demo"},
                                                  {"DeepHealthCheckConfigurations",
                                                   {{{"InstanceGroupName", "workers"},
                                                     {"InstanceIds", {bad.instance_id}},
                                                     {"DeepHealthChecks", {"InstanceStress"}}}}}})
                  .ok());
  ASSERT_TRUE(checker_.Pass().ok());
  h_.Converge();
  std::string replacement;
  for (const auto& n : Nodes("workers")) {
    if (n.hostname == bad.hostname && n.instance_id != bad.instance_id) replacement = n.instance_id;
  }
  ASSERT_FALSE(replacement.empty());
  EXPECT_EQ(DescribeNode(replacement)["InstanceStatus"]["Status"], "DeepHealthCheckInProgress");
  nodes_.failing_stress.insert(replacement);
  ASSERT_TRUE(checker_.Pass().ok());
  h_.Converge();
  EXPECT_EQ(DescribeNode(replacement)["InstanceStatus"]["Status"], "Failure");
  EXPECT_TRUE(HasEvent("Failed: the replacement failed: Deep health check failed at"));
}

TEST_F(DeepHealthTest, WhatANodePrintsNeverThrows) {
  ASSERT_TRUE(
      h_.Call("CreateCluster", {{"ClusterName", "demo"},
                                {"InstanceGroups", {Controller(), Workers(1, {"InstanceStress"})}}})
          .ok());
  h_.Converge();
  nodes_.stress_answer = R"({"passed": 1, "message": ["x"], "detail": 3})";
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_EQ(DescribeNode(Nodes("workers")[0].instance_id)["HpodDeepHealthCheck"]["Status"],
            "Failed");
  nodes_.stress_answer = R"({"error": 7, "missing_tool": "yes"})";
  auto r = deep::Classify(CommandResult{0, false, nodes_.stress_answer, ""});
  EXPECT_EQ(r.outcome, deep::Outcome::kInconclusive);
  EXPECT_EQ(
      deep::Classify(CommandResult{-1, false, "", "program hpod-deep-check not found in PATH"})
          .outcome,
      deep::Outcome::kUnavailable);
  auto busy =
      deep::Classify(CommandResult{-1, false, "", "the agent is busy or stopping; try again"});
  EXPECT_EQ(busy.outcome, deep::Outcome::kInconclusive);
  EXPECT_TRUE(busy.counts);
  EXPECT_EQ(deep::Classify(CommandResult{137, false, "", ""}).outcome,
            deep::Outcome::kInconclusive);
}

// Slurm jobs on the checked nodes: the run waits for them without holding the
// checker (it returns and looks again), and a reservation a run left behind is
// deleted on a later pass.
TEST_F(DeepHealthTest, JobsAreWaitedForAndALeftReservationIsDeleted) {
  ASSERT_TRUE(h_.Call("CreateCluster",
                      {{"ClusterName", "demo"}, {"InstanceGroups", {Controller(), Workers(1)}}})
                  .ok());
  h_.Converge();
  auto w = Nodes("workers")[0];
  ASSERT_TRUE(
      h_.Call("StartClusterHealthCheck",
              {{"ClusterName", "demo"},
               {"DeepHealthCheckConfigurations",
                {{{"InstanceGroupName", "workers"}, {"DeepHealthChecks", {"InstanceStress"}}}}}})
          .ok());
  nodes_.jobs = "12 " + w.hostname + "\n13 " + w.hostname + "\n";
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_TRUE(nodes_.Commands("hpod-deep-check").empty());
  json d = DescribeNode(w.instance_id)["HpodDeepHealthCheck"];
  EXPECT_EQ(d["Status"], "Requested");
  EXPECT_NE(
      d["Message"].get<std::string>().find("wait for Slurm jobs 12 13 to end on " + w.hostname),
      std::string::npos)
      << d;
  nodes_.jobs = "";
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_EQ(nodes_.Commands("hpod-deep-check").size(), 1u);
  EXPECT_EQ(DescribeNode(w.instance_id)["HpodDeepHealthCheck"]["Status"], "Passed");
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_FALSE(nodes_.reserved);
  // A reservation recorded but not deleted (hpodd stopped in between) goes,
  // also when Slurm no longer has it ("Requested reservation is invalid").
  nodes_.reserved = true;
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) {
                    return tx.PutSetting("cluster/" + w.cluster_id + "/deep-check-reservation",
                                         w.hostname);
                  })
                  .ok());
  const size_t before = nodes_.Commands("scontrol").size();
  ASSERT_TRUE(checker_.Pass().ok());
  auto scontrol = nodes_.Commands("scontrol");
  ASSERT_EQ(scontrol.size(), before + 1);
  EXPECT_NE(scontrol.back().find("scontrol delete reservation=hpod-deep-health"),
            std::string::npos);
  EXPECT_FALSE(nodes_.reserved);
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_EQ(nodes_.Commands("scontrol").size(), before + 1);  // forgotten once deleted
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) {
                    return tx.PutSetting("cluster/" + w.cluster_id + "/deep-check-reservation",
                                         w.hostname);
                  })
                  .ok());
  ASSERT_TRUE(checker_.Pass().ok());  // Slurm has none: forgotten all the same
  ASSERT_TRUE(checker_.Pass().ok());
  EXPECT_EQ(nodes_.Commands("scontrol").size(), before + 2);
}

// A world that does not form: the node whose own command failed uses up a try;
// the others are not judged (no try used), and the reservation holds them all
// meanwhile.
TEST_F(DeepHealthTest, ANodeThatBreaksTheWorldIsTheOnlyOneCounted) {
  ASSERT_TRUE(h_.Call("CreateCluster",
                      {{"ClusterName", "demo"},
                       {"InstanceGroups", {Controller(), Workers(2, {"InstanceConnectivity"})}}})
                  .ok());
  h_.Converge();
  auto w = Nodes("workers");
  auto ring = w;
  std::sort(ring.begin(), ring.end(),
            [](const auto& a, const auto& b) { return a.hostname < b.hostname; });
  nodes_.unreachable.insert(ring[1].instance_id);  // rank 1; rank 0 answers without a world
  nodes_.connectivity_error = true;
  ASSERT_TRUE(checker_.Pass().ok());
  json bad = DescribeNode(ring[1].instance_id)["HpodDeepHealthCheck"];
  json other = DescribeNode(ring[0].instance_id)["HpodDeepHealthCheck"];
  EXPECT_NE(bad["Message"].get<std::string>().find("(attempt 2 of 3)"), std::string::npos) << bad;
  EXPECT_NE(other["Message"].get<std::string>().find("not judged"), std::string::npos) << other;
  EXPECT_EQ(other["Message"].get<std::string>().find("attempt"), std::string::npos) << other;
  EXPECT_TRUE(nodes_.reserved);
}

TEST_F(DeepHealthTest, ConnectivityOfOneNodeIsSkippedWithTheReason) {
  ASSERT_TRUE(h_.Call("CreateCluster",
                      {{"ClusterName", "demo"},
                       {"InstanceGroups", {Controller(), Workers(1, {"InstanceConnectivity"})}}})
                  .ok());
  h_.Converge();
  ASSERT_TRUE(checker_.Pass().ok());
  h_.Converge();
  auto w = Nodes("workers")[0];
  EXPECT_EQ(w.status, "Running");
  EXPECT_NE(DescribeNode(w.instance_id)["HpodDeepHealthCheck"]["Message"].get<std::string>().find(
                "InstanceConnectivity skipped: it needs a second node, and no other node of group "
                "workers was checked with it or Running"),
            std::string::npos);
  EXPECT_TRUE(nodes_.Commands("hpod-deep-check").empty());
}

}  // namespace
}  // namespace hpod::controlplane
