#pragma once

// How a machine becomes a host hpodd trusts (issue 25): join tokens, the join
// itself, and the client certificates that identify a host's agent from then on.
//
//   hpod create-join-token  →  CreateToken: a token row (the secret's hash only)
//   hpod-agent join         →  GET /join/v1/ca (the agent checks the token's pin),
//                              POST /join/v1/join → Join: token checks, machine
//                              checks, the CSR signed with CN = the host id
//   the agent's channel     →  Authenticate: the TLS layer verified the client
//                              certificate against the CA and its dates; this
//                              checks that hpodd issued that serial, did not
//                              revoke it, and that its host still exists
//   renewal                 →  Renew, over the authenticated channel
//
// A node never proves itself with a shared secret it could have been handed: the
// token is spent at the join (its uses are counted in the same transaction that
// records the host), and the key the certificate binds was made on the machine.
//
// Thread contract: thread-safe; each call is one store transaction (plus, for
// Join and Renew, one signature with the CA key held in memory).

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/auth/pki.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct JoinServiceOptions {
  // Lifetime of a host's client certificate. Agents renew at two thirds of it.
  std::chrono::seconds certificate_validity{std::chrono::hours(24 * 7)};
};

struct JoinTokenSpec {
  std::string pool = "default";
  std::chrono::seconds ttl{3600};
  int64_t uses = 1;
  std::string description;
  // Set when the control plane mints a token for one launch: the host that joins
  // with it becomes this node.
  std::string instance_id;
  // The instance type of the hosts that join with it, unless their agent names
  // one (`hpod-agent join --instance-type`); empty: the agent must.
  std::string instance_type;
};

struct CreatedJoinToken {
  std::string text;  // what the person pastes; the secret is in it and nowhere else
  store::JoinTokenRecord record;
};

struct JoinRequest {
  std::string token;                                // the pasted text
  std::string csr_pem;                              // made on the machine with its own key
  nlohmann::json facts = nlohmann::json::object();  // machine_id required
  std::string instance_type;  // as the person joining it declared; may be empty
};

struct IssuedCertificate {
  std::string certificate_pem;
  std::string serial;
  double not_after = 0;  // epoch seconds
};

struct JoinResult {
  store::HostRecord host;
  IssuedCertificate certificate;
};

// "Active", "Expired", "UsedUp" or "Revoked" at `now` (epoch seconds).
std::string JoinTokenStatus(const store::JoinTokenRecord& t, double now);

class JoinService {
 public:
  // `ca` must hold the CA's key. `is_live` says whether a host's agent is
  // connected now (a machine whose agent is connected may not join again).
  JoinService(store::Store& store, const Clock& clock, auth::pki::Issued ca, std::string ca_pin,
              JoinServiceOptions options, std::function<bool(const store::HostRecord&)> is_live);

  const std::string& ca_pem() const { return ca_.cert_pem; }
  const std::string& ca_pin() const { return ca_pin_; }

  // kInvalidArgument for a ttl or uses below 1.
  StatusOr<CreatedJoinToken> CreateToken(const JoinTokenSpec& spec);
  // Idempotent; kNotFound for an unknown id.
  StatusOr<store::JoinTokenRecord> RevokeToken(const std::string& id);

  // kUnauthenticated (one line, never the secret) for a token of another CA, an
  // unknown id or wrong secret, a revoked, expired or used-up token;
  // kAlreadyExists for a machine id whose host's agent is connected;
  // kInvalidArgument for facts without a machine_id, a CSR that does not verify,
  // a pool join without an instance type (the request's, else the token's), an
  // unknown one, or one the machine's facts do not fit (the message says what
  // differs). A refused join takes no use of the token.
  // A host joining a pool is Joining until its agent connects (HostConnected);
  // one joining for a launch is Assigned to that instance at once.
  // A machine that joins again (its agent is gone) keeps its host id and its
  // history; the certificates issued to it before are revoked, since its old key
  // is gone. It is refused (kFailedPrecondition) while it serves an instance; a
  // Quarantined or Retired one stays so (a person releases it), unless it was
  // revoked, whose way back this is. The token's instance type, when it names
  // one, must be the request's if that names one too.
  StatusOr<JoinResult> Join(const JoinRequest& request);

  // A host's agent holds its channel: a Joining host becomes Spare, and the
  // machine's current boot id (empty: not reported) is kept in its facts, so a
  // reboot shows, with the address its channel came from (`address`, empty: not
  // known) as facts.channel_address: the address other nodes reach it at when
  // it serves a node. Idempotent.
  Status HostConnected(const std::string& host_id, const std::string& boot_id = "",
                       const std::string& address = "");

  // The host a verified client certificate belongs to. kUnauthenticated, one
  // line: a serial hpodd never issued, a revoked one, a CN that is not the
  // serial's host, a host that was removed.
  StatusOr<store::HostRecord> Authenticate(const std::string& serial,
                                           const std::string& common_name);

  // A new certificate for the host behind `serial` (Authenticate's checks first).
  StatusOr<IssuedCertificate> Renew(const std::string& serial, const std::string& common_name,
                                    const std::string& csr_pem);

  // Revokes every certificate of the host (its agent is refused from its next
  // connection on; the caller closes the one open now) and retires it.
  // kNotFound for an unknown host. Returns the serials it revoked now.
  StatusOr<std::vector<std::string>> RevokeHost(const std::string& host_id);

 private:
  StatusOr<IssuedCertificate> Sign(const std::string& csr_pem, const std::string& host_id);

  store::Store& store_;
  const Clock& clock_;
  const auth::pki::Issued ca_;
  const std::string ca_pin_;
  const JoinServiceOptions options_;
  const std::function<bool(const store::HostRecord&)> is_live_;
};

}  // namespace hpod::controlplane
