// Recovery records (records.h RecoveryRecord): keys in columns, the rest as one
// JSON body.
#include <algorithm>
#include <set>
#include <tuple>

#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

using Json = nlohmann::json;

Json Body(const RecoveryRecord& r) {
  return Json{{"group_name", r.group_name},
              {"replacement_id", r.replacement_id},
              {"hostname", r.hostname},
              {"private_ip", r.private_ip},
              {"action", r.action},
              {"source", r.source},
              {"check", r.check},
              {"reason", r.reason},
              {"node_dead", r.node_dead},
              {"automatic", r.automatic},
              {"phase", r.phase},
              {"message", r.message},
              {"finished", r.finished},
              {"timeline", r.timeline},
              {"stale_slurmd_start", r.stale_slurmd_start}};
}

// Typed reads of the body that never throw: a field of another type reads as
// its default (the body is hpod's own, but a store file is data).
std::string Str(const Json& b, const char* key) {
  auto it = b.find(key);
  return it != b.end() && it->is_string() ? it->get<std::string>() : std::string();
}
bool Bool(const Json& b, const char* key, bool otherwise) {
  auto it = b.find(key);
  return it != b.end() && it->is_boolean() ? it->get<bool>() : otherwise;
}
double Num(const Json& b, const char* key) {
  auto it = b.find(key);
  return it != b.end() && it->is_number() ? it->get<double>() : 0;
}

StatusOr<RecoveryRecord> ReadRecovery(const Statement& s) {
  RecoveryRecord r;
  r.recovery_id = s.Text(0);
  r.cluster_id = s.Text(1);
  r.instance_id = s.Text(2);
  r.status = s.Text(3);
  r.created = s.Real(4);
  Json b = Json::parse(s.Text(5), nullptr, /*allow_exceptions=*/false);
  if (!b.is_object()) return InternalError("recovery " + r.recovery_id + ": unreadable body");
  r.group_name = Str(b, "group_name");
  r.replacement_id = Str(b, "replacement_id");
  r.hostname = Str(b, "hostname");
  r.private_ip = Str(b, "private_ip");
  r.action = Str(b, "action");
  r.source = Str(b, "source");
  r.check = Str(b, "check");
  r.reason = Str(b, "reason");
  r.node_dead = Bool(b, "node_dead", false);
  r.automatic = Bool(b, "automatic", true);
  r.phase = Str(b, "phase");
  r.message = Str(b, "message");
  r.finished = Num(b, "finished");
  r.stale_slurmd_start = Str(b, "stale_slurmd_start");
  if (auto it = b.find("timeline"); it != b.end() && it->is_array()) r.timeline = *it;
  return r;
}

constexpr char kCols[] = "recovery_id, cluster_id, instance_id, status, created, body";

// Appends every row `s` yields (kCols, in order) to `out`.
Status AppendRecoveries(Statement& s, std::vector<RecoveryRecord>& out) {
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return OkStatus();
    HPOD_ASSIGN_OR_RETURN(RecoveryRecord r, ReadRecovery(s));
    out.push_back(std::move(r));
  }
}

// Oldest first: by creation time, then id.
void SortByAge(std::vector<RecoveryRecord>& list) {
  std::sort(list.begin(), list.end(), [](const RecoveryRecord& a, const RecoveryRecord& b) {
    return std::tie(a.created, a.recovery_id) < std::tie(b.created, b.recovery_id);
  });
}

}  // namespace

StatusOr<RecoveryRecord> SqliteTx::GetRecovery(const std::string& recovery_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kCols, " FROM recoveries WHERE recovery_id=?"));
  s.Bind(1, recovery_id);
  HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFoundError("recovery " + recovery_id);
  return ReadRecovery(s);
}

StatusOr<std::vector<RecoveryRecord>> SqliteTx::ListRecoveries(const std::string& cluster_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s, Prepare("SELECT ", kCols,
                           " FROM recoveries WHERE cluster_id=? ORDER BY created, recovery_id"));
  s.Bind(1, cluster_id);
  std::vector<RecoveryRecord> out;
  HPOD_RETURN_IF_ERROR(AppendRecoveries(s, out));
  return out;
}

StatusOr<std::vector<RecoveryRecord>> SqliteTx::ListRecoveriesWithStatus(
    const std::string& cluster_id, const std::vector<std::string>& statuses) {
  // One indexed range per status (recoveries_by_status), merged by age.
  std::vector<RecoveryRecord> out;
  for (const std::string& status : std::set<std::string>(statuses.begin(), statuses.end())) {
    HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("SELECT ", kCols,
                                               " FROM recoveries WHERE cluster_id=? AND status=? "
                                               "ORDER BY created, recovery_id"));
    s.Bind(1, cluster_id).Bind(2, status);
    HPOD_RETURN_IF_ERROR(AppendRecoveries(s, out));
  }
  SortByAge(out);
  return out;
}

StatusOr<std::vector<RecoveryRecord>> SqliteTx::ListRecoveriesFinishedSince(
    const std::string& cluster_id, const std::string& status, double since) {
  // One range of recoveries_by_finish; the order by age is the API's.
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("SELECT ", kCols,
                                             " FROM recoveries WHERE cluster_id=? AND status=? "
                                             "AND finished>=?"));
  s.Bind(1, cluster_id).Bind(2, status).Bind(3, since);
  std::vector<RecoveryRecord> out;
  HPOD_RETURN_IF_ERROR(AppendRecoveries(s, out));
  SortByAge(out);
  return out;
}

StatusOr<std::string> SqliteTx::LatestRecoveryId(const std::string& cluster_id,
                                                 const std::string& instance_id) {
  // The last entry of one range of recoveries_by_instance.
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT recovery_id", " FROM recoveries WHERE cluster_id=? AND ",
                                "instance_id=? ORDER BY created DESC, recovery_id DESC LIMIT 1"));
  s.Bind(1, cluster_id).Bind(2, instance_id);
  HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Text(0) : std::string();
}

StatusOr<std::vector<WrittenRecovery>> SqliteTx::ListRecoveriesWrittenAfter(
    const std::string& cluster_id, int64_t after) {
  // `+cluster_id` keeps SQLite off the by-cluster index: the rowid range is the
  // bounded part (the writes since `after`), a cluster's index entries are not.
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kCols,
                                ", rowid FROM recoveries WHERE rowid>? AND +cluster_id=? "
                                "ORDER BY rowid"));
  s.Bind(1, after).Bind(2, cluster_id);
  std::vector<WrittenRecovery> out;
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    HPOD_ASSIGN_OR_RETURN(RecoveryRecord r, ReadRecovery(s));
    out.push_back({s.Int(6), std::move(r)});
  }
  return out;
}

Status SqliteTx::PutRecovery(const RecoveryRecord& r) {
  // The rowid is the write position (ListRecoveriesWrittenAfter): one above every
  // row's, the record's own old one included. A plain REPLACE happens to pick the
  // new rowid before it deletes the old row, but SQLite does not promise that;
  // a rewrite that kept the highest rowid would go unseen by the metrics.
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare(
          "INSERT OR REPLACE INTO recoveries(rowid, ", kCols,
          ", finished) VALUES((SELECT IFNULL(MAX(rowid), 0) + 1 FROM recoveries),?,?,?,?,?,?,?)"));
  s.Bind(1, r.recovery_id).Bind(2, r.cluster_id).Bind(3, r.instance_id).Bind(4, r.status);
  s.Bind(5, r.created).Bind(6, Body(r).dump()).Bind(7, r.finished);
  return s.Run();
}

}  // namespace hpod::store::internal
