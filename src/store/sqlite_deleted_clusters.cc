// SqliteTx's queries on deleted clusters kept for their events (schema v9).

#include <string>

#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

constexpr char kCols[] = "id, name, arn, failure_message, creation_time, deleted";

DeletedClusterRecord ReadDeleted(const Statement& s) {
  DeletedClusterRecord r;
  r.id = s.Text(0);
  r.name = s.Text(1);
  r.arn = s.Text(2);
  r.failure_message = s.Text(3);
  r.creation_time = s.Real(4);
  r.deleted = s.Real(5);
  return r;
}

}  // namespace

StatusOr<DeletedClusterRecord> SqliteTx::GetDeletedCluster(const std::string& id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kCols, " FROM deleted_clusters WHERE id=?"));
  s.Bind(1, id);
  return One<DeletedClusterRecord>(s, ReadDeleted, "deleted cluster " + id);
}

StatusOr<DeletedClusterRecord> SqliteTx::GetDeletedClusterByName(const std::string& name) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s, Prepare("SELECT ", kCols,
                           " FROM deleted_clusters WHERE name=? ORDER BY deleted DESC LIMIT 1"));
  s.Bind(1, name);
  return One<DeletedClusterRecord>(s, ReadDeleted, "deleted cluster " + name);
}

StatusOr<std::vector<DeletedClusterRecord>> SqliteTx::ListDeletedClusters(double before) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare("SELECT ", kCols, " FROM deleted_clusters WHERE deleted < ? ORDER BY deleted, id"));
  s.Bind(1, before);
  return All<DeletedClusterRecord>(s, ReadDeleted);
}

Status SqliteTx::RetireCluster(const DeletedClusterRecord& r) {
  HPOD_RETURN_IF_ERROR(RemoveClusterRows(db_, r.id));
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO deleted_clusters(", kCols,
                                             ") VALUES(?,?,?,?,?,?)"));
  s.Bind(1, r.id).Bind(2, r.name).Bind(3, r.arn).Bind(4, r.failure_message);
  s.Bind(5, r.creation_time).Bind(6, r.deleted);
  return s.Run();
}

Status SqliteTx::PurgeDeletedCluster(const std::string& id) {
  for (const char* sql :
       {"DELETE FROM events WHERE cluster_id=?", "DELETE FROM deleted_clusters WHERE id=?"}) {
    HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare(sql));
    s.Bind(1, id);
    HPOD_RETURN_IF_ERROR(s.Run());
  }
  return OkStatus();
}

}  // namespace hpod::store::internal
