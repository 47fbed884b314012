#pragma once

// Private to hpod_store (sqlite_store.cc and the sqlite_*.cc files beside it):
// the schema's entry points, the row helpers every query uses, and the
// transaction type whose queries those files define.
//
// Thread contract: a SqliteTx borrows one connection for one transaction; the
// SqliteStore that makes it serializes access to that connection.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpod/store/sqlite.h"
#include "hpod/store/store.h"

namespace hpod::store::internal {

// Applies the migrations `db` lacks (see sqlite_schema.cc) after setting the
// connection's pragmas (WAL, synchronous=FULL, foreign keys). kFailedPrecondition
// for a store newer than this hpodd. Caller holds the connection's lock.
Status MigrateSchema(Database& db);

// PRAGMA user_version of `db`.
StatusOr<int> ReadSchemaVersion(Database& db);

// The schema version this hpodd migrates stores to (its number of migrations).
int LatestSchemaVersion();

// Every row of `s`, each turned into a T by `read`.
template <typename T, typename Reader>
StatusOr<std::vector<T>> All(Statement& s, Reader read) {
  std::vector<T> out;
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(read(s));
  }
}

template <typename T, typename Reader>
StatusOr<T> One(Statement& s, Reader read, const std::string& what) {
  HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFoundError(what);
  return read(s);
}

// Deletes a cluster's rows from every table but `events` (DeleteCluster and
// RetireCluster share it).
Status RemoveClusterRows(Database& db, const std::string& id);

// One WriteTx over a connection inside BEGIN (IMMEDIATE for writes, DEFERRED for
// reads). Queries on clusters, instance groups and nodes are in
// sqlite_cluster_queries.cc; events, agents, access keys and settings in
// sqlite_event_queries.cc; recoveries in sqlite_recovery_queries.cc; join tokens,
// hosts and certificates in sqlite_host_queries.cc; deleted clusters in
// sqlite_deleted_clusters.cc.
class SqliteTx final : public WriteTx {
 public:
  explicit SqliteTx(Database& db) : db_(db) {}

  StatusOr<ClusterRecord> GetCluster(const std::string& id) override;
  StatusOr<ClusterRecord> GetClusterByName(const std::string& name) override;
  StatusOr<std::vector<ClusterRecord>> ListClusters(const ClusterQuery& q) override;
  StatusOr<std::vector<std::string>> ListClusterIds() override;
  StatusOr<DeletedClusterRecord> GetDeletedCluster(const std::string& id) override;
  StatusOr<DeletedClusterRecord> GetDeletedClusterByName(const std::string& name) override;
  StatusOr<std::vector<DeletedClusterRecord>> ListDeletedClusters(double before) override;
  StatusOr<std::vector<GroupRecord>> ListGroups(const std::string& cluster_id) override;
  StatusOr<std::vector<NodeRecord>> ListNodes(const std::string& cluster_id) override;
  StatusOr<std::vector<NodeSummary>> ListNodeSummaries(const std::string& cluster_id) override;
  StatusOr<std::map<std::string, int>> CountRunningNodes(const std::string& cluster_id) override;
  StatusOr<std::vector<NodeRecord>> QueryNodes(const NodeQuery& q) override;
  StatusOr<NodeRecord> GetNode(const std::string& cluster_id,
                               const std::string& instance_id) override;
  StatusOr<std::vector<EventRecord>> QueryEvents(const EventQuery& q) override;
  StatusOr<EventRecord> GetEvent(const std::string& cluster_id,
                                 const std::string& event_id) override;
  StatusOr<AccessKeyRecord> GetAccessKey(const std::string& access_key_id) override;
  StatusOr<NodeRecord> GetNodeById(const std::string& instance_id) override;
  StatusOr<AgentRecord> GetAgent(const std::string& instance_id) override;
  StatusOr<std::vector<AgentRecord>> ListAgents(const std::string& cluster_id) override;
  StatusOr<std::vector<AccessKeyRecord>> ListAccessKeys() override;
  StatusOr<std::string> GetSetting(const std::string& key) override;
  StatusOr<std::map<std::string, std::string>> ListSettings(const std::string& prefix) override;
  StatusOr<std::map<std::string, std::string>> GetSettings(
      const std::vector<std::string>& keys) override;
  StatusOr<RecoveryRecord> GetRecovery(const std::string& recovery_id) override;
  StatusOr<std::vector<RecoveryRecord>> ListRecoveries(const std::string& cluster_id) override;
  StatusOr<std::vector<RecoveryRecord>> ListRecoveriesWithStatus(
      const std::string& cluster_id, const std::vector<std::string>& statuses) override;
  StatusOr<std::vector<RecoveryRecord>> ListRecoveriesFinishedSince(const std::string& cluster_id,
                                                                    const std::string& status,
                                                                    double since) override;
  StatusOr<std::string> LatestRecoveryId(const std::string& cluster_id,
                                         const std::string& instance_id) override;
  StatusOr<std::vector<WrittenRecovery>> ListRecoveriesWrittenAfter(const std::string& cluster_id,
                                                                    int64_t after) override;
  StatusOr<JoinTokenRecord> GetJoinToken(const std::string& id) override;
  StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens() override;
  StatusOr<HostRecord> GetHost(const std::string& host_id) override;
  StatusOr<HostRecord> GetHostByMachineId(const std::string& machine_id) override;
  StatusOr<std::vector<HostRecord>> ListHosts(const std::string& pool) override;
  StatusOr<HostRecord> GetHostByInstanceId(const std::string& instance_id) override;
  StatusOr<std::vector<HostHistoryRecord>> ListHostHistory(const std::string& host_id) override;
  StatusOr<CertificateRecord> GetCertificate(const std::string& serial) override;
  StatusOr<std::vector<CertificateRecord>> ListCertificates(const std::string& host_id) override;

  Status PutCluster(const ClusterRecord& c) override;
  Status DeleteCluster(const std::string& id) override;
  Status RetireCluster(const DeletedClusterRecord& deleted) override;
  Status PurgeDeletedCluster(const std::string& id) override;
  Status PutGroup(const GroupRecord& g) override;
  Status DeleteGroup(const std::string& cluster_id, const std::string& name) override;
  Status PutNode(const NodeRecord& n) override;
  Status DeleteNode(const std::string& instance_id) override;
  Status PutAgent(const AgentRecord& a) override;
  StatusOr<int64_t> AddEvent(const EventRecord& e) override;
  Status PutAccessKey(const AccessKeyRecord& k) override;
  Status PutSetting(const std::string& key, const std::string& value) override;
  Status DeleteSetting(const std::string& key) override;
  Status PutRecovery(const RecoveryRecord& r) override;
  Status PutJoinToken(const JoinTokenRecord& t) override;
  Status DeleteJoinToken(const std::string& id) override;
  Status PutHost(const HostRecord& h) override;
  Status DeleteHost(const std::string& host_id) override;
  Status PutCertificate(const CertificateRecord& c) override;
  StatusOr<int64_t> AddHostHistory(const HostHistoryRecord& h) override;

 private:
  StatusOr<Statement> Prepare(const char* a, const char* b, const char* c) {
    return db_.Prepare(std::string(a) + b + c);
  }

  Database& db_;
};

}  // namespace hpod::store::internal
