#include "hpod/controlplane/join_service.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <regex>

#include "hpod/api/instance_types.h"
#include "hpod/api/states.h"
#include "hpod/auth/join_token.h"
#include "hpod/base/crypto.h"
#include "hpod/controlplane/host_states.h"

namespace hpod::controlplane {
namespace {

namespace pki = auth::pki;

// Facts are what an agent says about its machine: kept as given, bounded.
constexpr size_t kMaxFactsBytes = 64 * 1024;

double Epoch(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// One answer for an unknown id and a wrong secret: a guesser learns nothing.
Status NotValid(const std::string& id) {
  return UnauthenticatedError("join token " + id +
                              " is not valid here (no such token, or a wrong secret)");
}

int64_t IntFact(const nlohmann::json& facts, const char* key) {
  auto it = facts.find(key);
  return it != facts.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// The instance type a pool host joins as: named, known, and fitting its facts.
Status CheckInstanceType(const std::string& type, const nlohmann::json& facts) {
  api::MachineSize size;
  size.cpus = IntFact(facts, "cpus");
  size.memory_bytes = IntFact(facts, "memory_bytes");
  auto gpus = facts.find("gpus");
  size.gpus = gpus != facts.end() && gpus->is_array() ? static_cast<int64_t>(gpus->size()) : 0;
  if (type.empty()) {
    std::string fit;
    for (const std::string& t : api::TypesThatFit(size, 4)) fit += (fit.empty() ? "" : ", ") + t;
    return InvalidArgumentError(
        "say which instance type this machine is: hpod-agent join --instance-type ml.... (or "
        "create the token with --instance-type); it fits " +
        (fit.empty() ? std::string("no HyperPod instance type") : fit));
  }
  auto info = api::LookupInstanceType(type);
  if (!info.has_value()) {
    return InvalidArgumentError("instance type " + type +
                                " is not a HyperPod instance type (ml.c5.large, ml.g5.12xlarge, ...)");
  }
  std::string misfit = api::MachineMisfit(*info, size);
  if (!misfit.empty()) {
    return InvalidArgumentError("this machine is not a " + type + ": " + misfit);
  }
  return OkStatus();
}

}  // namespace

std::string JoinTokenStatus(const store::JoinTokenRecord& t, double now) {
  if (t.revoked) return "Revoked";
  if (now >= t.expires) return "Expired";
  if (t.uses_left <= 0) return "UsedUp";
  return "Active";
}

JoinService::JoinService(store::Store& store, const Clock& clock, pki::Issued ca,
                         std::string ca_pin, JoinServiceOptions options,
                         std::function<bool(const store::HostRecord&)> is_live)
    : store_(store),
      clock_(clock),
      ca_(std::move(ca)),
      ca_pin_(std::move(ca_pin)),
      options_(options),
      is_live_(std::move(is_live)) {}

StatusOr<CreatedJoinToken> JoinService::CreateToken(const JoinTokenSpec& spec) {
  if (spec.ttl.count() < 1) return InvalidArgumentError("a join token's ttl must be at least 1 s");
  if (spec.uses < 1) return InvalidArgumentError("a join token must allow at least 1 use");
  auth::JoinToken token = auth::NewJoinToken(ca_pin_);
  CreatedJoinToken out;
  store::JoinTokenRecord& r = out.record;
  r.id = token.id;
  r.secret_hash = auth::HashJoinSecret(token.secret);
  r.pool = spec.pool.empty() ? "default" : spec.pool;
  r.instance_id = spec.instance_id;
  r.created = clock_.NowEpochSeconds();
  r.expires = r.created + static_cast<double>(spec.ttl.count());
  r.uses_left = spec.uses;
  r.description = spec.description;
  r.instance_type = spec.instance_type;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    // 32 random bits: a collision is rare, and must not replace a live token.
    if (tx.GetJoinToken(r.id).ok()) return AbortedError("join token id collision; try again");
    return tx.PutJoinToken(r);
  }));
  out.text = auth::FormatJoinToken(token);
  return out;
}

StatusOr<store::JoinTokenRecord> JoinService::RevokeToken(const std::string& id) {
  store::JoinTokenRecord t;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    auto got = tx.GetJoinToken(id);
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kNotFound) {
        return NotFoundError("join token " + id + " not found");
      }
      return got.status();
    }
    t = *got;
    if (t.revoked) return OkStatus();
    t.revoked = true;
    return tx.PutJoinToken(t);
  }));
  return t;
}

StatusOr<IssuedCertificate> JoinService::Sign(const std::string& csr_pem,
                                              const std::string& host_id) {
  HPOD_ASSIGN_OR_RETURN(
      std::string pem,
      pki::SignClientCertificate(ca_, csr_pem, host_id, options_.certificate_validity, clock_));
  HPOD_ASSIGN_OR_RETURN(pki::CertificateInfo info, pki::ParseCertificate(pem));
  return IssuedCertificate{pem, info.serial_hex, Epoch(info.not_after)};
}

StatusOr<JoinResult> JoinService::Join(const JoinRequest& request) {
  HPOD_ASSIGN_OR_RETURN(auth::JoinToken token, auth::ParseJoinToken(request.token));
  if (token.ca_pin != ca_pin_) {
    return UnauthenticatedError("the join token is for another hpodd: it pins CA " + token.ca_pin +
                                ", this hpodd's CA is " + ca_pin_);
  }
  if (!request.facts.is_object()) {
    return InvalidArgumentError("the machine's facts must be a JSON object");
  }
  if (request.facts.dump().size() > kMaxFactsBytes) {
    return InvalidArgumentError("the machine's facts are over 64 KiB");
  }
  static const std::regex kMachineId("^[0-9a-f]{32}$");
  auto mid = request.facts.find("machine_id");
  if (mid == request.facts.end() || !mid->is_string() ||
      !std::regex_match(mid->get<std::string>(), kMachineId)) {
    return InvalidArgumentError(
        "the machine's facts need machine_id: 32 lowercase hex characters, as /etc/machine-id "
        "holds (run systemd-machine-id-setup on a machine that has none)");
  }
  const std::string machine_id = *mid;
  const double now = clock_.NowEpochSeconds();

  JoinResult result;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    auto got = tx.GetJoinToken(token.id);
    if (!got.ok()) {
      return got.status().code() == StatusCode::kNotFound ? NotValid(token.id) : got.status();
    }
    store::JoinTokenRecord t = *got;
    if (!auth::JoinSecretMatches(token.secret, t.secret_hash)) return NotValid(token.id);
    if (t.revoked) return UnauthenticatedError("join token " + t.id + " was revoked");
    if (now >= t.expires) {
      return UnauthenticatedError("join token " + t.id + " expired at " + FormatUtc(t.expires) +
                                  "; create a new one with `hpod create-join-token`");
    }
    if (t.uses_left <= 0) {
      return UnauthenticatedError("join token " + t.id +
                                  " is used up; create a new one with `hpod create-join-token`");
    }
    // A launch's host is that instance's type by construction (and on one
    // machine shares its size with every other node); a pool host must fit.
    // The admin's token, when it names a type, is the word on it.
    if (!t.instance_type.empty() && !request.instance_type.empty() &&
        request.instance_type != t.instance_type) {
      return InvalidArgumentError("join token " + t.id + " is for " + t.instance_type +
                                  " hosts, and this join says " + request.instance_type +
                                  "; leave --instance-type out, or join with a token for " +
                                  request.instance_type);
    }
    std::string instance_type = request.instance_type.empty() ? t.instance_type
                                                              : request.instance_type;
    if (t.instance_id.empty()) {
      HPOD_RETURN_IF_ERROR(CheckInstanceType(instance_type, request.facts));
    }
    store::HostRecord host;
    // A Quarantined or Retired host that joins again (a reinstall, a script
    // reusing a token) stays so until a person releases it; only a revoked one
    // (no certificate left in force) starts over, since joining is its way back.
    bool keep_state = false;
    auto before = tx.GetHostByMachineId(machine_id);
    if (before.ok()) {
      if (is_live_ && is_live_(*before)) {
        return AlreadyExistsError("machine " + machine_id + " already joined as host " +
                                  before->host_id +
                                  " and its agent is connected; stop that agent, or revoke the "
                                  "host (hpod revoke-host --host-id " +
                                  before->host_id + "), before joining it again");
      }
      host = *before;
      auto was = api::Parse<api::HostState>(host.state);
      // A node it serves would be left without a machine: the node is replaced
      // first (its instance's end drains the host), then the machine joins again.
      if (was == api::HostState::kAssigned || was == api::HostState::kRebooting) {
        return FailedPreconditionError(
            "machine " + machine_id + " is host " + host.host_id + " and serves instance " +
            host.instance_id + "; replace that node first (hpod batch-replace-cluster-nodes), "
            "then join the machine again");
      }
      // Its old key is gone with the old agent: nothing may use it any more.
      HPOD_ASSIGN_OR_RETURN(auto certs, tx.ListCertificates(host.host_id));
      for (store::CertificateRecord c : certs) {
        if (c.revoked > 0) continue;
        keep_state = was == api::HostState::kQuarantined || was == api::HostState::kRetired;
        c.revoked = now;
        HPOD_RETURN_IF_ERROR(tx.PutCertificate(c));
      }
    } else if (before.status().code() != StatusCode::kNotFound) {
      return before.status();
    } else {
      host.host_id = "h-" + HexEncode(RandomBytes(8));
      if (tx.GetHost(host.host_id).ok()) return AbortedError("host id collision; try again");
    }
    host.machine_id = machine_id;
    host.pool = t.pool;
    host.instance_id = t.instance_id;
    host.cluster_id.clear();
    host.group_name.clear();
    if (!t.instance_id.empty()) {
      if (auto node = tx.GetNodeById(t.instance_id); node.ok()) {
        host.cluster_id = node->cluster_id;
        host.group_name = node->group_name;
      }
    }
    host.instance_type = t.instance_id.empty() ? instance_type : "";
    host.facts = request.facts;
    host.joined = now;
    host.token_id = t.id;
    HPOD_ASSIGN_OR_RETURN(result.certificate, Sign(request.csr_pem, host.host_id));
    store::CertificateRecord cert;
    cert.serial = result.certificate.serial;
    cert.host_id = host.host_id;
    cert.not_after = result.certificate.not_after;
    cert.issued = now;
    HPOD_RETURN_IF_ERROR(tx.PutCertificate(cert));
    if (keep_state && t.instance_id.empty()) {
      HPOD_RETURN_IF_ERROR(tx.PutHost(host));
      spdlog::warn("host {} joined again with token {} and stays {} ({}); release it with "
                   "hpod release-host",
                   host.host_id, t.id, host.state, host.state_reason);
    } else if (t.instance_id.empty()) {
      HPOD_RETURN_IF_ERROR(RecordHostJoin(tx, clock_, host, api::HostState::kJoining,
                                          "joined pool " + host.pool + " as " + instance_type +
                                              " with token " + t.id));
    } else {
      HPOD_RETURN_IF_ERROR(RecordHostJoin(tx, clock_, host, api::HostState::kAssigned,
                                          "joined for instance " + t.instance_id +
                                              " with token " + t.id));
    }
    --t.uses_left;
    HPOD_RETURN_IF_ERROR(tx.PutJoinToken(t));
    result.host = host;
    return OkStatus();
  });
  if (!s.ok()) {
    spdlog::warn("join refused: {}", s.message());
    return s;
  }
  spdlog::info("machine {} joined pool {} as host {}{} (token {}, certificate {})", machine_id,
               result.host.pool, result.host.host_id,
               result.host.instance_id.empty() ? "" : " for " + result.host.instance_id, token.id,
               result.certificate.serial);
  return result;
}

StatusOr<store::HostRecord> JoinService::Authenticate(const std::string& serial,
                                                      const std::string& common_name) {
  store::HostRecord host;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    auto cert = tx.GetCertificate(serial);
    if (!cert.ok()) {
      if (cert.status().code() != StatusCode::kNotFound) return cert.status();
      return UnauthenticatedError("certificate " + serial + " was not issued by this hpodd");
    }
    if (cert->revoked > 0) {
      return UnauthenticatedError("certificate " + serial + " of host " + cert->host_id +
                                  " was revoked at " + FormatUtc(cert->revoked) +
                                  "; join the machine again with a new token");
    }
    if (cert->host_id != common_name) {
      return UnauthenticatedError("certificate " + serial + " names " + common_name +
                                  ", but was issued to host " + cert->host_id);
    }
    auto h = tx.GetHost(cert->host_id);
    if (!h.ok()) {
      if (h.status().code() != StatusCode::kNotFound) return h.status();
      return UnauthenticatedError("host " + cert->host_id + " was removed");
    }
    host = *h;
    return OkStatus();
  }));
  return host;
}

StatusOr<IssuedCertificate> JoinService::Renew(const std::string& serial,
                                               const std::string& common_name,
                                               const std::string& csr_pem) {
  HPOD_ASSIGN_OR_RETURN(store::HostRecord host, Authenticate(serial, common_name));
  HPOD_ASSIGN_OR_RETURN(IssuedCertificate issued, Sign(csr_pem, host.host_id));
  store::CertificateRecord cert;
  cert.serial = issued.serial;
  cert.host_id = host.host_id;
  cert.not_after = issued.not_after;
  cert.issued = clock_.NowEpochSeconds();
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) { return tx.PutCertificate(cert); }));
  spdlog::info("renewed the certificate of host {}: {} replaces {}", host.host_id, issued.serial,
               serial);
  return issued;
}

Status JoinService::HostConnected(const std::string& host_id, const std::string& boot_id,
                                  const std::string& address) {
  return store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::HostRecord host, tx.GetHost(host_id));
    if (!address.empty() && host.facts.value("channel_address", nlohmann::json()) != nlohmann::json(address)) {
      host.facts["channel_address"] = address;
      HPOD_RETURN_IF_ERROR(tx.PutHost(host));
    }
    // Facts are as the agent gave them: boot_id may be anything but a string.
    auto known = host.facts.find("boot_id");
    const std::string before =
        known != host.facts.end() && known->is_string() ? known->get<std::string>() : "";
    if (!boot_id.empty() && boot_id.size() <= 64 && boot_id != before) {
      if (!before.empty()) {
        spdlog::info("host {} rebooted: boot id {} -> {}", host_id, before, boot_id);
      }
      host.facts["boot_id"] = boot_id;
      HPOD_RETURN_IF_ERROR(tx.PutHost(host));
    }
    if (!api::Is(host.state, api::HostState::kJoining)) return OkStatus();
    return ChangeHostState(tx, clock_, host, api::HostState::kSpare,
                           "its agent connected; it waits for work in pool " + host.pool);
  });
}

StatusOr<std::vector<std::string>> JoinService::RevokeHost(const std::string& host_id) {
  HPOD_ASSIGN_OR_RETURN(RevokedHost revoked, controlplane::RevokeHost(store_, clock_, host_id));
  return revoked.serials;
}

}  // namespace hpod::controlplane
