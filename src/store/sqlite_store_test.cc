#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "hpod/store/store.h"
#include "hpod/store/store_test_util.h"

namespace hpod::store {
namespace {

using test_util::Cluster;
using test_util::Memory;

TEST(SqliteStoreTest, ClusterRoundTrip) {
  auto store = Memory();
  ASSERT_TRUE(
      store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("a1", "demo", 10)); }).ok());
  ClusterRecord got;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(got, tx.GetClusterByName("demo"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(got.id, "a1");
  EXPECT_EQ(got.spec["Tags"][0]["Value"], "llm");
  Status missing = store->Read([](ReadTx& tx) { return tx.GetCluster("zz").status(); });
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
}

// Every column of a node row comes back as written, the retry fields included.
TEST(SqliteStoreTest, NodeRoundTripKeepsItsLaunchAttempt) {
  auto store = Memory();
  NodeRecord n;
  n.instance_id = "i-1";
  n.cluster_id = "a1";
  n.group_name = "workers";
  n.ordinal = 3;
  n.status = "Pending";
  n.message = "retry";
  n.logical_id = "workers-3-abc";
  n.created_generation = 2;
  n.attempt = 4;
  n.not_before = 1234.5;
  ASSERT_TRUE(store->Write([&](WriteTx& tx) { return tx.PutNode(n); }).ok());
  n.attempt = 5;  // an update writes them too
  n.not_before = 2000.25;
  ASSERT_TRUE(store->Write([&](WriteTx& tx) { return tx.PutNode(n); }).ok());
  NodeRecord got;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(got, tx.GetNodeById("i-1"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(got.ordinal, 3);
  EXPECT_EQ(got.logical_id, "workers-3-abc");
  EXPECT_EQ(got.created_generation, 2);
  EXPECT_EQ(got.attempt, 5);
  EXPECT_EQ(got.not_before, 2000.25);
}

TEST(SqliteStoreTest, AgentsRoundTripAndGoWithTheirNodeAndCluster) {
  auto store = Memory();
  auto put = [&](const std::string& id, const std::string& cluster) {
    return store->Write([&](WriteTx& tx) {
      NodeRecord n;
      n.instance_id = id;
      n.cluster_id = cluster;
      n.group_name = "g";
      n.status = "Pending";
      HPOD_RETURN_IF_ERROR(tx.PutNode(n));
      AgentRecord a;
      a.instance_id = id;
      a.cluster_id = cluster;
      a.credential_hash = "h-" + id;
      a.lifecycle_state = "Failed";
      a.lifecycle_message = "Lifecycle script on_create.sh exited with code 3";
      a.registered_time = 5;
      return tx.PutAgent(a);
    });
  };
  ASSERT_TRUE(
      store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("a1", "demo", 10)); }).ok());
  ASSERT_TRUE(put("i-1", "a1").ok());
  ASSERT_TRUE(put("i-2", "a1").ok());
  AgentRecord got;
  std::vector<AgentRecord> all;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(got, tx.GetAgent("i-1"));
                    HPOD_ASSIGN_OR_RETURN(NodeRecord n, tx.GetNodeById("i-2"));
                    EXPECT_EQ(n.cluster_id, "a1");
                    HPOD_ASSIGN_OR_RETURN(all, tx.ListAgents("a1"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(got.credential_hash, "h-i-1");
  EXPECT_EQ(got.lifecycle_message, "Lifecycle script on_create.sh exited with code 3");
  EXPECT_EQ(all.size(), 2u);
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteNode("i-1"); }).ok());
  EXPECT_EQ(store->Read([](ReadTx& tx) { return tx.GetAgent("i-1").status(); }).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteCluster("a1"); }).ok());
  EXPECT_EQ(store->Read([](ReadTx& tx) { return tx.GetAgent("i-2").status(); }).code(),
            StatusCode::kNotFound);
}

// What the API's response cache relies on (response_cache.h): every write that
// changes a row moves the generation on; a read never does.
TEST(SqliteStoreTest, TheWriteGenerationMovesWithEachWriteOnly) {
  auto store = Memory();
  const uint64_t start = store->WriteGeneration();
  ASSERT_TRUE(
      store->Read([](ReadTx& tx) { return tx.ListClusters(ClusterQuery{}).status(); }).ok());
  EXPECT_EQ(store->WriteGeneration(), start);
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("c1", "a", 1)); }).ok());
  const uint64_t after_one = store->WriteGeneration();
  EXPECT_GT(after_one, start);
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("c2", "b", 2)); }).ok());
  const uint64_t after_two = store->WriteGeneration();
  EXPECT_GT(after_two, after_one);
  // A write transaction that finds nothing to change (a reconcile pass with
  // nothing to do) leaves it.
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.GetCluster("c1").status(); }).ok());
  EXPECT_EQ(store->WriteGeneration(), after_two);
  // Any row counts, the deletes and the triggers' too.
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteSetting("absent"); }).ok());
  EXPECT_EQ(store->WriteGeneration(), after_two);
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.PutSetting("k", "v"); }).ok());
  EXPECT_GT(store->WriteGeneration(), after_two);
}

TEST(SqliteStoreTest, FailedTransactionLeavesNothing) {
  auto store = Memory();
  Status s = store->Write([](WriteTx& tx) {
    HPOD_RETURN_IF_ERROR(tx.PutCluster(Cluster("a1", "demo", 10)));
    return AbortedError("changed my mind");
  });
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  Status r = store->Read([](ReadTx& tx) { return tx.GetCluster("a1").status(); });
  EXPECT_EQ(r.code(), StatusCode::kNotFound);
}

TEST(SqliteStoreTest, ThrowingCallbackRollsBackAndLeavesTheStoreUsable) {
  auto store = Memory();
  Status s = store->Write([](WriteTx& tx) -> Status {
    HPOD_RETURN_IF_ERROR(tx.PutCluster(Cluster("a1", "demo", 10)));
    throw std::runtime_error("handler defect");
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(
      store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("b2", "other", 11)); }).ok());
  Status gone = store->Read([](ReadTx& tx) { return tx.GetCluster("a1").status(); });
  EXPECT_EQ(gone.code(), StatusCode::kNotFound);
}

TEST(SqliteStoreTest, NamesAreUnique) {
  auto store = Memory();
  ASSERT_TRUE(
      store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("a1", "demo", 10)); }).ok());
  Status s = store->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("b2", "demo", 11)); });
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
}

TEST(SqliteStoreTest, ClusterKeysetPagination) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    for (int i = 0; i < 7; ++i) {
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(
                          Cluster("id" + std::to_string(i), "c" + std::to_string(6 - i), 100 + i)));
                    }
                    return OkStatus();
                  })
                  .ok());
  for (bool by_name : {false, true}) {
    for (bool asc : {true, false}) {
      std::vector<std::string> seen;
      ClusterQuery q;
      q.sort_by_name = by_name;
      q.ascending = asc;
      q.limit = 3;
      while (true) {
        std::vector<ClusterRecord> page;
        ASSERT_TRUE(store
                        ->Read([&](ReadTx& tx) {
                          HPOD_ASSIGN_OR_RETURN(page, tx.ListClusters(q));
                          return OkStatus();
                        })
                        .ok());
        for (auto& c : page) seen.push_back(c.name);
        if (static_cast<int>(page.size()) < q.limit) break;
        const auto& last = page.back();
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6f", last.creation_time);
        q.after = PageAfter{by_name ? last.name : std::string(buf), last.id};
      }
      ASSERT_EQ(seen.size(), 7u);
      // Time order is the reverse of name order by construction.
      std::string first = (by_name == asc) ? "c0" : "c6";
      EXPECT_EQ(seen.front(), first) << by_name << asc;
    }
  }
}

TEST(SqliteStoreTest, NameContainsIsLiteral) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutCluster(Cluster("a", "prod-one", 1)));
                    return tx.PutCluster(Cluster("b", "dev-two", 2));
                  })
                  .ok());
  std::vector<ClusterRecord> got;
  ClusterQuery q;
  q.name_contains = "_";
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(got, tx.ListClusters(q));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_TRUE(got.empty());
  q.name_contains = "od-";
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(got, tx.ListClusters(q));
                    return OkStatus();
                  })
                  .ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "prod-one");
}

TEST(SqliteStoreTest, CountRunningNodesPerGroup) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    int i = 0;
                    for (const char* group : {"a", "a", "a", "b"}) {
                      NodeRecord n;
                      n.instance_id = "i-" + std::to_string(i);
                      n.cluster_id = "c";
                      n.group_name = group;
                      n.status = i == 1 ? "Pending" : "Running";
                      n.remove = i == 2;
                      ++i;
                      HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                    }
                    return OkStatus();
                  })
                  .ok());
  std::map<std::string, int> counts;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(counts, tx.CountRunningNodes("c"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(counts, (std::map<std::string, int>{{"a", 1}, {"b", 1}}));
}

// The summaries carry what each field of the row holds, in group then instance id
// order, and only the cluster's nodes.
TEST(SqliteStoreTest, NodeSummariesAreTheClustersNodesByGroupThenId) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    // (id, cluster, group, ordinal): ordinals run against the ids.
                    const std::tuple<const char*, const char*, const char*, int> rows[] = {
                        {"i-3", "c", "workers", 0},
                        {"i-1", "c", "workers", 1},
                        {"i-2", "c", "controller", 0},
                        {"i-0", "other", "workers", 0}};
                    for (const auto& [id, cluster, group, ordinal] : rows) {
                      NodeRecord n;
                      n.instance_id = id;
                      n.cluster_id = cluster;
                      n.group_name = group;
                      n.ordinal = ordinal;
                      n.status = ordinal == 0 ? "Running" : "Pending";
                      n.hostname = std::string("host-") + id;
                      n.private_ip = std::string("10.0.0.") + (id + 2);
                      n.launched = ordinal == 0;
                      n.remove = std::string(id) == "i-1";
                      HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                    }
                    return OkStatus();
                  })
                  .ok());
  std::vector<NodeSummary> got;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(got, tx.ListNodeSummaries("c"));
                    return OkStatus();
                  })
                  .ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].instance_id, "i-2");
  EXPECT_EQ(got[0].group_name, "controller");
  EXPECT_EQ(got[1].instance_id, "i-1");
  EXPECT_EQ(got[2].instance_id, "i-3");
  EXPECT_EQ(got[1].status, "Pending");
  EXPECT_EQ(got[2].status, "Running");
  EXPECT_EQ(got[1].hostname, "host-i-1");
  EXPECT_EQ(got[1].private_ip, "10.0.0.1");
  EXPECT_FALSE(got[1].launched);
  EXPECT_TRUE(got[2].launched);
  EXPECT_TRUE(got[1].remove);
  EXPECT_FALSE(got[2].remove);
}

TEST(SqliteStoreTest, RunningCountsFollowEveryNodeChange) {
  // Random inserts, status/remove/group changes and deletes; after each step the
  // trigger-kept counts must equal a fresh COUNT(*) over the nodes.
  auto store = Memory();
  std::mt19937 rng(7);
  const char* statuses[] = {"Pending", "Running", "Failure", "ShuttingDown"};
  const char* groups[] = {"a", "b"};
  for (int step = 0; step < 400; ++step) {
    ASSERT_TRUE(store
                    ->Write([&](WriteTx& tx) -> Status {
                      std::string id = "i-" + std::to_string(rng() % 20);
                      if (rng() % 5 == 0) return tx.DeleteNode(id);
                      NodeRecord n;
                      auto existing = tx.GetNode("c", id);
                      if (existing.ok()) n = *existing;
                      n.instance_id = id;
                      n.cluster_id = "c";
                      n.group_name = groups[rng() % 2];
                      n.status = statuses[rng() % 4];
                      n.remove = rng() % 4 == 0;
                      return tx.PutNode(n);
                    })
                    .ok());
    std::map<std::string, int> counted, expected;
    ASSERT_TRUE(store
                    ->Read([&](ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(counted, tx.CountRunningNodes("c"));
                      HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes("c"));
                      for (const auto& n : nodes) {
                        if (n.status == "Running" && !n.remove) expected[n.group_name]++;
                      }
                      return OkStatus();
                    })
                    .ok());
    ASSERT_EQ(counted, expected) << "step " << step;
  }
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.DeleteCluster("c"); }).ok());
  std::map<std::string, int> after;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(after, tx.CountRunningNodes("c"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_TRUE(after.empty());
}

TEST(SqliteStoreTest, DeleteClusterCascades) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutCluster(Cluster("a", "demo", 1)));
                    GroupRecord g;
                    g.cluster_id = "a";
                    g.name = "workers";
                    g.target_count = 2;
                    g.status = "Creating";
                    HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                    NodeRecord n;
                    n.instance_id = "i-0123456789abcdef0";
                    n.cluster_id = "a";
                    n.group_name = "workers";
                    n.status = "Pending";
                    HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                    EventRecord e;
                    e.event_id = "e1";
                    e.cluster_id = "a";
                    e.resource_type = "Cluster";
                    HPOD_RETURN_IF_ERROR(tx.AddEvent(e).status());
                    return tx.DeleteCluster("a");
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes("a"));
                    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups("a"));
                    EventQuery q;
                    q.cluster_id = "a";
                    HPOD_ASSIGN_OR_RETURN(auto events, tx.QueryEvents(q));
                    EXPECT_TRUE(nodes.empty());
                    EXPECT_TRUE(groups.empty());
                    EXPECT_TRUE(events.empty());
                    return OkStatus();
                  })
                  .ok());
}

TEST(SqliteStoreTest, EventsNewestFirstWithSeqPagination) {
  auto store = Memory();
  ASSERT_TRUE(store
                  ->Write([](WriteTx& tx) {
                    for (int i = 0; i < 5; ++i) {
                      EventRecord e;
                      e.event_id = "e" + std::to_string(i);
                      e.cluster_id = "a";
                      e.resource_type = i % 2 ? "Instance" : "Cluster";
                      e.time = i;
                      HPOD_RETURN_IF_ERROR(tx.AddEvent(e).status());
                    }
                    return OkStatus();
                  })
                  .ok());
  EventQuery q;
  q.cluster_id = "a";
  q.limit = 2;
  std::vector<EventRecord> page;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(page, tx.QueryEvents(q));
                    return OkStatus();
                  })
                  .ok());
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].event_id, "e4");
  q.after_seq = page.back().seq;
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(page, tx.QueryEvents(q));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(page[0].event_id, "e2");
  q = EventQuery{};
  q.cluster_id = "a";
  q.resource_type = "Instance";
  ASSERT_TRUE(store
                  ->Read([&](ReadTx& tx) {
                    HPOD_ASSIGN_OR_RETURN(page, tx.QueryEvents(q));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(page.size(), 2u);
}

// Settings by prefix (a cluster's deep health check records): a range, so '%'
// and '_' in a prefix are plain characters.
TEST(SqliteStoreTest, ListsAndDeletesSettingsByPrefix) {
  auto store = OpenSqliteStore({});
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)
                  ->Write([](WriteTx& tx) -> Status {
                    for (const char* k : {"cluster/a/deep/1", "cluster/a/deep/2", "cluster/a/x",
                                          "cluster/ab/deep/1", "cluster/a_deep/1",
                                          "cluster/a/deep0", "cluster/a/deep.", "cluster/a/deep/",
                                          "\xff\xff", "\xff\xff\x01", "\xfe\xff", "\xff"}) {
                      HPOD_RETURN_IF_ERROR(tx.PutSetting(k, std::string("v:") + k));
                    }
                    return tx.DeleteSetting("cluster/a/deep/2");
                  })
                  .ok());
  std::map<std::string, std::string> got;
  ASSERT_TRUE((*store)
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(got, tx.ListSettings("cluster/a/deep/"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(got, (std::map<std::string, std::string>{{"cluster/a/deep/", "v:cluster/a/deep/"},
                                                     {"cluster/a/deep/1", "v:cluster/a/deep/1"}}));
  // A prefix whose last bytes are 0xff, and one of only 0xff bytes.
  std::map<std::string, std::string> high, highest;
  ASSERT_TRUE((*store)
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(high, tx.ListSettings("\xfe\xff"));
                    HPOD_ASSIGN_OR_RETURN(highest, tx.ListSettings("\xff\xff"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(high, (std::map<std::string, std::string>{{"\xfe\xff", "v:\xfe\xff"}}));
  EXPECT_EQ(highest, (std::map<std::string, std::string>{{"\xff\xff", "v:\xff\xff"},
                                                         {"\xff\xff\x01", "v:\xff\xff\x01"}}));
  EXPECT_TRUE((*store)->Write([](WriteTx& tx) { return tx.DeleteSetting("absent"); }).ok());
}

// Named settings in one query: those set, by key; keys with quotes, a repeated
// key and an unset one read as they should.
TEST(SqliteStoreTest, GetsNamedSettingsAtOnce) {
  auto store = OpenSqliteStore({});
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)
                  ->Write([](WriteTx& tx) -> Status {
                    HPOD_RETURN_IF_ERROR(tx.PutSetting("a", "1"));
                    HPOD_RETURN_IF_ERROR(tx.PutSetting("b\"'%", "2"));
                    return tx.PutSetting("c", "3");
                  })
                  .ok());
  std::map<std::string, std::string> got, none;
  ASSERT_TRUE((*store)
                  ->Read([&](ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(got, tx.GetSettings({"b\"'%", "a", "unset", "a"}));
                    HPOD_ASSIGN_OR_RETURN(none, tx.GetSettings({}));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(got, (std::map<std::string, std::string>{{"a", "1"}, {"b\"'%", "2"}}));
  EXPECT_TRUE(none.empty());
}

TEST(SqliteStoreTest, FileStoreIsWalAndSurvivesReopen) {
  auto dir = std::filesystem::temp_directory_path() / ("hpod-store-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "state.db").string();
  {
    auto store = OpenSqliteStore({path});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->SchemaVersion(), 11);
    ASSERT_TRUE((*store)->Write([](WriteTx& tx) { return tx.PutSetting("k", "v"); }).ok());
  }
  {
    auto store = OpenSqliteStore({path});
    ASSERT_TRUE(store.ok());
    std::string v;
    ASSERT_TRUE((*store)
                    ->Read([&](ReadTx& tx) {
                      HPOD_ASSIGN_OR_RETURN(v, tx.GetSetting("k"));
                      return OkStatus();
                    })
                    .ok());
    EXPECT_EQ(v, "v");
  }
  // The journal mode is persistent in the file.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  // A schema from the future is refused rather than misread.
  sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto newer = OpenSqliteStore({path});
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpod::store
