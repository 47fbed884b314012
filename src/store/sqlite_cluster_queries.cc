// SqliteTx's queries on clusters, instance groups and nodes.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>

#include "hpod/base/thread_annotations.h"
#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

// Specs parsed before, by their text. A spec changes only when its cluster or
// group is updated, yet every DescribeCluster read and parsed the cluster's and
// each group's (a tenth of its CPU); a copy of the parsed value costs half as
// much. At most kMaxSpecs texts; when full it starts afresh.
//
// Thread contract: thread-safe (the reader connections parse on their callers'
// threads).
class SpecCache {
 public:
  static constexpr size_t kMaxSpecs = 1024;
  // Specs longer than this are parsed each time: rare, and not worth the memory.
  static constexpr size_t kMaxText = 64 * 1024;

  nlohmann::json Parse(const std::string& text) {
    if (text.size() > kMaxText) return ParseText(text);
    std::shared_ptr<const nlohmann::json> kept;
    {
      MutexLock lock(mu_);
      if (auto it = specs_.find(text); it != specs_.end()) kept = it->second;
    }
    if (kept) return *kept;  // copied outside the lock: the other readers wait less
    auto parsed = std::make_shared<const nlohmann::json>(ParseText(text));
    MutexLock lock(mu_);
    if (specs_.size() >= kMaxSpecs) specs_.clear();
    specs_.emplace(text, parsed);
    return *parsed;
  }

 private:
  static nlohmann::json ParseText(const std::string& text) {
    // Specs are written by us from validated JSON; a parse failure means the file
    // was edited by hand. Surface it as an empty spec rather than crash.
    auto j = nlohmann::json::parse(text, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const nlohmann::json>> specs_ GUARDED_BY(mu_);
};

nlohmann::json ParseSpec(const std::string& text) {
  static SpecCache* const cache = new SpecCache();  // never destroyed: used until exit
  return cache->Parse(text);
}

constexpr char kClusterCols[] =
    "id, name, arn, status, failure_message, creation_time, spec, generation";
constexpr char kGroupCols[] =
    "cluster_id, name, position, spec, target_count, previous_target_count, status, deleting";
constexpr char kNodeCols[] =
    "instance_id, cluster_id, group_name, ordinal, status, message, launch_time, private_ip, "
    "hostname, logical_id, launched, remove, created_generation, attempt, not_before";

ClusterRecord ReadCluster(const Statement& s) {
  ClusterRecord c;
  c.id = s.Text(0);
  c.name = s.Text(1);
  c.arn = s.Text(2);
  c.status = s.Text(3);
  c.failure_message = s.Text(4);
  c.creation_time = s.Real(5);
  c.spec = ParseSpec(s.Text(6));
  c.generation = s.Int(7);
  return c;
}

GroupRecord ReadGroup(const Statement& s) {
  GroupRecord g;
  g.cluster_id = s.Text(0);
  g.name = s.Text(1);
  g.position = static_cast<int>(s.Int(2));
  g.spec = ParseSpec(s.Text(3));
  g.target_count = static_cast<int>(s.Int(4));
  g.previous_target_count = static_cast<int>(s.Int(5));
  g.status = s.Text(6);
  g.deleting = s.Int(7) != 0;
  return g;
}

NodeRecord ReadNode(const Statement& s) {
  NodeRecord n;
  n.instance_id = s.Text(0);
  n.cluster_id = s.Text(1);
  n.group_name = s.Text(2);
  n.ordinal = static_cast<int>(s.Int(3));
  n.status = s.Text(4);
  n.message = s.Text(5);
  n.launch_time = s.Real(6);
  n.private_ip = s.Text(7);
  n.hostname = s.Text(8);
  n.logical_id = s.Text(9);
  n.launched = s.Int(10) != 0;
  n.remove = s.Int(11) != 0;
  n.created_generation = s.Int(12);
  n.attempt = static_cast<int>(s.Int(13));
  n.not_before = s.Real(14);
  return n;
}

// Escapes LIKE wildcards so NameContains matches literally.
std::string LikeContains(const std::string& s) {
  std::string out = "%";
  for (char c : s) {
    if (c == '%' || c == '_' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "%";
}

// Keyset pagination shared by the list queries: rows strictly after
// (sort value, id) in the requested order. Names are trusted column names.
struct Keyset {
  const char* sort_column;  // text when sort_by_text, else a REAL column
  const char* id_column;
  bool sort_by_text;
  bool ascending;
  const std::optional<PageAfter>& after;

  // " AND (key, id) > (?p, ?p+1)" when paging, then the ORDER BY.
  std::string Sql(int first_param) const {
    std::string sql;
    const char* dir = ascending ? "ASC" : "DESC";
    if (after) {
      sql += std::string(" AND (") + sort_column + ", " + id_column + ") " +
             (ascending ? ">" : "<") + " (?" + std::to_string(first_param) + ", ?" +
             std::to_string(first_param + 1) + ")";
    }
    return sql + " ORDER BY " + sort_column + " " + dir + ", " + id_column + " " + dir;
  }
  void Bind(Statement& s, int first_param) const {
    if (!after) return;
    if (sort_by_text) {
      s.Bind(first_param, after->sort_value);
    } else {
      s.Bind(first_param, std::strtod(after->sort_value.c_str(), nullptr));
    }
    s.Bind(first_param + 1, after->id);
  }
};

}  // namespace

StatusOr<ClusterRecord> SqliteTx::GetCluster(const std::string& id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("SELECT ", kClusterCols, " FROM clusters WHERE id=?"));
  s.Bind(1, id);
  return One<ClusterRecord>(s, ReadCluster, "cluster " + id);
}

StatusOr<ClusterRecord> SqliteTx::GetClusterByName(const std::string& name) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kClusterCols, " FROM clusters WHERE name=?"));
  s.Bind(1, name);
  return One<ClusterRecord>(s, ReadCluster, "cluster " + name);
}

StatusOr<std::vector<ClusterRecord>> SqliteTx::ListClusters(const ClusterQuery& q) {
  const Keyset keyset{q.sort_by_name ? "name" : "creation_time", "id", q.sort_by_name, q.ascending,
                      q.after};
  std::string sql = std::string("SELECT ") + kClusterCols +
                    " FROM clusters WHERE (?1 IS NULL OR creation_time > ?1)"
                    " AND (?2 IS NULL OR creation_time < ?2)"
                    " AND (?3 = '' OR name LIKE ?4 ESCAPE '\\')" +
                    keyset.Sql(5) + " LIMIT ?7";
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare(sql));
  s.Bind(1, q.created_after).Bind(2, q.created_before).Bind(3, q.name_contains);
  s.Bind(4, LikeContains(q.name_contains));
  keyset.Bind(s, 5);
  s.Bind(7, q.limit);
  return All<ClusterRecord>(s, ReadCluster);
}

StatusOr<std::vector<std::string>> SqliteTx::ListClusterIds() {
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("SELECT id FROM clusters ORDER BY id"));
  return All<std::string>(s, [](const Statement& st) { return st.Text(0); });
}

StatusOr<std::vector<GroupRecord>> SqliteTx::ListGroups(const std::string& cluster_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kGroupCols, " FROM instance_groups WHERE cluster_id=?"));
  s.Bind(1, cluster_id);
  // Sorted here: a cluster has a few groups, and SQLite's ORDER BY (no index has
  // position) set up a sorter for them, allocations and all, at every read.
  HPOD_ASSIGN_OR_RETURN(std::vector<GroupRecord> groups, All<GroupRecord>(s, ReadGroup));
  std::stable_sort(groups.begin(), groups.end(), [](const GroupRecord& a, const GroupRecord& b) {
    return a.position < b.position;
  });
  return groups;
}

StatusOr<std::vector<NodeRecord>> SqliteTx::ListNodes(const std::string& cluster_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        db_.Prepare(std::string("SELECT ") + kNodeCols +
                                    " FROM nodes WHERE cluster_id=? ORDER BY group_name, ordinal"));
  s.Bind(1, cluster_id);
  return All<NodeRecord>(s, ReadNode);
}

StatusOr<std::vector<NodeSummary>> SqliteTx::ListNodeSummaries(const std::string& cluster_id) {
  // In nodes_by_group's order: no sort step.
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      db_.Prepare(
          "SELECT instance_id, group_name, status, hostname, private_ip, "
          "launched, remove FROM nodes WHERE cluster_id=? ORDER BY group_name, instance_id"));
  s.Bind(1, cluster_id);
  return All<NodeSummary>(s, [](const Statement& row) {
    NodeSummary n;
    n.instance_id = row.Text(0);
    n.group_name = row.Text(1);
    n.status = row.Text(2);
    n.hostname = row.Text(3);
    n.private_ip = row.Text(4);
    n.launched = row.Int(5) != 0;
    n.remove = row.Int(6) != 0;
    return n;
  });
}

StatusOr<std::map<std::string, int>> SqliteTx::CountRunningNodes(const std::string& cluster_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      db_.Prepare("SELECT group_name, n FROM running_counts WHERE cluster_id=? AND n > 0"));
  s.Bind(1, cluster_id);
  std::map<std::string, int> out;
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out[s.Text(0)] = static_cast<int>(s.Int(1));
  }
}

StatusOr<std::vector<NodeRecord>> SqliteTx::QueryNodes(const NodeQuery& q) {
  const Keyset keyset{q.sort_by_name ? "group_name" : "launch_time", "instance_id", q.sort_by_name,
                      q.ascending, q.after};
  std::string sql = std::string("SELECT ") + kNodeCols +
                    " FROM nodes WHERE cluster_id=?1"
                    " AND (?2 IS NULL OR launch_time > ?2)"
                    " AND (?3 IS NULL OR launch_time < ?3)"
                    " AND (?4 = '' OR group_name LIKE ?5 ESCAPE '\\')" +
                    keyset.Sql(6) + " LIMIT ?8";
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare(sql));
  s.Bind(1, q.cluster_id).Bind(2, q.launched_after).Bind(3, q.launched_before);
  s.Bind(4, q.group_contains).Bind(5, LikeContains(q.group_contains));
  keyset.Bind(s, 6);
  s.Bind(8, q.limit);
  return All<NodeRecord>(s, ReadNode);
}

StatusOr<NodeRecord> SqliteTx::GetNode(const std::string& cluster_id,
                                       const std::string& instance_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("SELECT ", kNodeCols,
                                             " FROM nodes WHERE cluster_id=? AND instance_id=?"));
  s.Bind(1, cluster_id).Bind(2, instance_id);
  return One<NodeRecord>(s, ReadNode, "node " + instance_id);
}

StatusOr<NodeRecord> SqliteTx::GetNodeById(const std::string& instance_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kNodeCols, " FROM nodes WHERE instance_id=?"));
  s.Bind(1, instance_id);
  return One<NodeRecord>(s, ReadNode, "node " + instance_id);
}

Status SqliteTx::PutCluster(const ClusterRecord& c) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      // Not INSERT OR REPLACE: that would resolve a clash on the UNIQUE name by
      // deleting the other cluster. A clash must fail instead.
      Prepare("INSERT INTO clusters(", kClusterCols,
              ") VALUES(?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET name=excluded.name, "
              "arn=excluded.arn, status=excluded.status, failure_message=excluded.failure_message, "
              "creation_time=excluded.creation_time, spec=excluded.spec, "
              "generation=excluded.generation"));
  s.Bind(1, c.id).Bind(2, c.name).Bind(3, c.arn).Bind(4, c.status).Bind(5, c.failure_message);
  s.Bind(6, c.creation_time).Bind(7, c.spec.dump()).Bind(8, c.generation);
  return s.Run();
}

Status SqliteTx::DeleteCluster(const std::string& id) {
  HPOD_RETURN_IF_ERROR(RemoveClusterRows(db_, id));
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("DELETE FROM events WHERE cluster_id=?"));
  s.Bind(1, id);
  return s.Run();
}

Status RemoveClusterRows(Database& db, const std::string& id) {
  for (const char* sql :
       {"DELETE FROM nodes WHERE cluster_id=?", "DELETE FROM node_agents WHERE cluster_id=?",
        "DELETE FROM recoveries WHERE cluster_id=?",
        "DELETE FROM running_counts WHERE cluster_id=?",
        "DELETE FROM instance_groups WHERE cluster_id=?",
        // Per-cluster settings (munge key, provisioning parameters) are keyed
        // "cluster/<id>/…"; ids are [a-z0-9], so no LIKE wildcard can hide in one.
        "DELETE FROM settings WHERE key LIKE 'cluster/' || ? || '/%'",
        "DELETE FROM clusters WHERE id=?"}) {
    HPOD_ASSIGN_OR_RETURN(Statement s, db.Prepare(sql));
    s.Bind(1, id);
    HPOD_RETURN_IF_ERROR(s.Run());
  }
  return OkStatus();
}

Status SqliteTx::PutGroup(const GroupRecord& g) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO instance_groups(", kGroupCols,
                                             ") VALUES(?,?,?,?,?,?,?,?)"));
  s.Bind(1, g.cluster_id).Bind(2, g.name).Bind(3, g.position).Bind(4, g.spec.dump());
  s.Bind(5, g.target_count).Bind(6, g.previous_target_count).Bind(7, g.status);
  s.Bind(8, static_cast<int64_t>(g.deleting));
  return s.Run();
}

Status SqliteTx::DeleteGroup(const std::string& cluster_id, const std::string& name) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        db_.Prepare("DELETE FROM instance_groups WHERE cluster_id=? AND name=?"));
  s.Bind(1, cluster_id).Bind(2, name);
  return s.Run();
}

Status SqliteTx::PutNode(const NodeRecord& n) {
  // An UPSERT, so the running_counts triggers see an UPDATE (see migration v3).
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare("INSERT INTO nodes(", kNodeCols,
              ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(instance_id) DO UPDATE SET "
              "cluster_id=excluded.cluster_id, group_name=excluded.group_name, "
              "ordinal=excluded.ordinal, status=excluded.status, message=excluded.message, "
              "launch_time=excluded.launch_time, private_ip=excluded.private_ip, "
              "hostname=excluded.hostname, logical_id=excluded.logical_id, "
              "launched=excluded.launched, remove=excluded.remove, "
              "created_generation=excluded.created_generation, attempt=excluded.attempt, "
              "not_before=excluded.not_before"));
  s.Bind(1, n.instance_id).Bind(2, n.cluster_id).Bind(3, n.group_name).Bind(4, n.ordinal);
  s.Bind(5, n.status).Bind(6, n.message).Bind(7, n.launch_time).Bind(8, n.private_ip);
  s.Bind(9, n.hostname).Bind(10, n.logical_id).Bind(11, static_cast<int64_t>(n.launched));
  s.Bind(12, static_cast<int64_t>(n.remove)).Bind(13, n.created_generation);
  s.Bind(14, static_cast<int64_t>(n.attempt)).Bind(15, n.not_before);
  return s.Run();
}

Status SqliteTx::DeleteNode(const std::string& instance_id) {
  for (const char* sql :
       {"DELETE FROM nodes WHERE instance_id=?", "DELETE FROM node_agents WHERE instance_id=?"}) {
    HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare(sql));
    s.Bind(1, instance_id);
    HPOD_RETURN_IF_ERROR(s.Run());
  }
  return OkStatus();
}

}  // namespace hpod::store::internal
