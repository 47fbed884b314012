#pragma once

// `hpodd init` and key management: creates the data dir and the store, mints the
// first admin access key, and writes it to an AWS-style credentials/config profile
// so `aws --profile hpod` and `hpod` work at once; creates GET /metrics's token
// (<data_dir>/metrics-token) and hpodd's TLS files (<data_dir>/tls: the CA that
// signs the certificates of hosts joining over the network, and hpodd's server
// certificate; issue 25). Idempotent: a second init reuses the existing store,
// first admin key, token and CA, and re-issues the server certificate only when
// it is missing, unusable, near its end, or lacks a name it should carry.
//
// Thread contract: free functions; run before the daemon starts (they open the
// store themselves).

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// The CA lives 10 years: replacing it means every joined host must join again.
inline constexpr std::chrono::seconds kCaValidity{10 * 365 * 24 * 3600};
// The server certificate lives 1 year: a new one costs only a restart of hpodd
// (`hpodd rotate-certs`), and `hpodd init` renews it within kServerCertRenewWithin
// of its end.
inline constexpr std::chrono::seconds kServerCertValidity{365 * 24 * 3600};
inline constexpr std::chrono::seconds kServerCertRenewWithin{30 * 24 * 3600};

// hpodd's TLS files, all in <data_dir>/tls (mode 0700, as the data dir).
struct TlsPaths {
  std::string dir;
  std::string ca_cert;      // ca.pem, 0644: what agents and clients trust
  std::string ca_key;       // ca.key, 0600: never leaves this machine
  std::string server_cert;  // server.pem, 0644
  std::string server_key;   // server.key, 0600
};
TlsPaths TlsFiles(const std::string& data_dir);

// The names hpodd's server certificate carries for a listen address (the
// ADDRESS of --listen, brackets removed) and the --tls-name values, in this
// order, without duplicates: the address itself when it is a specific one, plus
// "localhost" when it is a loopback address (the name people and scripts type
// for it; "::1" is not added for 127.0.0.1, where nothing listens). A wildcard
// address (0.0.0.0, ::) names no one host: it gives this machine's host name,
// "localhost" and 127.0.0.1 (and ::1 for ::); agents on other machines then need
// a --tls-name for the address they dial. Then each tls_name as given (an IP
// literal becomes an IP SAN, anything else a DNS SAN).
std::vector<std::string> ServerCertificateNames(const std::string& listen_address,
                                                const std::vector<std::string>& tls_names);

// What EnsureTls / RotateServerCertificate found and did.
struct TlsResult {
  TlsPaths paths;
  std::string ca_pin;  // pki::CaPin of ca.pem: what join tokens carry
  bool ca_created = false;
  std::vector<std::string> server_names;  // every name the server certificate now carries
  std::string server_serial;              // its serial, lowercase hex
  bool server_issued = false;             // a new server certificate (and key) was written
  // One line per thing done beyond keeping what was there ("server certificate
  // re-issued: it does not cover hpodd.example"), for init to print.
  std::vector<std::string> changes;
};

// Creates what is missing in <data_dir>/tls: a CA when there is none (a lost
// ca.pem is re-made from ca.key, so what that key signed stays valid), and a
// server certificate for `names` when there is none or the present one is
// unreadable, does not match server.key, does not verify against the CA, ends
// within kServerCertRenewWithin, or lacks one of `names` — the new one then
// carries `names` and the old one's names too. Files are written atomically, keys
// before certificates. kFailedPrecondition when ca.pem exists without ca.key or
// with another key, or the CA has expired (the message says what to do);
// kInvalidArgument for a name that is neither an IP literal nor a DNS name.
StatusOr<TlsResult> EnsureTls(const std::string& data_dir, const std::vector<std::string>& names,
                              const Clock& clock);

// `hpodd rotate-certs`: a new server certificate with a new key from the
// existing CA, carrying `names` and the present certificate's names. The serving
// hpodd reads its certificate at start: it serves the new one once restarted.
// kFailedPrecondition when there is no usable CA (run `hpodd init`).
StatusOr<TlsResult> RotateServerCertificate(const std::string& data_dir,
                                            const std::vector<std::string>& names,
                                            const Clock& clock);

struct InitOptions {
  std::string data_dir;
  std::string region = "us-west-2";
  // Written as the profile's endpoint_url (botocore and hpod read it). An
  // https:// one also gets `ca_bundle = <data_dir>/tls/ca.pem`.
  std::string endpoint_url = "http://127.0.0.1:8450";
  // The ADDRESS of --listen and the --tls-name values: the server certificate's
  // names (ServerCertificateNames).
  std::string listen_address = "127.0.0.1";
  std::vector<std::string> tls_names;
  std::string profile = "hpod";
  // Where credentials/config go; empty = $HOME/.aws. Empty profile name = skip.
  std::string aws_dir;
};

struct InitResult {
  std::string access_key_id;
  bool created = false;  // false when the data dir was already initialized
  std::string credentials_file;
  std::string config_file;
  // GET /metrics's bearer token (metrics.h), created if missing.
  std::string metrics_token_file;
  TlsResult tls;
};

StatusOr<InitResult> InitDataDir(const InitOptions& options, const Clock& clock);

// Mints a key ("HPOD" + 16 [A-Z0-9], 40-character secret) and stores it.
StatusOr<store::AccessKeyRecord> CreateAccessKey(store::Store& store, store::Role role,
                                                 const std::string& description,
                                                 const Clock& clock);

// Sets `section` keys in an INI file, keeping every other section and line,
// creating the file (mode 0600) if needed.
Status UpdateIniSection(const std::string& path, const std::string& section,
                        const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace hpod::controlplane
