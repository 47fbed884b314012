#pragma once

// The store: hpod's single source of truth. Every mutation happens inside one
// transaction (Store::Write), so a crash leaves either all or none of it. Readers
// see a consistent snapshot (Store::Read).
//
// Thread contract: a Store is safe for concurrent use. Write transactions are
// serialized (one writer connection); a file store serves Read transactions from a
// pool of read-only connections, concurrently with each other and with the writer
// (WAL snapshots); a ":memory:" store serializes reads too. A ReadTx or WriteTx is valid
// only inside the callback that received it, on that thread; callbacks must not
// call back into the Store, nor do network or provider calls.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/store/records.h"

namespace hpod::store {

// Keyset pagination: results strictly after (sort value, id) in the query's order.
struct PageAfter {
  std::string sort_value;  // creation time as "%.6f" or a name
  std::string id;
};

struct ClusterQuery {
  std::optional<double> created_after;   // exclusive
  std::optional<double> created_before;  // exclusive
  std::string name_contains;
  bool sort_by_name = false;  // else creation time
  bool ascending = true;
  std::optional<PageAfter> after;
  int limit = 100;
};

struct NodeQuery {
  std::string cluster_id;
  std::optional<double> launched_after;
  std::optional<double> launched_before;
  std::string group_contains;
  bool sort_by_name = false;  // by instance group name, then instance id; else launch time
  bool ascending = true;
  std::optional<PageAfter> after;
  int limit = 100;
};

struct EventQuery {
  std::string cluster_id;
  std::string group_name;
  std::string instance_id;
  std::string resource_type;
  std::optional<double> after_time;
  std::optional<double> before_time;
  bool ascending = false;            // ListClusterEvents defaults to newest first
  std::optional<int64_t> after_seq;  // pagination: strictly beyond this seq in the order
  int limit = 100;
};

// A recovery record with its write position (ReadTx::ListRecoveriesWrittenAfter).
struct WrittenRecovery {
  int64_t position = 0;
  RecoveryRecord record;
};

class ReadTx {
 public:
  virtual ~ReadTx() = default;
  // kNotFound when absent.
  virtual StatusOr<ClusterRecord> GetCluster(const std::string& id) = 0;
  virtual StatusOr<ClusterRecord> GetClusterByName(const std::string& name) = 0;
  virtual StatusOr<std::vector<ClusterRecord>> ListClusters(const ClusterQuery& q) = 0;
  virtual StatusOr<std::vector<std::string>> ListClusterIds() = 0;
  // Deleted clusters kept for their events (RetireCluster). kNotFound when absent;
  // by name, the one deleted last.
  virtual StatusOr<DeletedClusterRecord> GetDeletedCluster(const std::string& id) = 0;
  virtual StatusOr<DeletedClusterRecord> GetDeletedClusterByName(const std::string& name) = 0;
  // Those deleted before `time` (epoch seconds), oldest first.
  virtual StatusOr<std::vector<DeletedClusterRecord>> ListDeletedClusters(double before) = 0;
  virtual StatusOr<std::vector<GroupRecord>> ListGroups(const std::string& cluster_id) = 0;
  // Every node of a cluster, ordered by group name and ordinal.
  virtual StatusOr<std::vector<NodeRecord>> ListNodes(const std::string& cluster_id) = 0;
  // Every node of a cluster, summed up, ordered by group name and instance id: an
  // index's order, so neither a sort nor a read of the rest of each row (at
  // 10,000 nodes, a third of ListNodes' time).
  virtual StatusOr<std::vector<NodeSummary>> ListNodeSummaries(const std::string& cluster_id) = 0;
  virtual StatusOr<std::vector<NodeRecord>> QueryNodes(const NodeQuery& q) = 0;
  // Running nodes not marked for removal, per instance group (CurrentCount),
  // counted in SQL so DescribeCluster costs the same for 10 or 10,000 nodes.
  virtual StatusOr<std::map<std::string, int>> CountRunningNodes(const std::string& cluster_id) = 0;
  virtual StatusOr<NodeRecord> GetNode(const std::string& cluster_id,
                                       const std::string& instance_id) = 0;
  // The node with this id in whichever cluster holds it (agents know only their id).
  virtual StatusOr<NodeRecord> GetNodeById(const std::string& instance_id) = 0;
  virtual StatusOr<std::vector<EventRecord>> QueryEvents(const EventQuery& q) = 0;
  virtual StatusOr<EventRecord> GetEvent(const std::string& cluster_id,
                                         const std::string& event_id) = 0;
  virtual StatusOr<AccessKeyRecord> GetAccessKey(const std::string& access_key_id) = 0;
  virtual StatusOr<std::vector<AccessKeyRecord>> ListAccessKeys() = 0;
  // kNotFound when the node's agent never registered (or the node is gone).
  virtual StatusOr<AgentRecord> GetAgent(const std::string& instance_id) = 0;
  virtual StatusOr<std::vector<AgentRecord>> ListAgents(const std::string& cluster_id) = 0;
  // kNotFound when unset.
  virtual StatusOr<std::string> GetSetting(const std::string& key) = 0;
  // Every setting whose key begins with `prefix`, by key.
  virtual StatusOr<std::map<std::string, std::string>> ListSettings(const std::string& prefix) = 0;
  // These settings, by key, in one query (those unset are left out): a page's
  // worth of point reads for the price of one.
  virtual StatusOr<std::map<std::string, std::string>> GetSettings(
      const std::vector<std::string>& keys) = 0;
  virtual StatusOr<RecoveryRecord> GetRecovery(const std::string& recovery_id) = 0;
  // A cluster's recoveries, oldest first.
  virtual StatusOr<std::vector<RecoveryRecord>> ListRecoveries(const std::string& cluster_id) = 0;
  // A cluster's recoveries whose status is one of `statuses`, oldest first, read
  // through an index: the cost is that of the records returned, not of the
  // cluster's history.
  virtual StatusOr<std::vector<RecoveryRecord>> ListRecoveriesWithStatus(
      const std::string& cluster_id, const std::vector<std::string>& statuses) = 0;
  // A cluster's recoveries of `status` that finished (RecoveryRecord::finished)
  // at or after `since` (epoch seconds), oldest first, read through an index: the
  // failed ones of the last minutes, not every failure of a cluster's life.
  virtual StatusOr<std::vector<RecoveryRecord>> ListRecoveriesFinishedSince(
      const std::string& cluster_id, const std::string& status, double since) = 0;
  // The id of the instance's latest recovery in the cluster (by creation time,
  // then id), read through an index; "" when it has none.
  virtual StatusOr<std::string> LatestRecoveryId(const std::string& cluster_id,
                                                 const std::string& instance_id) = 0;
  // A cluster's recoveries written (PutRecovery) after write position `after` (0:
  // all of them), in write order, each with its position. Every PutRecovery gives
  // its record a position above that of every record the store holds, so a
  // reader that has seen a cluster's records up to position P learns of each
  // later write, new record or changed one, by asking for those after P, and
  // reads only those (GET /metrics folds finished recoveries, which never change,
  // once). Positions are SQLite rowids: a VACUUM renumbers them, and hpodd never
  // runs one.
  virtual StatusOr<std::vector<WrittenRecovery>> ListRecoveriesWrittenAfter(
      const std::string& cluster_id, int64_t after) = 0;

  // Join tokens, hosts and their certificates (records.h; issue 25).
  // kNotFound when absent.
  virtual StatusOr<JoinTokenRecord> GetJoinToken(const std::string& id) = 0;
  // Every join token, revoked and expired ones too, oldest first (created, id).
  virtual StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens() = 0;
  // kNotFound when absent.
  virtual StatusOr<HostRecord> GetHost(const std::string& host_id) = 0;
  // The host that joined last with this machine id (a machine may have joined
  // more than once, e.g. after its host was deleted); kNotFound when none did.
  virtual StatusOr<HostRecord> GetHostByMachineId(const std::string& machine_id) = 0;
  // The hosts of `pool`, or of every pool when it is empty, ordered by pool and
  // host id.
  virtual StatusOr<std::vector<HostRecord>> ListHosts(const std::string& pool) = 0;
  // The host serving `instance_id`; kNotFound when none does.
  virtual StatusOr<HostRecord> GetHostByInstanceId(const std::string& instance_id) = 0;
  // A host's state changes, oldest first.
  virtual StatusOr<std::vector<HostHistoryRecord>> ListHostHistory(const std::string& host_id) = 0;
  // kNotFound when hpodd never issued this serial.
  virtual StatusOr<CertificateRecord> GetCertificate(const std::string& serial) = 0;
  // The certificates issued to a host, oldest first (issued, serial).
  virtual StatusOr<std::vector<CertificateRecord>> ListCertificates(const std::string& host_id) = 0;
};

class WriteTx : public ReadTx {
 public:
  // Insert or replace by primary key.
  virtual Status PutCluster(const ClusterRecord& c) = 0;
  // Removes the cluster with its groups, nodes and events.
  virtual Status DeleteCluster(const std::string& id) = 0;
  // Removes the cluster as DeleteCluster does but keeps its events, and records
  // `deleted` (whose id is the cluster's) for them.
  virtual Status RetireCluster(const DeletedClusterRecord& deleted) = 0;
  // Removes a deleted cluster's record and its events (a no-op when absent).
  virtual Status PurgeDeletedCluster(const std::string& id) = 0;
  virtual Status PutGroup(const GroupRecord& g) = 0;
  virtual Status DeleteGroup(const std::string& cluster_id, const std::string& name) = 0;
  virtual Status PutNode(const NodeRecord& n) = 0;
  // Removes the node and its agent record.
  virtual Status DeleteNode(const std::string& instance_id) = 0;
  virtual Status PutAgent(const AgentRecord& a) = 0;
  // Assigns and returns the event's seq.
  virtual StatusOr<int64_t> AddEvent(const EventRecord& e) = 0;
  virtual Status PutAccessKey(const AccessKeyRecord& k) = 0;
  virtual Status PutSetting(const std::string& key, const std::string& value) = 0;
  // A no-op when absent.
  virtual Status DeleteSetting(const std::string& key) = 0;
  virtual Status PutRecovery(const RecoveryRecord& r) = 0;
  // Insert or replace by primary key (id, host_id, serial).
  virtual Status PutJoinToken(const JoinTokenRecord& t) = 0;
  // Removes the token (a no-op when absent); hosts that joined with it stay.
  virtual Status DeleteJoinToken(const std::string& id) = 0;
  virtual Status PutHost(const HostRecord& h) = 0;
  // Removes the host (a no-op when absent); its certificate rows stay.
  virtual Status DeleteHost(const std::string& host_id) = 0;
  virtual Status PutCertificate(const CertificateRecord& c) = 0;
  // Appends one state change (its seq is assigned and returned).
  virtual StatusOr<int64_t> AddHostHistory(const HostHistoryRecord& h) = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  // Runs `fn` in one transaction; commits when it returns OK, rolls back otherwise
  // (and returns its status).
  virtual Status Write(const std::function<Status(WriteTx&)>& fn) = 0;
  virtual Status Read(const std::function<Status(ReadTx&)>& fn) = 0;
  // Moves on (grows) with each write transaction this object runs that inserts,
  // updates or deletes a row, once its commit is visible to new reads; never
  // moves otherwise (a write transaction that only read leaves it). A read that takes it
  // before its transaction begins sees at least that generation's data, so an
  // answer read then stays true while the number is unchanged (response_cache.h).
  // Writes by another Store object or process on the same file do not move it:
  // hpodd is the only writer of its data dir's cluster data while it runs.
  virtual uint64_t WriteGeneration() const = 0;
  // The schema version this store is at (for diagnostics).
  virtual int SchemaVersion() = 0;
};

struct SqliteStoreOptions {
  // File path, or ":memory:" for tests.
  std::string path = ":memory:";
  // How long a connection waits for a lock before kUnavailable.
  int busy_timeout_ms = 5000;
  // Read-only connections for concurrent reads (file stores only).
  int reader_connections = 4;
};

// Opens (creating if needed) and migrates an SQLite store in WAL mode.
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options);

}  // namespace hpod::store
