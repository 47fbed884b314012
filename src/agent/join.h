#pragma once

// A network agent's identity (PROTOCOL.md, "Network agents"): how a machine joins
// hpodd with a join token, where it keeps what it got, and how the certificate is
// renewed over the channel.
//
// <state_dir>/tls/ca.pem     hpodd's CA, trusted because its hash is the token's pin
// <state_dir>/tls/node.pem   the client certificate followed by its key (0600): one
//                            file, so that a renewal replaces both in one rename
// <state_dir>/join.json      {server, host_id, pool, instance_id, cluster_id}
//
// The key is made here and never leaves the machine; hpodd gets only a CSR.
//
// Thread contract: JoinHpodd and the loaders are free functions, safe from any
// thread for distinct state dirs. CertificateRenewal is thread-safe.

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "hpod/agent/agent_options.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::agent {

struct IdentityPaths {
  std::string ca;    // <state_dir>/tls/ca.pem
  std::string node;  // <state_dir>/tls/node.pem (certificate + key)
  std::string join;  // <state_dir>/join.json
};
IdentityPaths NodeIdentityPaths(const std::string& state_dir);

struct JoinedState {
  std::string server;  // https://HOST:PORT, as given to join
  std::string host_id;
  std::string pool;
  std::string instance_id;  // empty: a spare host
};

// The state a join left; kNotFound when the machine has not joined (no join.json
// or no certificate), kFailedPrecondition when the files are damaged.
StatusOr<JoinedState> LoadJoinedState(const std::string& state_dir);

struct JoinOptions {
  std::string server;  // https://HOST:PORT of hpodd's --agent-listen
  std::string token;   // hpodjoin1.<pin>.<id>.<secret>
  std::string state_dir;
  nlohmann::json facts;       // CollectMachineFacts
  std::string instance_type;  // --instance-type; empty: the token's
  std::chrono::milliseconds timeout{30000};
};

// Fetches hpodd's CA (over TLS it cannot verify yet) and refuses it unless its
// hash is the token's pin; makes a key; sends the CSR, the token and the facts
// (now verifying hpodd against the CA); writes the state. Every refusal is one
// line: the wrong pin (kPermissionDenied), hpodd's own refusal (its words,
// kPermissionDenied), an unreachable server or one that cannot take the join now
// (kUnavailable: HTTP 429 or 5xx, a timeout; worth trying again).
StatusOr<JoinedState> JoinHpodd(const JoinOptions& options);

// A pool host: holds `GET /agent/v1/host` open with its certificate,
// reconnecting with backoff, so that hpodd knows it is there, serves the
// instance hpodd assigns it (`assign`, PROTOCOL.md) as a tenure (tenure.h),
// reporting each change (`host_status`), and reboots when told (`reboot`),
// until `stopped()` is true (checked every second; returns OK, the tenure kept
// on disk for the next start) or hpodd refuses the certificate
// (kFailedPrecondition, one line: revoked, unknown).
struct PoolHostOptions {
  // The node agent's settings a tenure does not set (tests: fake programs).
  AgentOptions node_template;
  // What `reboot` runs (bash -c): systemd's reboot; a machine without systemd
  // (the test rig's init) names its own.
  std::string reboot_command = "systemctl reboot";
  // Where a machine run by systemd gets the drop-ins that hand its Slurm and
  // munge units to the node agent (tenure.h); empty: none (no systemd, tests).
  std::string systemd_unit_dir;
};
// A pool host, as above; `options` says how it reboots and runs its nodes.
Status RunSpareHost(const JoinedState& state, const std::string& state_dir,
                    const std::function<bool()>& stopped, const PoolHostOptions& options = {});

// Renewal at two thirds of the certificate's life (PROTOCOL.md,
// renew_certificate): Due makes a new key and the request once it is time (and
// again a minute later while no answer came); Accept checks the answer against
// that key and replaces node.pem.
class CertificateRenewal {
 public:
  CertificateRenewal(std::string node_pem, const Clock& clock);
  std::optional<api::agentproto::RenewCertificate> Due() EXCLUDES(mu_);
  Status Accept(const api::agentproto::Certificate& answer) EXCLUDES(mu_);

 private:
  const std::string node_pem_;
  const Clock& clock_;
  Mutex mu_;
  std::string pending_key_ GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> asked_ GUARDED_BY(mu_);
};

}  // namespace hpod::agent
