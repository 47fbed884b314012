// SqliteTx's queries on join tokens, joined hosts and the client certificates
// hpodd signed for them, and the hosts' state history (records.h; schema v6, v7).

#include <string>

#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

using Json = nlohmann::json;

constexpr char kTokenCols[] =
    "id, secret_hash, pool, instance_id, created, expires, uses_left, revoked, description, "
    "instance_type";
constexpr char kHostCols[] =
    "host_id, machine_id, pool, instance_id, facts, joined, token_id, state, instance_type, "
    "cluster_id, group_name, state_reason, state_changed";
constexpr char kCertCols[] = "serial, host_id, not_after, issued, revoked";
constexpr char kHistoryCols[] =
    "seq, host_id, time, from_state, to_state, reason, cluster_id, group_name, instance_id";

JoinTokenRecord ReadToken(const Statement& s) {
  JoinTokenRecord t;
  t.id = s.Text(0);
  t.secret_hash = s.Text(1);
  t.pool = s.Text(2);
  t.instance_id = s.Text(3);
  t.created = s.Real(4);
  t.expires = s.Real(5);
  t.uses_left = s.Int(6);
  t.revoked = s.Int(7) != 0;
  t.description = s.Text(8);
  t.instance_type = s.Text(9);
  return t;
}

StatusOr<HostRecord> ReadHost(const Statement& s) {
  HostRecord h;
  h.host_id = s.Text(0);
  h.machine_id = s.Text(1);
  h.pool = s.Text(2);
  h.instance_id = s.Text(3);
  // The facts are the agent's report: a store file is data, so a bad one is an
  // error for this host, not an exception.
  h.facts = Json::parse(s.Text(4), nullptr, /*allow_exceptions=*/false);
  if (!h.facts.is_object()) return InternalError("host " + h.host_id + ": unreadable facts");
  h.joined = s.Real(5);
  h.token_id = s.Text(6);
  h.state = s.Text(7);
  h.instance_type = s.Text(8);
  h.cluster_id = s.Text(9);
  h.group_name = s.Text(10);
  h.state_reason = s.Text(11);
  h.state_changed = s.Real(12);
  return h;
}

StatusOr<std::vector<HostRecord>> AllHosts(Statement& s) {
  std::vector<HostRecord> out;
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    HPOD_ASSIGN_OR_RETURN(HostRecord h, ReadHost(s));
    out.push_back(std::move(h));
  }
}

StatusOr<HostRecord> OneHost(Statement& s, const std::string& what) {
  HPOD_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFoundError(what);
  return ReadHost(s);
}

CertificateRecord ReadCert(const Statement& s) {
  CertificateRecord c;
  c.serial = s.Text(0);
  c.host_id = s.Text(1);
  c.not_after = s.Real(2);
  c.issued = s.Real(3);
  c.revoked = s.Real(4);
  return c;
}

HostHistoryRecord ReadHistory(const Statement& s) {
  HostHistoryRecord h;
  h.seq = s.Int(0);
  h.host_id = s.Text(1);
  h.time = s.Real(2);
  h.from_state = s.Text(3);
  h.to_state = s.Text(4);
  h.reason = s.Text(5);
  h.cluster_id = s.Text(6);
  h.group_name = s.Text(7);
  h.instance_id = s.Text(8);
  return h;
}

}  // namespace

StatusOr<JoinTokenRecord> SqliteTx::GetJoinToken(const std::string& id) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kTokenCols, " FROM join_tokens WHERE id=?"));
  s.Bind(1, id);
  return One<JoinTokenRecord>(s, ReadToken, "join token " + id);
}

StatusOr<std::vector<JoinTokenRecord>> SqliteTx::ListJoinTokens() {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kTokenCols, " FROM join_tokens ORDER BY created, id"));
  return All<JoinTokenRecord>(s, ReadToken);
}

StatusOr<HostRecord> SqliteTx::GetHost(const std::string& host_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("SELECT ", kHostCols, " FROM hosts WHERE host_id=?"));
  s.Bind(1, host_id);
  return OneHost(s, "host " + host_id);
}

StatusOr<HostRecord> SqliteTx::GetHostByMachineId(const std::string& machine_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s, Prepare("SELECT ", kHostCols,
                           " FROM hosts WHERE machine_id=? ORDER BY joined DESC, host_id LIMIT 1"));
  s.Bind(1, machine_id);
  return OneHost(s, "host with machine id " + machine_id);
}

StatusOr<std::vector<HostRecord>> SqliteTx::ListHosts(const std::string& pool) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kHostCols,
                                " FROM hosts WHERE ?1 = '' OR pool = ?1 ORDER BY pool, host_id"));
  s.Bind(1, pool);
  return AllHosts(s);
}

StatusOr<HostRecord> SqliteTx::GetHostByInstanceId(const std::string& instance_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare("SELECT ", kHostCols,
              // Spelt as the partial index hosts_by_instance is, so SQLite uses it.
              " FROM hosts WHERE instance_id=?1 AND instance_id != '' "
              "ORDER BY joined DESC, host_id LIMIT 1"));
  s.Bind(1, instance_id);
  return OneHost(s, "host serving " + instance_id);
}

StatusOr<std::vector<HostHistoryRecord>> SqliteTx::ListHostHistory(const std::string& host_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare("SELECT ", kHistoryCols, " FROM host_history WHERE host_id=? ORDER BY seq"));
  s.Bind(1, host_id);
  return All<HostHistoryRecord>(s, ReadHistory);
}

StatusOr<CertificateRecord> SqliteTx::GetCertificate(const std::string& serial) {
  HPOD_ASSIGN_OR_RETURN(Statement s,
                        Prepare("SELECT ", kCertCols, " FROM certificates WHERE serial=?"));
  s.Bind(1, serial);
  return One<CertificateRecord>(s, ReadCert, "certificate " + serial);
}

StatusOr<std::vector<CertificateRecord>> SqliteTx::ListCertificates(const std::string& host_id) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s,
      Prepare("SELECT ", kCertCols, " FROM certificates WHERE host_id=? ORDER BY issued, serial"));
  s.Bind(1, host_id);
  return All<CertificateRecord>(s, ReadCert);
}

Status SqliteTx::PutJoinToken(const JoinTokenRecord& t) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO join_tokens(", kTokenCols,
                                             ") VALUES(?,?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, t.id).Bind(2, t.secret_hash).Bind(3, t.pool).Bind(4, t.instance_id);
  s.Bind(5, t.created).Bind(6, t.expires).Bind(7, t.uses_left);
  s.Bind(8, static_cast<int64_t>(t.revoked ? 1 : 0)).Bind(9, t.description);
  s.Bind(10, t.instance_type);
  return s.Run();
}

Status SqliteTx::DeleteJoinToken(const std::string& id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("DELETE FROM join_tokens WHERE id=?"));
  s.Bind(1, id);
  return s.Run();
}

Status SqliteTx::PutHost(const HostRecord& h) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO hosts(", kHostCols,
                                             ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  if (!h.facts.is_object()) {
    return InvalidArgumentError("host " + h.host_id + ": facts must be a JSON object");
  }
  s.Bind(1, h.host_id).Bind(2, h.machine_id).Bind(3, h.pool).Bind(4, h.instance_id);
  // `replace`: a string that is not UTF-8 (the facts come from another machine)
  // is stored with U+FFFD instead of throwing.
  s.Bind(5, h.facts.dump(-1, ' ', false, Json::error_handler_t::replace));
  s.Bind(6, h.joined).Bind(7, h.token_id).Bind(8, h.state).Bind(9, h.instance_type);
  s.Bind(10, h.cluster_id).Bind(11, h.group_name).Bind(12, h.state_reason);
  s.Bind(13, h.state_changed);
  return s.Run();
}

Status SqliteTx::DeleteHost(const std::string& host_id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("DELETE FROM hosts WHERE host_id=?"));
  s.Bind(1, host_id);
  return s.Run();
}

Status SqliteTx::PutCertificate(const CertificateRecord& c) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO certificates(", kCertCols,
                                             ") VALUES(?,?,?,?,?)"));
  s.Bind(1, c.serial).Bind(2, c.host_id).Bind(3, c.not_after).Bind(4, c.issued);
  s.Bind(5, c.revoked);
  return s.Run();
}

StatusOr<int64_t> SqliteTx::AddHostHistory(const HostHistoryRecord& h) {
  HPOD_ASSIGN_OR_RETURN(
      Statement s, db_.Prepare("INSERT INTO host_history(host_id, time, from_state, to_state, "
                               "reason, cluster_id, group_name, instance_id) "
                               "VALUES(?,?,?,?,?,?,?,?)"));
  s.Bind(1, h.host_id).Bind(2, h.time).Bind(3, h.from_state).Bind(4, h.to_state);
  s.Bind(5, h.reason).Bind(6, h.cluster_id).Bind(7, h.group_name).Bind(8, h.instance_id);
  HPOD_RETURN_IF_ERROR(s.Run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_.raw()));
}

}  // namespace hpod::store::internal
