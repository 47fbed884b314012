// The store's join tokens, hosts, certificates (schema v6) and host history (v7).

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "hpod/store/store.h"
#include "hpod/store/store_test_util.h"

namespace hpod::store {
namespace {

using test_util::Memory;

JoinTokenRecord Token(const std::string& id, double created) {
  JoinTokenRecord t;
  t.id = id;
  t.secret_hash = std::string(64, 'e');
  t.pool = "gpu";
  t.created = created;
  t.expires = created + 3600;
  t.uses_left = 3;
  t.description = "rack 4";
  return t;
}

HostRecord Host(const std::string& id, const std::string& machine, const std::string& pool,
                double joined) {
  HostRecord h;
  h.host_id = id;
  h.machine_id = machine;
  h.pool = pool;
  h.facts = {{"cpus", 64}, {"gpus", {{{"name", "H100"}}}}};
  h.joined = joined;
  h.token_id = "0123abcd";
  h.state = "Spare";
  return h;
}

TEST(SqliteHostStoreTest, JoinTokensRoundTripInCreationOrder) {
  auto store = Memory();
  JoinTokenRecord b = Token("bbbbbbbb", 20);
  b.instance_id = "i-0123456789abcdef0";
  b.revoked = true;
  b.uses_left = 0;
  ASSERT_TRUE(store
                  ->Write([&](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutJoinToken(b));
                    return tx.PutJoinToken(Token("aaaaaaaa", 10));
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(JoinTokenRecord got, tx.GetJoinToken("bbbbbbbb"));
                    EXPECT_EQ(got.secret_hash, b.secret_hash);
                    EXPECT_EQ(got.pool, "gpu");
                    EXPECT_EQ(got.instance_id, "i-0123456789abcdef0");
                    EXPECT_EQ(got.created, 20);
                    EXPECT_EQ(got.expires, 3620);
                    EXPECT_EQ(got.uses_left, 0);
                    EXPECT_TRUE(got.revoked);
                    EXPECT_EQ(got.description, "rack 4");
                    HPOD_ASSIGN_OR_RETURN(auto all, tx.ListJoinTokens());
                    EXPECT_EQ(all.size(), 2u);
                    if (all.size() == 2) {
                      EXPECT_EQ(all[0].id, "aaaaaaaa");
                      EXPECT_FALSE(all[0].revoked);
                      EXPECT_EQ(all[1].id, "bbbbbbbb");
                    }
                    EXPECT_EQ(tx.GetJoinToken("cccccccc").status().code(), StatusCode::kNotFound);
                    return OkStatus();
                  })
                  .ok());
  // A use taken and the token deleted, each in its own transaction.
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(JoinTokenRecord t, tx.GetJoinToken("aaaaaaaa"));
                    t.uses_left -= 1;
                    return tx.PutJoinToken(t);
                  })
                  .ok());
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteJoinToken("bbbbbbbb"); }).ok());
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(JoinTokenRecord t, tx.GetJoinToken("aaaaaaaa"));
                    EXPECT_EQ(t.uses_left, 2);
                    EXPECT_EQ(tx.GetJoinToken("bbbbbbbb").status().code(), StatusCode::kNotFound);
                    return OkStatus();
                  })
                  .ok());
}

TEST(SqliteHostStoreTest, HostsRoundTripByIdMachineAndPool) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutHost(Host("h-2", "m-a", "gpu", 10)));
                    HPOD_RETURN_IF_ERROR(tx.PutHost(Host("h-1", "m-b", "gpu", 11)));
                    HPOD_RETURN_IF_ERROR(tx.PutHost(Host("h-3", "m-c", "cpu", 12)));
                    // The same machine joined again later under a new host id.
                    return tx.PutHost(Host("h-4", "m-a", "gpu", 30));
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(HostRecord h, tx.GetHost("h-2"));
                    EXPECT_EQ(h.machine_id, "m-a");
                    EXPECT_EQ(h.pool, "gpu");
                    EXPECT_EQ(h.facts["cpus"], 64);
                    EXPECT_EQ(h.facts["gpus"][0]["name"], "H100");
                    EXPECT_EQ(h.joined, 10);
                    EXPECT_EQ(h.token_id, "0123abcd");
                    EXPECT_EQ(h.state, "Spare");
                    EXPECT_EQ(h.instance_id, "");
                    HPOD_ASSIGN_OR_RETURN(HostRecord latest, tx.GetHostByMachineId("m-a"));
                    EXPECT_EQ(latest.host_id, "h-4");
                    EXPECT_EQ(tx.GetHostByMachineId("m-z").status().code(), StatusCode::kNotFound);
                    EXPECT_EQ(tx.GetHost("h-9").status().code(), StatusCode::kNotFound);
                    HPOD_ASSIGN_OR_RETURN(auto gpu, tx.ListHosts("gpu"));
                    EXPECT_EQ(gpu.size(), 3u);
                    if (gpu.size() == 3) {
                      EXPECT_EQ(gpu[0].host_id, "h-1");
                      EXPECT_EQ(gpu[2].host_id, "h-4");
                    }
                    HPOD_ASSIGN_OR_RETURN(auto all, tx.ListHosts(""));
                    EXPECT_EQ(all.size(), 4u);
                    if (all.size() == 4) {
                      EXPECT_EQ(all[0].pool, "cpu");
                    }
                    return OkStatus();
                  })
                  .ok());
  HostRecord bad = Host("h-5", "m-d", "gpu", 1);
  bad.facts = nlohmann::json::array();
  EXPECT_EQ(store->Write([&](WriteTx& tx) { return tx.PutHost(bad); }).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(HostRecord h, tx.GetHost("h-1"));
                    h.instance_id = "i-0123456789abcdef0";
                    h.state = "InUse";
                    HPOD_RETURN_IF_ERROR(tx.PutHost(h));
                    return tx.DeleteHost("h-2");
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(HostRecord h, tx.GetHost("h-1"));
                    EXPECT_EQ(h.instance_id, "i-0123456789abcdef0");
                    EXPECT_EQ(h.state, "InUse");
                    EXPECT_EQ(tx.GetHost("h-2").status().code(), StatusCode::kNotFound);
                    return OkStatus();
                  })
                  .ok());
}

TEST(SqliteHostStoreTest, CertificatesRoundTripRevokeAndOutliveTheirHost) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutHost(Host("h-1", "m-a", "gpu", 1)));
                    HPOD_RETURN_IF_ERROR(tx.PutCertificate({"0bcd", "h-1", 500, 20, 0}));
                    HPOD_RETURN_IF_ERROR(tx.PutCertificate({"0abc", "h-1", 400, 10, 0}));
                    return tx.PutCertificate({"0fff", "h-2", 400, 10, 0});
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(CertificateRecord c, tx.GetCertificate("0abc"));
                    c.revoked = 30;
                    HPOD_RETURN_IF_ERROR(tx.PutCertificate(c));
                    return tx.DeleteHost("h-1");
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(CertificateRecord c, tx.GetCertificate("0abc"));
                    EXPECT_EQ(c.host_id, "h-1");
                    EXPECT_EQ(c.not_after, 400);
                    EXPECT_EQ(c.issued, 10);
                    EXPECT_EQ(c.revoked, 30);
                    HPOD_ASSIGN_OR_RETURN(auto certs, tx.ListCertificates("h-1"));
                    EXPECT_EQ(certs.size(), 2u);
                    if (certs.size() == 2) {
                      EXPECT_EQ(certs[0].serial, "0abc");
                      EXPECT_EQ(certs[1].serial, "0bcd");
                      EXPECT_EQ(certs[1].revoked, 0);
                    }
                    EXPECT_EQ(tx.GetCertificate("ffff").status().code(), StatusCode::kNotFound);
                    return OkStatus();
                  })
                  .ok());
}

// What migration v11 added, dropped to take a store back to v10 or older.
constexpr char kDropV11[] =
    "DROP INDEX recoveries_by_finish; DROP INDEX recoveries_by_instance; "
    "ALTER TABLE recoveries DROP COLUMN finished; ";
// What migrations v10 and later added, dropped to take a store back to v9 or older.
constexpr char kDropV10[] =
    "DROP INDEX recoveries_by_finish; DROP INDEX recoveries_by_instance; "
    "ALTER TABLE recoveries DROP COLUMN finished; "
    "DROP INDEX recoveries_by_status; ";
// What migrations v8 and later added, dropped to take a store back to v7 or older.
constexpr char kDropV8[] =
    "ALTER TABLE nodes DROP COLUMN attempt; ALTER TABLE nodes DROP COLUMN not_before; "
    "DROP TABLE deleted_clusters; DROP INDEX recoveries_by_finish; DROP INDEX "
    "recoveries_by_instance; "
    "ALTER TABLE recoveries DROP COLUMN finished; DROP INDEX recoveries_by_status; ";

// SQLite's EXPLAIN QUERY PLAN of `sql` on the store file at `path`, its rows run
// together (the indexes it names are what the tests look for).
std::string QueryPlan(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string plan;
  sqlite3_exec(
      db, ("EXPLAIN QUERY PLAN " + sql).c_str(),
      [](void* out, int n, char** values, char**) {
        for (int i = 0; i < n; ++i) *static_cast<std::string*>(out) += values[i] ? values[i] : "";
        return 0;
      },
      &plan, nullptr);
  sqlite3_close(db);
  return plan;
}

// A store file at an older schema: a current one taken back by `sql` (which
// drops what the newer migrations made and sets PRAGMA user_version).
class OldStoreTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string OldStore(const std::string& sql) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / "state.db").string();
    EXPECT_TRUE(OpenSqliteStore({path}).ok());
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    sqlite3_close(db);
    return path;
  }

  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("hpod-old-store-" + std::to_string(getpid()));
};

// A store at schema 5 (before this migration) gains the tables and keeps its rows.
TEST_F(OldStoreTest, MigratesAVersion5Store) {
  const std::string path = OldStore(
      "INSERT INTO settings VALUES('k', 'v'); "
      "DROP TABLE join_tokens; DROP TABLE hosts; DROP TABLE certificates; "
      "DROP TABLE host_history; " +
      std::string(kDropV8) + "PRAGMA user_version=5");
  auto store = OpenSqliteStore({path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->SchemaVersion(), 11);
  ASSERT_TRUE(
      (*store)->Write([](WriteTx& tx) { return tx.PutJoinToken(Token("aaaaaaaa", 1)); }).ok());
  ASSERT_TRUE((*store)
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(std::string v, tx.GetSetting("k"));
                    EXPECT_EQ(v, "v");
                    HPOD_ASSIGN_OR_RETURN(auto tokens, tx.ListJoinTokens());
                    EXPECT_EQ(tokens.size(), 1u);
                    return OkStatus();
                  })
                  .ok());
  store->reset();
}

// A v6 store (issue 25) gains v7's columns and history; its "Revoked" host,
// v6's name for a host whose certificates were revoked, is Retired.
TEST_F(OldStoreTest, MigratesAVersion6StoreAndItsRevokedHosts) {
  const std::string path = OldStore(
      "DROP TABLE host_history; DROP INDEX hosts_by_instance; "
      "ALTER TABLE hosts DROP COLUMN instance_type; "
      "ALTER TABLE hosts DROP COLUMN cluster_id; "
      "ALTER TABLE hosts DROP COLUMN group_name; "
      "ALTER TABLE hosts DROP COLUMN state_reason; "
      "ALTER TABLE hosts DROP COLUMN state_changed; "
      "ALTER TABLE join_tokens DROP COLUMN instance_type; "
      "INSERT INTO hosts VALUES('h-1', 'm-a', 'gpu', '', '{}', 5, 't', 'Revoked');"
      "INSERT INTO hosts VALUES('h-2', 'm-b', 'gpu', 'i-1', '{}', 6, 't', 'Assigned');" +
      std::string(kDropV8) + "PRAGMA user_version=6");
  auto store = OpenSqliteStore({path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->SchemaVersion(), 11);
  ASSERT_TRUE((*store)
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(HostRecord h, tx.GetHost("h-1"));
                    EXPECT_EQ(h.state, "Retired");
                    EXPECT_EQ(h.state_reason, "its certificates were revoked");
                    EXPECT_EQ(h.instance_type, "");
                    HPOD_ASSIGN_OR_RETURN(HostRecord a, tx.GetHostByInstanceId("i-1"));
                    EXPECT_EQ(a.host_id, "h-2");
                    EXPECT_EQ(a.state, "Assigned");
                    HPOD_ASSIGN_OR_RETURN(auto history, tx.ListHostHistory("h-1"));
                    EXPECT_TRUE(history.empty());
                    return OkStatus();
                  })
                  .ok());
  store->reset();
}

// A v7 store's nodes gain v8's launch attempt and not-before time, both 0: the
// first launch of their logical node, due now.
TEST_F(OldStoreTest, MigratesAVersion7StoreNodes) {
  const std::string path =
      OldStore(std::string(kDropV8) +
               "INSERT INTO nodes VALUES('i-1', 'c', 'workers', 1, 'Running', '', 5, '10.1.0.2', "
               "'ip-10-1-0-2', 'workers-1-abc', 1, 0, 1); PRAGMA user_version=7");
  auto store = OpenSqliteStore({path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->SchemaVersion(), 11);
  ASSERT_TRUE((*store)
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(NodeRecord n, tx.GetNodeById("i-1"));
                    EXPECT_EQ(n.status, "Running");
                    EXPECT_EQ(n.logical_id, "workers-1-abc");
                    EXPECT_EQ(n.attempt, 0);
                    EXPECT_EQ(n.not_before, 0);
                    return OkStatus();
                  })
                  .ok());
  store->reset();
}

// A v9 store's recoveries are found by status once v10 indexes them, and the
// query reads through that index (not the cluster's whole history).
TEST_F(OldStoreTest, MigratesAVersion9StoreRecoveries) {
  const std::string path =
      OldStore(std::string(kDropV10) +
               "INSERT INTO recoveries VALUES('rcv-1', 'c', 'i-1', 'Succeeded', 5, '{}');"
               "INSERT INTO recoveries VALUES('rcv-2', 'c', 'i-2', 'InProgress', 6, '{}');"
               "PRAGMA user_version=9");
  auto store = OpenSqliteStore({path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->SchemaVersion(), 11);
  ASSERT_TRUE((*store)
                  ->Read([](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto active,
                                          tx.ListRecoveriesWithStatus("c", {"InProgress"}));
                    EXPECT_EQ(active.size(), 1u);
                    if (!active.empty()) {
                      EXPECT_EQ(active[0].recovery_id, "rcv-2");
                    }
                    return OkStatus();
                  })
                  .ok());
  store->reset();
  const std::string plan = QueryPlan(path,
                                     "SELECT recovery_id FROM recoveries WHERE cluster_id='c' AND "
                                     "status='InProgress' ORDER BY created, recovery_id");
  EXPECT_NE(plan.find("recoveries_by_status"), std::string::npos) << plan;
}

// A v10 store's recoveries get v11's end-time column from their bodies (0 when
// a body has no number there), and failures are found by it through its index.
TEST_F(OldStoreTest, MigratesAVersion10StoreRecoveriesEndTimes) {
  const std::string path =
      OldStore(std::string(kDropV11) +
               "INSERT INTO recoveries VALUES('rcv-1', 'c', 'i-1', 'Failed', 5, "
               "'{\"finished\": 50}');"
               "INSERT INTO recoveries VALUES('rcv-2', 'c', 'i-2', 'Failed', 6, "
               "'{\"finished\": \"soon\"}');"
               "INSERT INTO recoveries VALUES('rcv-3', 'c', 'i-3', 'Failed', 7, '{}');"
               "PRAGMA user_version=10");
  auto store = OpenSqliteStore({path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->SchemaVersion(), 11);
  ASSERT_TRUE(
      (*store)
          ->Read([](ReadTx& tx) -> Status {
            HPOD_ASSIGN_OR_RETURN(auto late, tx.ListRecoveriesFinishedSince("c", "Failed", 40));
            EXPECT_EQ(late.size(), 1u);
            if (!late.empty()) {
              EXPECT_EQ(late[0].recovery_id, "rcv-1");
            }
            HPOD_ASSIGN_OR_RETURN(auto all, tx.ListRecoveriesFinishedSince("c", "Failed", 0));
            EXPECT_EQ(all.size(), 3u);
            return OkStatus();
          })
          .ok());
  store->reset();
  const std::string plan =
      QueryPlan(path,
                "SELECT recovery_id FROM recoveries WHERE cluster_id='c' AND status='Failed' AND "
                "finished>=40");
  EXPECT_NE(plan.find("recoveries_by_finish"), std::string::npos) << plan;
}

TEST(SqliteHostStoreTest, HostPlacementAndHistoryRoundTrip) {
  auto store = Memory();
  HostRecord h = Host("h-1", "m-a", "gpu", 1);
  h.state = "Assigned";
  h.instance_type = "ml.g5.12xlarge";
  h.instance_id = "i-0123456789abcdef0";
  h.cluster_id = "abcdefabcdef";
  h.group_name = "workers";
  h.state_reason = "serves i-0123456789abcdef0";
  h.state_changed = 42.5;
  JoinTokenRecord t = Token("aaaaaaaa", 1);
  t.instance_type = "ml.c5.large";
  std::vector<int64_t> seqs;
  ASSERT_TRUE(store
                  ->Write([&](WriteTx& tx) -> Status {
                    HPOD_RETURN_IF_ERROR(tx.PutHost(h));
                    HPOD_RETURN_IF_ERROR(tx.PutHost(Host("h-2", "m-b", "gpu", 2)));
                    HPOD_RETURN_IF_ERROR(tx.PutJoinToken(t));
                    for (const char* to : {"Joining", "Spare", "Assigned"}) {
                      HostHistoryRecord r;
                      r.host_id = "h-1";
                      r.time = static_cast<double>(seqs.size());
                      r.from_state = seqs.empty() ? "" : "x";
                      r.to_state = to;
                      r.reason = std::string("went ") + to;
                      r.instance_id = "i-0123456789abcdef0";
                      HPOD_ASSIGN_OR_RETURN(int64_t seq, tx.AddHostHistory(r));
                      seqs.push_back(seq);
                    }
                    HostHistoryRecord other;
                    other.host_id = "h-2";
                    other.to_state = "Spare";
                    return tx.AddHostHistory(other).status();
                  })
                  .ok());
  ASSERT_EQ(seqs.size(), 3u);
  EXPECT_LT(seqs[0], seqs[1]);
  EXPECT_LT(seqs[1], seqs[2]);
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(HostRecord got, tx.GetHostByInstanceId(h.instance_id));
                    EXPECT_EQ(got.host_id, "h-1");
                    EXPECT_EQ(got.instance_type, "ml.g5.12xlarge");
                    EXPECT_EQ(got.cluster_id, "abcdefabcdef");
                    EXPECT_EQ(got.group_name, "workers");
                    EXPECT_EQ(got.state_reason, "serves i-0123456789abcdef0");
                    EXPECT_EQ(got.state_changed, 42.5);
                    // A spare serves nothing: an empty instance id finds no host.
                    EXPECT_EQ(tx.GetHostByInstanceId("").status().code(), StatusCode::kNotFound);
                    HPOD_ASSIGN_OR_RETURN(JoinTokenRecord tok, tx.GetJoinToken("aaaaaaaa"));
                    EXPECT_EQ(tok.instance_type, "ml.c5.large");
                    HPOD_ASSIGN_OR_RETURN(auto history, tx.ListHostHistory("h-1"));
                    EXPECT_EQ(history.size(), 3u);
                    if (history.size() == 3) {
                      EXPECT_EQ(history[0].from_state, "");
                      EXPECT_EQ(history[0].to_state, "Joining");
                      EXPECT_EQ(history[2].to_state, "Assigned");
                      EXPECT_EQ(history[2].reason, "went Assigned");
                      EXPECT_EQ(history[2].seq, seqs[2]);
                      EXPECT_EQ(history[2].instance_id, "i-0123456789abcdef0");
                    }
                    return OkStatus();
                  })
                  .ok());
}

}  // namespace
}  // namespace hpod::store
