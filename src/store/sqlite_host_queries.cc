// SqliteTx's queries on join tokens, joined hosts and the client certificates
// hpodd signed for them (records.h; schema v6).

#include <string>

#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store::internal {
namespace {

using Json = nlohmann::json;

constexpr char kTokenCols[] =
    "id, secret_hash, pool, instance_id, created, expires, uses_left, revoked, description";
constexpr char kHostCols[] =
    "host_id, machine_id, pool, instance_id, facts, joined, token_id, state";
constexpr char kCertCols[] = "serial, host_id, not_after, issued, revoked";

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
                                             ") VALUES(?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, t.id).Bind(2, t.secret_hash).Bind(3, t.pool).Bind(4, t.instance_id);
  s.Bind(5, t.created).Bind(6, t.expires).Bind(7, t.uses_left);
  s.Bind(8, static_cast<int64_t>(t.revoked ? 1 : 0)).Bind(9, t.description);
  return s.Run();
}

Status SqliteTx::DeleteJoinToken(const std::string& id) {
  HPOD_ASSIGN_OR_RETURN(Statement s, db_.Prepare("DELETE FROM join_tokens WHERE id=?"));
  s.Bind(1, id);
  return s.Run();
}

Status SqliteTx::PutHost(const HostRecord& h) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare("INSERT OR REPLACE INTO hosts(", kHostCols,
                                             ") VALUES(?,?,?,?,?,?,?,?)"));
  if (!h.facts.is_object()) {
    return InvalidArgumentError("host " + h.host_id + ": facts must be a JSON object");
  }
  s.Bind(1, h.host_id).Bind(2, h.machine_id).Bind(3, h.pool).Bind(4, h.instance_id);
  // `replace`: a string that is not UTF-8 (the facts come from another machine)
  // is stored with U+FFFD instead of throwing.
  s.Bind(5, h.facts.dump(-1, ' ', false, Json::error_handler_t::replace));
  s.Bind(6, h.joined).Bind(7, h.token_id).Bind(8, h.state);
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

}  // namespace hpod::store::internal
