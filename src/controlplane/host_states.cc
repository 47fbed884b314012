#include "hpod/controlplane/host_states.h"

#include <spdlog/spdlog.h>

namespace hpod::controlplane {

using api::HostState;

bool HostTransitionAllowed(HostState from, HostState to) {
  if (from == to) return true;
  if (to == HostState::kJoining || to == HostState::kRetired) return true;
  switch (from) {
    case HostState::kJoining:
      return to == HostState::kSpare || to == HostState::kAssigned;
    case HostState::kSpare:
      return to == HostState::kAssigned || to == HostState::kQuarantined ||
             to == HostState::kRebooting;
    case HostState::kAssigned:
      return to == HostState::kRebooting || to == HostState::kDraining ||
             to == HostState::kQuarantined;
    case HostState::kRebooting:
      return to == HostState::kAssigned || to == HostState::kSpare ||
             to == HostState::kDraining || to == HostState::kQuarantined;
    case HostState::kDraining:
      return to == HostState::kSpare || to == HostState::kQuarantined;
    case HostState::kQuarantined:
    case HostState::kRetired:
      return to == HostState::kSpare;  // a person released it
  }
  return false;
}

namespace {

Status Write(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
             const std::string& from, HostState to, const std::string& reason,
             const HostPlacement& placement) {
  const double now = clock.NowEpochSeconds();
  store::HostHistoryRecord h;
  h.host_id = host.host_id;
  h.time = now;
  h.from_state = from;
  h.to_state = api::NameString(to);
  h.reason = reason;
  // The row names the tenure it starts or ends: the one given, else the host's.
  h.cluster_id = placement.instance_id.empty() ? host.cluster_id : placement.cluster_id;
  h.group_name = placement.instance_id.empty() ? host.group_name : placement.group_name;
  h.instance_id = placement.instance_id.empty() ? host.instance_id : placement.instance_id;
  host.state = h.to_state;
  host.state_reason = reason;
  host.state_changed = now;
  if (to == HostState::kAssigned || to == HostState::kRebooting) {
    if (!placement.instance_id.empty()) {
      host.cluster_id = placement.cluster_id;
      host.group_name = placement.group_name;
      host.instance_id = placement.instance_id;
    }
  } else if (to != HostState::kJoining) {
    host.cluster_id.clear();
    host.group_name.clear();
    host.instance_id.clear();
  }
  HPOD_RETURN_IF_ERROR(tx.PutHost(host));
  HPOD_RETURN_IF_ERROR(tx.AddHostHistory(h).status());
  spdlog::info("host {}: {} -> {}: {}", host.host_id, from.empty() ? "(new)" : from, h.to_state,
               reason);
  return OkStatus();
}

}  // namespace

Status ChangeHostState(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
                       HostState to, const std::string& reason, const HostPlacement& placement) {
  std::optional<HostState> from = api::Parse<HostState>(host.state);
  if (from == to) return OkStatus();
  // A state this hpodd does not know (a newer one's row) is left alone.
  if (!from.has_value() || !HostTransitionAllowed(*from, to)) {
    return FailedPreconditionError("host " + host.host_id + " is " + host.state +
                                   ", and a host that is " + host.state + " cannot become " +
                                   api::NameString(to));
  }
  const std::string before = host.state;
  return Write(tx, clock, host, before, to, reason, placement);
}

Status RecordHostJoin(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
                      HostState to, const std::string& reason) {
  const std::string before = host.state;
  HostPlacement placement{host.cluster_id, host.group_name, host.instance_id};
  return Write(tx, clock, host, before, to, reason, placement);
}

int FailuresSince(const std::vector<store::HostHistoryRecord>& history, double since) {
  int n = 0;
  for (const store::HostHistoryRecord& h : history) {
    if (h.time >= since && api::Is(h.to_state, HostState::kQuarantined)) ++n;
  }
  return n;
}

Status QuarantineHost(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
                      const std::string& reason) {
  HPOD_RETURN_IF_ERROR(ChangeHostState(tx, clock, host, HostState::kQuarantined, reason));
  HPOD_ASSIGN_OR_RETURN(auto history, tx.ListHostHistory(host.host_id));
  const int failures =
      FailuresSince(history, clock.NowEpochSeconds() - kHostFailureWindowSeconds);
  if (failures < kHostFailuresToRetire) return OkStatus();
  return ChangeHostState(tx, clock, host, HostState::kRetired,
                         "failed " + std::to_string(failures) +
                             " times in 30 days; release it (hpod release-host) once repaired");
}

StatusOr<std::vector<std::string>> RevokeHostCertificates(store::WriteTx& tx, const Clock& clock,
                                                          store::HostRecord& host,
                                                          const std::string& reason) {
  std::vector<std::string> revoked;
  HPOD_ASSIGN_OR_RETURN(auto certs, tx.ListCertificates(host.host_id));
  for (store::CertificateRecord c : certs) {
    if (c.revoked > 0) continue;
    c.revoked = clock.NowEpochSeconds();
    revoked.push_back(c.serial);
    HPOD_RETURN_IF_ERROR(tx.PutCertificate(c));
  }
  HPOD_RETURN_IF_ERROR(ChangeHostState(tx, clock, host, HostState::kRetired, reason));
  return revoked;
}

StatusOr<RevokedHost> RevokeHost(store::Store& store, const Clock& clock,
                                 const std::string& host_id) {
  RevokedHost out;
  HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) -> Status {
    auto host = tx.GetHost(host_id);
    if (!host.ok()) {
      return host.status().code() == StatusCode::kNotFound
                 ? NotFoundError("host " + host_id + " not found")
                 : host.status();
    }
    out.before = *host;
    HPOD_ASSIGN_OR_RETURN(out.serials,
                          RevokeHostCertificates(tx, clock, *host,
                                                 "revoked: its certificates are refused; it may "
                                                 "come back only by joining again with a new "
                                                 "token"));
    return OkStatus();
  }));
  spdlog::warn("revoked host {} ({} certificate(s))", host_id, out.serials.size());
  return out;
}

Status EndHostTenure(store::WriteTx& tx, const Clock& clock, const std::string& instance_id,
                     const std::string& reason, bool failed) {
  if (instance_id.empty()) return OkStatus();
  auto host = tx.GetHostByInstanceId(instance_id);
  if (!host.ok()) {
    return host.status().code() == StatusCode::kNotFound ? OkStatus() : host.status();
  }
  // Only the serving states end here; a Quarantined or Retired host already left.
  auto state = api::Parse<HostState>(host->state);
  if (state != HostState::kAssigned && state != HostState::kRebooting) return OkStatus();
  bool one_launch = host->instance_type.empty();
  if (auto token = tx.GetJoinToken(host->token_id); token.ok()) {
    one_launch = token->instance_id == instance_id;
  }
  // A one-launch host's key was on the instance's disk, gone with it: nothing may
  // use its certificate any more.
  Status changed =
      one_launch ? RevokeHostCertificates(tx, clock, *host,
                                          reason + "; it joined for that instance only")
                       .status()
                 : failed ? QuarantineHost(tx, clock, *host, reason)
                          : ChangeHostState(tx, clock, *host, HostState::kDraining, reason);
  // The host's bookkeeping must never hold up the instance's (the caller deletes
  // the node's row in the same transaction): a refused change is logged, not
  // returned. A store error is returned, as it would fail the rest anyway.
  if (changed.code() == StatusCode::kFailedPrecondition) {
    spdlog::error("instance {} ended, but its host {} stays {}: {}", instance_id, host->host_id,
                  host->state, changed.message());
    return OkStatus();
  }
  return changed;
}

}  // namespace hpod::controlplane
