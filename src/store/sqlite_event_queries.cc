// SqliteTx's queries on events, node agents, access keys and settings.

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

constexpr char kAgentCols[] =
    "instance_id, cluster_id, credential_hash, lifecycle_state, lifecycle_message, agent_version, "
    "registered_time";
constexpr char kEventCols[] =
    "seq, event_id, cluster_id, cluster_name, cluster_arn, group_name, instance_id, "
    "resource_type, time, level, description";

AgentRecord ReadAgent(const Statement& s) {
  AgentRecord a;
  a.instance_id = s.Text(0);
  a.cluster_id = s.Text(1);
  a.credential_hash = s.Text(2);
  a.lifecycle_state = s.Text(3);
  a.lifecycle_message = s.Text(4);
  a.agent_version = s.Text(5);
  a.registered_time = s.Real(6);
  return a;
}

EventRecord ReadEvent(const Statement& s) {
  EventRecord e;
  e.seq = s.Int(0);
  e.event_id = s.Text(1);
  e.cluster_id = s.Text(2);
  e.cluster_name = s.Text(3);
  e.cluster_arn = s.Text(4);
  e.group_name = s.Text(5);
  e.instance_id = s.Text(6);
  e.resource_type = s.Text(7);
  e.time = s.Real(8);
  e.level = s.Text(9);
  e.description = s.Text(10);
  return e;
}

std::string RoleName(Role r) { return r == Role::kAdmin ? "admin" : "user"; }

AccessKeyRecord ReadKey(const Statement& s) {
  AccessKeyRecord k;
  k.access_key_id = s.Text(0);
  k.secret_access_key = s.Text(1);
  k.role = s.Text(2) == "admin" ? Role::kAdmin : Role::kUser;
  k.created = s.Real(3);
  k.description = s.Text(4);
  return k;
}

}  // namespace

StatusOr<std::vector<EventRecord>> SqliteTx::QueryEvents(const EventQuery& q) {
  std::string sql = std::string("SELECT ") + kEventCols +
                    " FROM events WHERE cluster_id=?1"
                    " AND (?2 = '' OR group_name = ?2)"
                    " AND (?3 = '' OR instance_id = ?3)"
                    " AND (?4 = '' OR resource_type = ?4)"
                    " AND (?5 IS NULL OR time > ?5)"
                    " AND (?6 IS NULL OR time < ?6)";
  if (q.after_seq) sql += q.ascending ? " AND seq > ?7" : " AND seq < ?7";
  sql += q.ascending ? " ORDER BY seq ASC" : " ORDER BY seq DESC";
  sql += " LIMIT ?8";
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare(sql));
  s.Bind(1, q.cluster_id).Bind(2, q.group_name).Bind(3, q.instance_id).Bind(4, q.resource_type);
  s.Bind(5, q.after_time).Bind(6, q.before_time);
  if (q.after_seq) s.Bind(7, *q.after_seq);
  s.Bind(8, q.limit);
  return All<EventRecord>(s, ReadEvent);
}

StatusOr<EventRecord> SqliteTx::GetEvent(const std::string& cluster_id,
                                         const std::string& event_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("SELECT ", kEventCols,
                                             " FROM events WHERE cluster_id=? AND event_id=?"));
  s.Bind(1, cluster_id).Bind(2, event_id);
  return One<EventRecord>(s, ReadEvent, "event " + event_id);
}

StatusOr<AccessKeyRecord> SqliteTx::GetAccessKey(const std::string& access_key_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      db_.Prepare("SELECT access_key_id, secret, role, created, description FROM access_keys "
                  "WHERE access_key_id=?"));
  s.Bind(1, access_key_id);
  return One<AccessKeyRecord>(s, ReadKey, "access key");
}

StatusOr<AgentRecord> SqliteTx::GetAgent(const std::string& instance_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kAgentCols, " FROM node_agents WHERE instance_id=?"));
  s.Bind(1, instance_id);
  return One<AgentRecord>(s, ReadAgent, "agent of " + instance_id);
}

StatusOr<std::vector<AgentRecord>> SqliteTx::ListAgents(const std::string& cluster_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare("SELECT ", kAgentCols, " FROM node_agents WHERE cluster_id=? ORDER BY instance_id"));
  s.Bind(1, cluster_id);
  return All<AgentRecord>(s, ReadAgent);
}

StatusOr<std::vector<AccessKeyRecord>> SqliteTx::ListAccessKeys() {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        db_.Prepare("SELECT access_key_id, secret, role, created, description "
                                    "FROM access_keys ORDER BY created"));
  return All<AccessKeyRecord>(s, ReadKey);
}

StatusOr<std::string> SqliteTx::GetSetting(const std::string& key) {
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("SELECT value FROM settings WHERE key=?"));
  s.Bind(1, key);
  return One<std::string>(
      s, [](const Statement& st) { return st.Text(0); }, "setting " + key);
}

StatusOr<std::map<std::string, std::string>> SqliteTx::ListSettings(const std::string& prefix) {
  // A range on the primary key, not LIKE: the prefix may hold '%' or '_'. Both
  // ends bound it: with the lower one alone, SQLite walked every key after the
  // prefix (a cluster's group images, before its 10,000 nodes' software records,
  // at every DescribeCluster). Keys compare bytewise, so those with the prefix
  // are those from it up to, not including, its successor: the prefix with its
  // last byte below 0xff raised by one and what follows dropped (none for a
  // prefix of only 0xff bytes: every later key then has it).
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      db_.Prepare(end.empty() ? "SELECT key, value FROM settings WHERE key >= ? ORDER BY key"
                              : "SELECT key, value FROM settings WHERE key >= ? AND key < ? "
                                "ORDER BY key"));
  s.Bind(1, prefix);
  if (!end.empty()) s.Bind(2, end);
  HPOD_ASSIGN_OR_RETURN(auto rows,
                        (All<std::pair<std::string, std::string>>(s, [](const Statement& st) {
                          return std::make_pair(st.Text(0), st.Text(1));
                        })));
  return std::map<std::string, std::string>(rows.begin(), rows.end());
}

StatusOr<std::map<std::string, std::string>> SqliteTx::GetSettings(
    const std::vector<std::string>& keys) {
  std::map<std::string, std::string> out;
  if (keys.empty()) return out;
  // One statement text whatever the count (so the statement cache keeps it): the
  // keys travel as one JSON array.
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("SELECT key, value FROM settings WHERE key IN "
                                                 "(SELECT value FROM json_each(?))"));
  std::string array = "[";
  for (const auto& key : keys) {
    if (array.size() > 1) array.push_back(',');
    // Keys are ids and slashes: quoted as they are, without building a JSON value
    // of them (a third of this read's time); any other text is escaped.
    const bool plain = std::all_of(key.begin(), key.end(), [](char c) {
      return c >= 0x20 && c != '"' && c != '\\' && static_cast<unsigned char>(c) < 0x80;
    });
    if (plain) {
      array.append(1, '"').append(key).append(1, '"');
    } else {
      array.append(nlohmann::json(key).dump());
    }
  }
  array.push_back(']');
  s.Bind(1, array);
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.emplace(s.Text(0), s.Text(1));
  }
}

Status SqliteTx::PutAgent(const AgentRecord& a) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO node_agents(", kAgentCols,
                                             ") VALUES(?,?,?,?,?,?,?)"));
  s.Bind(1, a.instance_id).Bind(2, a.cluster_id).Bind(3, a.credential_hash);
  s.Bind(4, a.lifecycle_state).Bind(5, a.lifecycle_message).Bind(6, a.agent_version);
  s.Bind(7, a.registered_time);
  return s.Run();
}

StatusOr<int64_t> SqliteTx::AddEvent(const EventRecord& e) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      db_.Prepare("INSERT INTO events(event_id, cluster_id, cluster_name, cluster_arn, "
                  "group_name, instance_id, resource_type, time, level, description) "
                  "VALUES(?,?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, e.event_id).Bind(2, e.cluster_id).Bind(3, e.cluster_name).Bind(4, e.cluster_arn);
  s.Bind(5, e.group_name).Bind(6, e.instance_id).Bind(7, e.resource_type).Bind(8, e.time);
  s.Bind(9, e.level).Bind(10, e.description);
  HPOD_RETURN_IF_ERROR(s.Run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_.raw()));
}

Status SqliteTx::PutAccessKey(const AccessKeyRecord& k) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      db_.Prepare("INSERT OR REPLACE INTO access_keys(access_key_id, secret, role, created, "
                  "description) VALUES(?,?,?,?,?)"));
  s.Bind(1, k.access_key_id).Bind(2, k.secret_access_key).Bind(3, RoleName(k.role));
  s.Bind(4, k.created).Bind(5, k.description);
  return s.Run();
}

Status SqliteTx::PutSetting(const std::string& key, const std::string& value) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        db_.Prepare("INSERT OR REPLACE INTO settings(key, value) VALUES(?,?)"));
  s.Bind(1, key).Bind(2, value);
  return s.Run();
}

Status SqliteTx::DeleteSetting(const std::string& key) {
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("DELETE FROM settings WHERE key=?"));
  s.Bind(1, key);
  return s.Run();
}

}  // namespace hpod::store::internal
