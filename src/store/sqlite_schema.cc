// The store's schema: append-only migrations keyed by PRAGMA user_version.

#include <string>

#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

// Migration i moves the schema from version i to i+1. Never edit a released
// migration: append a new one.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE clusters(
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  arn TEXT NOT NULL,
  status TEXT NOT NULL,
  failure_message TEXT NOT NULL,
  creation_time REAL NOT NULL,
  spec TEXT NOT NULL,
  generation INTEGER NOT NULL) STRICT;
CREATE INDEX clusters_by_time ON clusters(creation_time, id);
CREATE TABLE instance_groups(
  cluster_id TEXT NOT NULL,
  name TEXT NOT NULL,
  position INTEGER NOT NULL,
  spec TEXT NOT NULL,
  target_count INTEGER NOT NULL,
  previous_target_count INTEGER NOT NULL,
  status TEXT NOT NULL,
  deleting INTEGER NOT NULL,
  PRIMARY KEY(cluster_id, name)) STRICT;
CREATE TABLE nodes(
  instance_id TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL,
  group_name TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  status TEXT NOT NULL,
  message TEXT NOT NULL,
  launch_time REAL NOT NULL,
  private_ip TEXT NOT NULL,
  hostname TEXT NOT NULL,
  logical_id TEXT NOT NULL,
  launched INTEGER NOT NULL,
  remove INTEGER NOT NULL,
  created_generation INTEGER NOT NULL) STRICT;
CREATE INDEX nodes_by_time ON nodes(cluster_id, launch_time, instance_id);
CREATE INDEX nodes_by_group ON nodes(cluster_id, group_name, instance_id);
CREATE TABLE events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL UNIQUE,
  cluster_id TEXT NOT NULL,
  cluster_name TEXT NOT NULL,
  cluster_arn TEXT NOT NULL,
  group_name TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  time REAL NOT NULL,
  level TEXT NOT NULL,
  description TEXT NOT NULL) STRICT;
CREATE INDEX events_by_cluster ON events(cluster_id, seq);
CREATE TABLE access_keys(
  access_key_id TEXT PRIMARY KEY,
  secret TEXT NOT NULL,
  role TEXT NOT NULL,
  created REAL NOT NULL,
  description TEXT NOT NULL) STRICT;
CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
)sql",
    // v2: DescribeCluster's CurrentCount per group is counted from this partial
    // index alone (no table lookups): ~10x cheaper on a 10,000-node cluster.
    R"sql(
CREATE INDEX nodes_running ON nodes(cluster_id, group_name) WHERE status = 'Running' AND remove = 0;
)sql",
    // v3: the running count per group is kept by triggers in running_counts, so
    // DescribeCluster reads one row per group instead of scanning every node (the
    // v2 index scan was still ~75% of its CPU at 10,000 nodes). Invariant: n equals
    // the number of nodes of that group with status 'Running' and remove = 0.
    // PutNode must UPSERT (not INSERT OR REPLACE), whose implicit delete fires no
    // delete trigger.
    R"sql(
DROP INDEX nodes_running;
CREATE TABLE running_counts(
  cluster_id TEXT NOT NULL,
  group_name TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY(cluster_id, group_name)) STRICT;
INSERT INTO running_counts(cluster_id, group_name, n)
  SELECT cluster_id, group_name, COUNT(*) FROM nodes WHERE status = 'Running' AND remove = 0
  GROUP BY cluster_id, group_name;
CREATE TRIGGER running_counts_insert AFTER INSERT ON nodes
  WHEN NEW.status = 'Running' AND NEW.remove = 0
BEGIN
  INSERT INTO running_counts(cluster_id, group_name, n) VALUES(NEW.cluster_id, NEW.group_name, 1)
    ON CONFLICT(cluster_id, group_name) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER running_counts_delete AFTER DELETE ON nodes
  WHEN OLD.status = 'Running' AND OLD.remove = 0
BEGIN
  UPDATE running_counts SET n = n - 1
    WHERE cluster_id = OLD.cluster_id AND group_name = OLD.group_name;
END;
CREATE TRIGGER running_counts_update AFTER UPDATE OF status, remove, cluster_id, group_name ON nodes
BEGIN
  UPDATE running_counts SET n = n - 1
    WHERE OLD.status = 'Running' AND OLD.remove = 0
      AND cluster_id = OLD.cluster_id AND group_name = OLD.group_name;
  INSERT INTO running_counts(cluster_id, group_name, n)
    SELECT NEW.cluster_id, NEW.group_name, 1 WHERE NEW.status = 'Running' AND NEW.remove = 0
    ON CONFLICT(cluster_id, group_name) DO UPDATE SET n = n + 1;
END;
)sql",
    // v4: node agents (issue 3). A separate table because only the agent service
    // writes it, while the reconciler owns the nodes table.
    R"sql(
CREATE TABLE node_agents(
  instance_id TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL,
  credential_hash TEXT NOT NULL,
  lifecycle_state TEXT NOT NULL,
  lifecycle_message TEXT NOT NULL,
  agent_version TEXT NOT NULL,
  registered_time REAL NOT NULL) STRICT;
CREATE INDEX node_agents_by_cluster ON node_agents(cluster_id);
)sql",
    // v5: node recoveries (issue 14). The record's fields beyond its keys are one
    // JSON document: only the recovery code reads them, and its timeline grows.
    R"sql(
CREATE TABLE recoveries(
  recovery_id TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  status TEXT NOT NULL,
  created REAL NOT NULL,
  body TEXT NOT NULL) STRICT;
CREATE INDEX recoveries_by_cluster ON recoveries(cluster_id, created, recovery_id);
)sql",
    // v6: hosts that join over the network (issue 25): their one-time join tokens
    // (only the secret's hash), the hosts, and the client certificates hpodd
    // signed for them. Columns, not a JSON body: join and certificate checks
    // read every field.
    R"sql(
CREATE TABLE join_tokens(
  id TEXT PRIMARY KEY,
  secret_hash TEXT NOT NULL,
  pool TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  created REAL NOT NULL,
  expires REAL NOT NULL,
  uses_left INTEGER NOT NULL,
  revoked INTEGER NOT NULL,
  description TEXT NOT NULL) STRICT;
CREATE TABLE hosts(
  host_id TEXT PRIMARY KEY,
  machine_id TEXT NOT NULL,
  pool TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  facts TEXT NOT NULL,
  joined REAL NOT NULL,
  token_id TEXT NOT NULL,
  state TEXT NOT NULL) STRICT;
CREATE INDEX hosts_by_machine ON hosts(machine_id);
CREATE TABLE certificates(
  serial TEXT PRIMARY KEY,
  host_id TEXT NOT NULL,
  not_after REAL NOT NULL,
  issued REAL NOT NULL,
  revoked REAL NOT NULL) STRICT;
CREATE INDEX certificates_by_host ON certificates(host_id, issued, serial);
)sql",
    // v7: host pools (issue 26). A host's declared instance type, where it serves
    // and why it is in its state; the history of its states (failures are counted
    // from it); a token's instance type. "Revoked" was v6's state of a revoked
    // host: it is Retired now (its certificates say it was revoked).
    R"sql(
ALTER TABLE hosts ADD COLUMN instance_type TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN cluster_id TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN group_name TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN state_changed REAL NOT NULL DEFAULT 0;
UPDATE hosts SET state = 'Retired', state_reason = 'its certificates were revoked'
  WHERE state = 'Revoked';
CREATE INDEX hosts_by_instance ON hosts(instance_id) WHERE instance_id != '';
UPDATE hosts SET
  cluster_id = COALESCE((SELECT cluster_id FROM nodes WHERE nodes.instance_id = hosts.instance_id), ''),
  group_name = COALESCE((SELECT group_name FROM nodes WHERE nodes.instance_id = hosts.instance_id), '')
  WHERE instance_id != '';
ALTER TABLE join_tokens ADD COLUMN instance_type TEXT NOT NULL DEFAULT '';
CREATE TABLE host_history(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  host_id TEXT NOT NULL,
  time REAL NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  cluster_id TEXT NOT NULL,
  group_name TEXT NOT NULL,
  instance_id TEXT NOT NULL) STRICT;
CREATE INDEX host_history_by_host ON host_history(host_id, seq);
)sql",
    // v8: continuous provisioning (issue 29): a node row knows which launch of
    // its logical node it is and when it may launch (a retry waits its backoff).
    R"sql(
ALTER TABLE nodes ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN not_before REAL NOT NULL DEFAULT 0;
)sql",
    // v9: deleted clusters whose events are kept for a retention period (issue
    // 29); the events stay in `events` under the cluster's id.
    R"sql(
CREATE TABLE deleted_clusters(
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  arn TEXT NOT NULL,
  failure_message TEXT NOT NULL,
  creation_time REAL NOT NULL,
  deleted REAL NOT NULL) STRICT;
CREATE INDEX deleted_clusters_by_name ON deleted_clusters(name, deleted);
CREATE INDEX deleted_clusters_by_time ON deleted_clusters(deleted);
)sql",
    // v10: a cluster's recoveries by status (issue 30): the reconcilers read the
    // ones in progress each pass, a handful, while finished ones pile up over a
    // cluster's life (100 failures a day at 10,000 nodes).
    R"sql(
CREATE INDEX recoveries_by_status ON recoveries(cluster_id, status, created, recovery_id);
)sql",
    // v11: a recovery's end time as a column (issue 30): the health pass reads
    // the failures of the last minutes (its back-off), not every failure of the
    // cluster's life. Older rows take theirs from the body (0 where it has none).
    // And a node's recoveries by age: whether a reported one is still its latest.
    R"sql(
ALTER TABLE recoveries ADD COLUMN finished REAL NOT NULL DEFAULT 0;
UPDATE recoveries SET finished = json_extract(body, '$.finished')
  WHERE json_valid(body) AND json_type(body, '$.finished') IN ('integer', 'real');
CREATE INDEX recoveries_by_finish ON recoveries(cluster_id, status, finished);
CREATE INDEX recoveries_by_instance ON recoveries(cluster_id, instance_id, created, recovery_id);
)sql",
};
constexpr int kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);

}  // namespace

Status MigrateSchema(Database& db) {
  HPOD_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
  // FULL: a commit acknowledged to a client survives power loss, not just a crash.
  HPOD_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=FULL"));
  HPOD_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys=ON"));
  HPOD_ASSIGN_OR_RETURN(int version, ReadSchemaVersion(db));
  if (version > kSchemaVersion) {
    return FailedPreconditionError("store schema version " + std::to_string(version) +
                                   " is newer than this hpodd understands (" +
                                   std::to_string(kSchemaVersion) + "); upgrade hpodd");
  }
  for (int v = version; v < kSchemaVersion; ++v) {
    HPOD_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    Status s = db.Exec(kMigrations[v]);
    if (s.ok()) s = db.Exec("PRAGMA user_version=" + std::to_string(v + 1));
    if (!s.ok()) {
      (void)db.Exec("ROLLBACK");
      return s.Annotate("migrating store to schema " + std::to_string(v + 1));
    }
    HPOD_RETURN_IF_ERROR(db.Exec("COMMIT"));
  }
  return OkStatus();
}

int LatestSchemaVersion() { return kSchemaVersion; }

StatusOr<int> ReadSchemaVersion(Database& db) {
  HPOD_ASSIGN_OR_RETURN(Statement s, db.Prepare("PRAGMA user_version"));
  HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return InternalError("PRAGMA user_version returned nothing");
  return static_cast<int>(s.Int(0));
}

}  // namespace hpod::store::internal
