#pragma once

// The fixture of the recovery tests (recovery_test.cc, recovery_reboot_test.cc):
// a Slurm cluster in service (SlurmReconcileTest), recoveries asked straight in
// the store, and what they did: their steps and the commands run on the
// controller.
//
// Thread contract: one test thread.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/slurm_reconcile_fixture.h"

namespace hpod::controlplane::slurm_testing {

class RecoveryTest : public SlurmReconcileTest {
 protected:
  store::ClusterRecord Cluster() {
    store::ClusterRecord c;
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(c, tx.GetCluster(id_));
                      return OkStatus();
                    })
                    .ok());
    return c;
  }
  std::string Request(const NodeRecord& n, RecoveryAction action, bool dead,
                      bool is_controller = false) {
    std::string id;
    Status s = h_.store_->Write([&](store::WriteTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster(id_));
      HPOD_ASSIGN_OR_RETURN(id, RequestRecovery(tx, h_.clock_, c, n, is_controller,
                                                RecoveryRequest{action, "HealthCheck", "test",
                                                                "a test fault", dead}));
      return OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return id;
  }
  store::RecoveryRecord Recovery(const std::string& id) {
    store::RecoveryRecord r;
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(r, tx.GetRecovery(id));
                      return OkStatus();
                    })
                    .ok());
    return r;
  }
  std::vector<std::string> Steps(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& s : Recovery(id).timeline) out.push_back(s["step"]);
    return out;
  }
  // The commands run on the controller, each joined by spaces (after env SLURM_CONF=…).
  std::vector<std::string> Commands() {
    std::vector<std::string> out;
    for (const auto& [who, argv] : agents_.Runs()) {
      std::string line;
      for (size_t i = 2; i < argv.size(); ++i) line += (line.empty() ? "" : " ") + argv[i];
      out.push_back(line);
    }
    return out;
  }
  bool RanCommand(const std::string& prefix) {
    for (const auto& c : Commands()) {
      if (c.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  void SetNodeRecovery(const std::string& value) {
    ASSERT_TRUE(h_.store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster(id_));
                      c.spec["NodeRecovery"] = value;
                      return tx.PutCluster(c);
                    })
                    .ok());
  }
  // The replacement's agent finished its scripts, its slurmd registered and the
  // resume took effect.
  void ReplacementUp(const NodeRecord& b) {
    ASSERT_TRUE(h_.store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      store::AgentRecord a;
                      a.instance_id = b.instance_id;
                      a.cluster_id = id_;
                      a.lifecycle_state = "Succeeded";
                      return tx.PutAgent(a);
                    })
                    .ok());
    Pass(1);
    agents_.Ack(b.instance_id);
    agents_.SetNode(b.hostname, "IDLE+FAIL", "Action:Replace", SlurmTime(b.launch_time + 1));
    Pass(1);
    agents_.SetNode(b.hostname, "IDLE", "", SlurmTime(b.launch_time + 1));  // resumed
  }
};

}  // namespace hpod::controlplane::slurm_testing
