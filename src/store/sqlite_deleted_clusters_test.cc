// The store's deleted clusters (schema v9): RetireCluster keeps a cluster's
// events under a record until PurgeDeletedCluster.

#include <gtest/gtest.h>

#include <string>

#include "hpod/store/store.h"

namespace hpod::store {
namespace {

// A retired cluster is gone but for its events and its record; a new cluster may
// take its name; purging removes both.
TEST(SqliteDeletedClustersTest, RetiredClusterKeepsItsEventsUntilPurged) {
  auto opened = OpenSqliteStore({});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto store = std::move(opened).value();
  auto retire = [&](const std::string& id, double when) {
    return store->Write([&](WriteTx& tx) -> Status {
      ClusterRecord c;
      c.id = id;
      c.name = "demo";
      c.arn = "arn-" + id;
      c.status = "Deleting";
      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
      NodeRecord n;
      n.instance_id = "i-" + id;
      n.cluster_id = id;
      n.group_name = "workers";
      n.status = "Failure";
      HPOD_RETURN_IF_ERROR(tx.PutNode(n));
      EventRecord e;
      e.event_id = "e-" + id;
      e.cluster_id = id;
      e.resource_type = "Cluster";
      HPOD_RETURN_IF_ERROR(tx.AddEvent(e).status());
      DeletedClusterRecord d;
      d.id = id;
      d.name = "demo";
      d.arn = "arn-" + id;
      d.failure_message = "why " + id;
      d.creation_time = 1;
      d.deleted = when;
      return tx.RetireCluster(d);
    });
  };
  ASSERT_TRUE(retire("a", 10).ok());
  ASSERT_TRUE(retire("b", 20).ok());  // the name is free again once retired
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) -> Status {
                    EXPECT_EQ(tx.GetCluster("a").status().code(), StatusCode::kNotFound);
                    EXPECT_EQ(tx.GetClusterByName("demo").status().code(), StatusCode::kNotFound);
                    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes("a"));
                    EXPECT_TRUE(nodes.empty());
                    HPOD_ASSIGN_OR_RETURN(auto e, tx.GetEvent("a", "e-a"));
                    EXPECT_EQ(e.event_id, "e-a");
                    HPOD_ASSIGN_OR_RETURN(auto a, tx.GetDeletedCluster("a"));
                    EXPECT_EQ(a.failure_message, "why a");
                    EXPECT_EQ(a.deleted, 10);
                    HPOD_ASSIGN_OR_RETURN(auto newest, tx.GetDeletedClusterByName("demo"));
                    EXPECT_EQ(newest.id, "b");
                    HPOD_ASSIGN_OR_RETURN(auto old, tx.ListDeletedClusters(15));
                    EXPECT_EQ(old.size(), 1u);
                    return OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(store->Write([](WriteTx& tx) { return tx.PurgeDeletedCluster("a"); }).ok());
  ASSERT_TRUE(store
                  ->Read([](ReadTx& tx) -> Status {
                    EXPECT_EQ(tx.GetDeletedCluster("a").status().code(), StatusCode::kNotFound);
                    EXPECT_EQ(tx.GetEvent("a", "e-a").status().code(), StatusCode::kNotFound);
                    HPOD_ASSIGN_OR_RETURN(auto b, tx.GetEvent("b", "e-b"));
                    EXPECT_EQ(b.event_id, "e-b");
                    return OkStatus();
                  })
                  .ok());
}

}  // namespace
}  // namespace hpod::store
