#include "hpod/controlplane/api_tls.h"

#include <arpa/inet.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/auth/pki.h"
#include "hpod/controlplane/init.h"

namespace hpod::controlplane {
namespace {

StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError(path + " is missing");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool IsWildcard(const std::string& address) { return address == "0.0.0.0" || address == "::"; }

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  if (address == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, address.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

StatusOr<http::TlsServerOptions> ApiTlsOptions(const std::string& data_dir,
                                               const std::string& address, bool force,
                                               const Clock& clock) {
  http::TlsServerOptions tls;
  if (!force && IsLoopbackAddress(address)) return tls;
  const TlsPaths paths = TlsFiles(data_dir);
  const std::string why =
      IsLoopbackAddress(address)
          ? "--tls was given"
          : "hpodd speaks only TLS on an address other than loopback, such as " + address;
  const std::string fix = "run `hpodd init --data-dir " + data_dir + " --listen " +
                          (address.find(':') != std::string::npos ? "[" + address + "]" : address) +
                          ":PORT` (it keeps what exists and adds what is missing)";
  for (const std::string& f : {paths.ca_cert, paths.server_cert, paths.server_key}) {
    if (!std::filesystem::exists(f)) {
      return FailedPreconditionError("cannot serve TLS (" + why + "): " + f + " is missing; " +
                                     fix);
    }
  }
  HPOD_ASSIGN_OR_RETURN(std::string ca, ReadPem(paths.ca_cert));
  HPOD_ASSIGN_OR_RETURN(std::string cert, ReadPem(paths.server_cert));
  HPOD_ASSIGN_OR_RETURN(std::string key, ReadPem(paths.server_key));
  if (Status s = auth::pki::VerifyCertificate(ca, cert, clock); !s.ok()) {
    return FailedPreconditionError("cannot serve TLS: " + paths.server_cert +
                                   " does not verify against " + paths.ca_cert + " (" +
                                   std::string(s.message()) +
                                   "); run `hpodd rotate-certs --data-dir " + data_dir + "`");
  }
  if (Status s = auth::pki::KeyMatchesCertificate(key, cert); !s.ok()) {
    return FailedPreconditionError("cannot serve TLS: " + paths.server_key + " is not the key of " +
                                   paths.server_cert + "; run `hpodd rotate-certs --data-dir " +
                                   data_dir + "`");
  }
  if (!IsWildcard(address)) {
    HPOD_ASSIGN_OR_RETURN(auth::pki::CertificateInfo info, auth::pki::ParseCertificate(cert));
    const std::string name = address == "localhost" ? "localhost" : address;
    const auto& list = address == "localhost" ? info.dns_names : info.ip_addresses;
    if (std::find(list.begin(), list.end(), name) == list.end()) {
      std::string names;
      for (const auto* l : {&info.ip_addresses, &info.dns_names}) {
        for (const std::string& n : *l) names += (names.empty() ? "" : ", ") + n;
      }
      return FailedPreconditionError(
          "cannot serve TLS on " + address + ": hpodd's server certificate names " + names +
          ", not " + address +
          ", so every client would refuse it; run `hpodd rotate-certs "
          "--data-dir " +
          data_dir + " --tls-name " + address + "` and start hpodd again");
    }
  }
  tls.enabled = true;
  tls.cert_file = paths.server_cert;
  tls.key_file = paths.server_key;
  return tls;
}

}  // namespace hpod::controlplane
