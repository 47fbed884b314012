// Recovery records in the SQLite store (records.h RecoveryRecord): round trip,
// listing by status through its index, and write positions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpod/store/store.h"
#include "hpod/store/store_test_util.h"

namespace hpod::store {
namespace {

using test_util::Cluster;
using test_util::Memory;

TEST(SqliteStoreTest, RecoveriesRoundTripInOrderAndGoWithTheirCluster) {
  auto store = Memory();
  RecoveryRecord r;
  r.recovery_id = "rcv-000000000002";
  r.cluster_id = "a";
  r.group_name = "workers";
  r.instance_id = "i-0123456789abcdef0";
  r.replacement_id = "i-0123456789abcdef1";
  r.hostname = "ip-10-77-0-11";
  r.private_ip = "10.77.0.11";
  r.action = "Replace";
  r.source = "Heartbeat";
  r.check = "heartbeat";
  r.reason = "no heartbeat";
  r.node_dead = true;
  r.automatic = false;
  r.phase = "Launched";
  r.status = "InProgress";
  r.created = 20;
  r.stale_slurmd_start = "2026-12-01T17:34:40";
  r.timeline = nlohmann::json::array({{{"step", "Detected"}, {"time", 20.5}, {"detail", "x"}}});
  RecoveryRecord older = r;
  older.recovery_id = "rcv-000000000001";
  older.created = 10;
  RecoveryRecord other = r;
  other.recovery_id = "rcv-000000000003";
  other.cluster_id = "b";
  ASSERT_TRUE(store
                  ->Write([&](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutCluster(Cluster("a", "demo", 1)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(older));
                    return tx.PutRecovery(other);
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(auto got, tx.GetRecovery(r.recovery_id));
                    EXPECT_EQ(got.replacement_id, r.replacement_id);
                    EXPECT_EQ(got.hostname, r.hostname);
                    EXPECT_EQ(got.private_ip, r.private_ip);
                    EXPECT_EQ(got.action, "Replace");
                    EXPECT_EQ(got.source, "Heartbeat");
                    EXPECT_EQ(got.check, "heartbeat");
                    EXPECT_TRUE(got.node_dead);
                    EXPECT_FALSE(got.automatic);
                    EXPECT_EQ(got.phase, "Launched");
                    EXPECT_EQ(got.status, "InProgress");
                    EXPECT_EQ(got.created, 20);
                    EXPECT_EQ(got.stale_slurmd_start, r.stale_slurmd_start);
                    EXPECT_EQ(got.timeline, r.timeline);
                    HPOD_ASSIGN_OR_RETURN(auto list, tx.ListRecoveries("a"));
                    EXPECT_EQ(list.size(), 2u);
                    if (list.size() == 2) {
                      EXPECT_EQ(list[0].recovery_id, older.recovery_id);
                      EXPECT_EQ(list[1].recovery_id, r.recovery_id);
                    }
                    EXPECT_EQ(tx.GetRecovery("rcv-nope").status().code(), StatusCode::kNotFound);
                    return OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteCluster("a"); }).ok());
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(auto a, tx.ListRecoveries("a"));
                    HPOD_ASSIGN_OR_RETURN(auto b, tx.ListRecoveries("b"));
                    EXPECT_TRUE(a.empty());
                    EXPECT_EQ(b.size(), 1u);
                    return OkStatus();
                  })
                  .ok());
}

// A recovery of node i-<id> in `cluster`, with the fields the listings read.
RecoveryRecord Rec(std::string id, std::string cluster, std::string status, double created,
                   double finished = 0) {
  RecoveryRecord r;
  r.recovery_id = std::move(id);
  r.cluster_id = std::move(cluster);
  r.instance_id = "i-" + r.recovery_id;
  r.status = std::move(status);
  r.created = created;
  r.finished = finished;
  return r;
}

TEST(SqliteStoreTest, RecoveriesAreListedByStatusOldestFirst) {
  auto store = Memory();
  auto rec = [](std::string id, std::string cluster, std::string status, double created) {
    return Rec(std::move(id), std::move(cluster), std::move(status), created);
  };
  ASSERT_TRUE(store
                  ->Write([&](WriteTx& tx) -> Status {
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r1", "a", "Succeeded", 1)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r2", "a", "InProgress", 4)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r3", "a", "Failed", 3)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r4", "a", "InProgress", 2)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r5", "b", "InProgress", 1)));
                    return tx.PutRecovery(rec("r6", "a", "InProgress", 5));
                  })
                  .ok());
  // A status rewritten in place leaves its old one's list.
  ASSERT_TRUE(
      store->Write([&](WriteTx& tx) { return tx.PutRecovery(rec("r6", "a", "Cancelled", 5)); })
          .ok());
  auto ids = [](const std::vector<RecoveryRecord>& list) {
    std::vector<std::string> out;
    for (const auto& r : list) out.push_back(r.recovery_id);
    return out;
  };
  ASSERT_TRUE(
      store
          ->Read([&](ReadTx& tx) -> Status {
            HPOD_ASSIGN_OR_RETURN(auto active, tx.ListRecoveriesWithStatus("a", {"InProgress"}));
            EXPECT_EQ(ids(active), (std::vector<std::string>{"r4", "r2"}));
            HPOD_ASSIGN_OR_RETURN(auto some, tx.ListRecoveriesWithStatus(
                                                 "a", {"InProgress", "Failed", "InProgress"}));
            EXPECT_EQ(ids(some), (std::vector<std::string>{"r4", "r3", "r2"}));
            HPOD_ASSIGN_OR_RETURN(auto none, tx.ListRecoveriesWithStatus("a", {}));
            EXPECT_TRUE(none.empty());
            HPOD_ASSIGN_OR_RETURN(auto other, tx.ListRecoveriesWithStatus("b", {"InProgress"}));
            EXPECT_EQ(ids(other), (std::vector<std::string>{"r5"}));
            return OkStatus();
          })
          .ok());
}

TEST(SqliteStoreTest, RecoveriesAreListedByEndTimeOldestFirst) {
  auto store = Memory();
  const auto& rec = Rec;
  ASSERT_TRUE(store
                  ->Write([&](WriteTx& tx) -> Status {
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r1", "a", "Failed", 1, 10)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r2", "a", "Failed", 2, 90)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r3", "a", "Failed", 3, 100)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r4", "a", "Succeeded", 4, 95)));
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(rec("r5", "b", "Failed", 5, 95)));
                    // Created first, ended last: a long recovery.
                    return tx.PutRecovery(rec("r0", "a", "Failed", 0.5, 99));
                  })
                  .ok());
  ASSERT_TRUE(
      store
          ->Read([&](ReadTx& tx) -> Status {
            HPOD_ASSIGN_OR_RETURN(auto late, tx.ListRecoveriesFinishedSince("a", "Failed", 90));
            std::vector<std::string> ids;
            for (const auto& r : late) ids.push_back(r.recovery_id);
            EXPECT_EQ(ids, (std::vector<std::string>{"r0", "r2", "r3"}));
            if (!late.empty()) {
              EXPECT_EQ(late[0].finished, 99);
            }
            HPOD_ASSIGN_OR_RETURN(auto none, tx.ListRecoveriesFinishedSince("a", "Failed", 101));
            EXPECT_TRUE(none.empty());
            return OkStatus();
          })
          .ok());
  // A rewrite moves the record's end time with it.
  ASSERT_TRUE(
      store->Write([&](WriteTx& tx) { return tx.PutRecovery(rec("r1", "a", "Failed", 1, 200)); })
          .ok());
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto late,
                                          tx.ListRecoveriesFinishedSince("a", "Failed", 150));
                    EXPECT_EQ(late.size(), 1u);
                    return OkStatus();
                  })
                  .ok());
}

TEST(SqliteStoreTest, ANodesLatestRecoveryIsFoundByItsInstance) {
  auto store = Memory();
  RecoveryRecord a1 = Rec("a1", "c", "Reported", 5), a2 = Rec("a2", "c", "Succeeded", 9);
  a2.instance_id = a1.instance_id;
  RecoveryRecord other = Rec("b1", "c", "InProgress", 20);  // another node, later
  RecoveryRecord elsewhere = Rec("x1", "d", "InProgress", 30);
  elsewhere.instance_id = a1.instance_id;  // the same id in another cluster
  ASSERT_TRUE(store
                  ->Write([&](WriteTx& tx) -> Status {
                    for (const auto& r : {a1, a2, other, elsewhere}) {
                      HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
                    }
                    return OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(std::string latest,
                                          tx.LatestRecoveryId("c", a1.instance_id));
                    EXPECT_EQ(latest, "a2");
                    HPOD_ASSIGN_OR_RETURN(std::string none, tx.LatestRecoveryId("c", "i-none"));
                    EXPECT_EQ(none, "");
                    return OkStatus();
                  })
                  .ok());
}

TEST(SqliteStoreTest, RecoveryWritesMovePastEveryPositionSeen) {
  auto store = Memory();
  auto put = [&](const std::string& id, const std::string& cluster, const std::string& status) {
    RecoveryRecord r;
    r.recovery_id = id;
    r.cluster_id = cluster;
    r.status = status;
    r.created = 1;
    ASSERT_TRUE(store->Write([&](WriteTx& tx) { return tx.PutRecovery(r); }).ok());
  };
  auto after = [&](const std::string& cluster, int64_t position) {
    std::vector<WrittenRecovery> out;
    Status s = store->Read([&](ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(out, tx.ListRecoveriesWrittenAfter(cluster, position));
      return OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  put("rcv-1", "a", "Succeeded");
  put("rcv-2", "b", "InProgress");
  put("rcv-3", "a", "InProgress");
  auto all = after("a", 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].record.recovery_id, "rcv-1");
  EXPECT_EQ(all[1].record.recovery_id, "rcv-3");
  EXPECT_LT(all[0].position, all[1].position);
  const int64_t seen = all[1].position;
  EXPECT_TRUE(after("a", seen).empty());
  // rcv-3 holds the highest position: rewriting it (it finished) must still move
  // it past `seen`, or a reader waiting beyond `seen` would never see the change.
  put("rcv-3", "a", "Succeeded");
  auto changed = after("a", seen);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].record.status, "Succeeded");
  EXPECT_GT(changed[0].position, seen);
  EXPECT_EQ(after("a", 0).size(), 2u) << "a rewrite replaces the record";
  // The other cluster's records are not in the answer, nor counted twice.
  ASSERT_EQ(after("b", 0).size(), 1u);
  EXPECT_EQ(after("b", 0)[0].record.recovery_id, "rcv-2");
  // Positions freed by a deleted cluster come after every one `a` has seen.
  const int64_t seen_a = changed[0].position;
  put("rcv-4", "c", "InProgress");
  put("rcv-5", "c", "InProgress");
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteCluster("c"); }).ok());
  put("rcv-6", "a", "InProgress");
  auto fresh = after("a", seen_a);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].record.recovery_id, "rcv-6");
}

}  // namespace
}  // namespace hpod::store
