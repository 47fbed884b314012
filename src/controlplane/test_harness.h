#pragma once

// An in-process control plane for tests: in-memory store, fake clock, fake
// provider, the real handlers, reconciler and work queue (driven by the test).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpod/api/model.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/cluster_reconciler.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/work_queue.h"
#include "hpod/provider/fake/fake_provider.h"

namespace hpod::controlplane::testing {

class Harness {
 public:
  explicit Harness(provider::FakeProviderOptions po = {}, ControlPlaneOptions co = {})
      : options_(co) {
    store_ = std::move(store::OpenSqliteStore({}).value());
    provider_ = std::make_unique<provider::FakeProvider>(clock_, po);
    reconciler_ = std::make_unique<ClusterReconciler>(*store_, provider_.get(), clock_, options_);
    queue_ = std::make_unique<WorkQueue>(clock_, WorkQueueOptions{}, [this](const std::string& k) {
      return reconciler_->Reconcile(k);
    });
    api_ = std::make_unique<ClusterApi>(
        *store_, clock_, options_, PageTokenCodec("secret"),
        [this](const std::string& id) { queue_->Add(id); }, provider_.get());
  }

  StatusOr<nlohmann::ordered_json> Call(const std::string& op, const nlohmann::json& req) {
    const api::Operation* o = api::ServiceModel::Get().FindOperation(op);
    EXPECT_NE(o, nullptr) << op;
    return api_->Call(*o, req);
  }

  // Runs reconcilers and advances time until nothing is due for `rounds` polls.
  void Converge(int rounds = 40) {
    for (int i = 0; i < rounds; ++i) {
      queue_->RunUntilIdle();
      clock_.AdvanceTime(options_.poll_interval);
    }
  }

  nlohmann::json Describe(const std::string& name) {
    auto r = Call("DescribeCluster", {{"ClusterName", name}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? nlohmann::json::parse(r->dump()) : nlohmann::json();
  }

  // A cluster's id, from its ARN; "" when there is none of that name.
  std::string ClusterId(const std::string& name) {
    return ClusterIdFromArn(Describe(name).value("ClusterArn", "")).value_or("");
  }
  // The rows of a group's nodes, those marked for removal too unless `live_only`.
  std::vector<store::NodeRecord> NodesOf(const std::string& cluster, const std::string& group,
                                         bool live_only = false) {
    std::vector<store::NodeRecord> out;
    const std::string id = ClusterId(cluster);  // before the read: ":memory:" has one reader
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto all, tx.ListNodes(id));
                      for (auto& n : all) {
                        if (n.group_name == group && !(live_only && n.remove)) out.push_back(n);
                      }
                      return OkStatus();
                    })
                    .ok());
    return out;
  }

  static nlohmann::json Group(const std::string& name, int count,
                              const std::string& type = "ml.c5.xlarge") {
    return {{"InstanceGroupName", name},
            {"InstanceType", type},
            {"InstanceCount", count},
            {"LifeCycleConfig",
             {{"SourceS3Uri", "s3://sagemaker-lcs/base-config/"}, {"OnCreate", "on_create.sh"}}},
            {"ExecutionRole", "arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole"}};
  }

  FakeClock clock_;
  ControlPlaneOptions options_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<provider::FakeProvider> provider_;
  std::unique_ptr<ClusterReconciler> reconciler_;
  std::unique_ptr<WorkQueue> queue_;
  std::unique_ptr<ClusterApi> api_;
};

}  // namespace hpod::controlplane::testing
