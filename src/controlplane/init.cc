#include "hpod/controlplane/init.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/auth/pki.h"
#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/controlplane/daemon.h"
#include "hpod/controlplane/metrics.h"

namespace hpod::controlplane {

namespace fs = std::filesystem;

StatusOr<store::AccessKeyRecord> CreateAccessKey(store::Store& store, store::Role role,
                                                 const std::string& description,
                                                 const Clock& clock) {
  store::AccessKeyRecord k;
  k.access_key_id = "HPOD" + RandomString(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
  k.secret_access_key =
      RandomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  k.role = role;
  k.created = clock.NowEpochSeconds();
  k.description = description;
  HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) { return tx.PutAccessKey(k); }));
  return k;
}

Status UpdateIniSection(const std::string& path, const std::string& section,
                        const std::vector<std::pair<std::string, std::string>>& values) {
  std::vector<std::string> lines;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  // Drop the old section body (keys we set and others alike: the section is ours).
  std::vector<std::string> out;
  bool in_section = false;
  for (const auto& line : lines) {
    std::string t = line;
    t.erase(0, t.find_first_not_of(" \t"));
    if (!t.empty() && t[0] == '[') in_section = (t.rfind("[" + section + "]", 0) == 0);
    if (!in_section) out.push_back(line);
  }
  while (!out.empty() && out.back().empty()) out.pop_back();
  if (!out.empty()) out.push_back("");
  out.push_back("[" + section + "]");
  for (const auto& [k, v] : values) out.push_back(k + " = " + v);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string text;
  for (const auto& l : out) text += l + "\n";
  // Credentials: 0600 from the first byte written (the temp file too), durable
  // once this returns.
  return WriteFileAtomic(path, text, 0600);
}

// ---- TLS files (issue 25) ----

namespace {

namespace pki = auth::pki;

// A name as certificates compare it: IP literals in inet_ntop's form, DNS names
// in lower case.
std::string CanonicalName(const std::string& name) {
  unsigned char ip[16];
  char text[INET6_ADDRSTRLEN] = {0};
  if (inet_pton(AF_INET, name.c_str(), ip) == 1) {
    return inet_ntop(AF_INET, ip, text, sizeof(text));
  }
  if (inet_pton(AF_INET6, name.c_str(), ip) == 1) {
    return inet_ntop(AF_INET6, ip, text, sizeof(text));
  }
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

void AddName(std::vector<std::string>& names, const std::string& name) {
  if (name.empty()) return;
  const std::string canonical = CanonicalName(name);
  for (const auto& n : names) {
    if (CanonicalName(n) == canonical) return;
  }
  names.push_back(name);
}

std::vector<std::string> NamesOf(const pki::CertificateInfo& info) {
  std::vector<std::string> names = info.dns_names;
  names.insert(names.end(), info.ip_addresses.begin(), info.ip_addresses.end());
  return names;
}

std::string Day(std::chrono::system_clock::time_point t) {
  const time_t tt = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Why the server certificate in `paths` must be (re-)issued for `names`; empty
// when it may stay. `old_names` receives the names of a readable one.
std::string ServerCertProblem(const TlsPaths& paths, const std::string& ca_pem,
                              const std::vector<std::string>& names, const Clock& clock,
                              std::vector<std::string>& old_names) {
  auto cert = ReadFile(paths.server_cert);
  auto key = ReadFile(paths.server_key);
  if (!cert.ok() || !key.ok()) return "there was none";
  auto info = pki::ParseCertificate(*cert);
  if (!info.ok()) return "server.pem is unreadable (" + info.status().message() + ")";
  old_names = NamesOf(*info);
  if (!pki::KeyMatchesCertificate(*key, *cert).ok()) return "server.key is not server.pem's key";
  if (Status v = pki::VerifyCertificate(ca_pem, *cert, clock, pki::Purpose::kServer); !v.ok()) {
    return "it does not verify against ca.pem (" + v.message() + ")";
  }
  if (info->not_after - clock.Now() < kServerCertRenewWithin) {
    return "it ends on " + Day(info->not_after);
  }
  std::vector<std::string> missing;
  for (const auto& name : names) {
    const std::string canonical = CanonicalName(name);
    if (std::none_of(old_names.begin(), old_names.end(),
                     [&](const std::string& n) { return CanonicalName(n) == canonical; })) {
      missing.push_back(name);
    }
  }
  if (!missing.empty()) return "it does not cover " + Join(missing);
  return "";
}

// The CA in `paths`, created when neither file exists (create_missing) and
// re-made from ca.key when only ca.pem is lost.
StatusOr<pki::Issued> LoadOrCreateCa(const TlsPaths& paths, bool create_missing, const Clock& clock,
                                     TlsResult& result) {
  std::error_code ec;
  const bool have_cert = fs::exists(paths.ca_cert, ec);
  const bool have_key = fs::exists(paths.ca_key, ec);
  const std::string redo = "; or remove " + paths.ca_cert + " and " + paths.ca_key +
                           " and run `hpodd init` for a new CA (every joined host must then join "
                           "again)";
  if (!create_missing && !have_cert && !have_key) {
    return FailedPreconditionError("no CA in " + paths.dir + "; run `hpodd init` first");
  }
  if (have_cert && !have_key) {
    return FailedPreconditionError(paths.ca_cert + " exists but " + paths.ca_key +
                                   " does not: restore ca.key from a backup" + redo);
  }
  if (!have_cert) {
    std::string key_pem;
    if (have_key) {
      HPOD_ASSIGN_OR_RETURN(key_pem, ReadFile(paths.ca_key));
    } else {
      HPOD_ASSIGN_OR_RETURN(key_pem, pki::GeneratePrivateKeyPem());
    }
    // A CN that tells two hpodd CAs apart in a person's trust store, and that
    // a CA made again from the same key gets again: the certificates it signed
    // name it as their issuer.
    HPOD_ASSIGN_OR_RETURN(std::string key_hash, pki::PublicKeySha256(key_pem));
    const std::string cn = "hpod CA " + key_hash.substr(0, 8);
    HPOD_ASSIGN_OR_RETURN(pki::Issued ca, pki::CreateCa(cn, kCaValidity, clock, key_pem));
    if (!have_key) {
      HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.ca_key, ca.key_pem, 0600));
      result.ca_created = true;
    } else {
      result.changes.push_back(
          "ca.pem was missing: made again from ca.key (certificates it "
          "signed stay valid; the CA pin is new)");
    }
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.ca_cert, ca.cert_pem, 0644));
    return ca;
  }
  pki::Issued ca;
  HPOD_ASSIGN_OR_RETURN(ca.cert_pem, ReadFile(paths.ca_cert));
  HPOD_ASSIGN_OR_RETURN(ca.key_pem, ReadFile(paths.ca_key));
  HPOD_ASSIGN_OR_RETURN(pki::CertificateInfo info, pki::ParseCertificate(ca.cert_pem));
  if (!info.is_ca)
    return FailedPreconditionError(paths.ca_cert + " is not a CA certificate" + redo);
  if (Status s = pki::KeyMatchesCertificate(ca.key_pem, ca.cert_pem); !s.ok()) {
    return FailedPreconditionError(paths.ca_key + " is not the key of " + paths.ca_cert + " (" +
                                   s.message() + ")" + redo);
  }
  if (info.not_after <= clock.Now()) {
    return FailedPreconditionError("the CA in " + paths.ca_cert + " expired on " +
                                   Day(info.not_after) + redo);
  }
  return ca;
}

StatusOr<TlsResult> WriteTls(const std::string& data_dir, const std::vector<std::string>& names,
                             const Clock& clock, bool rotate) {
  TlsResult result;
  result.paths = TlsFiles(data_dir);
  const TlsPaths& paths = result.paths;
  std::error_code ec;
  if (rotate && !fs::exists(paths.dir, ec)) {
    return FailedPreconditionError("no CA in " + paths.dir + "; run `hpodd init` first");
  }
  fs::create_directories(paths.dir, ec);
  if (ec) return FailedPreconditionError("cannot create " + paths.dir + ": " + ec.message());
  // It holds the CA key: only the owner may enter, as the data dir.
  fs::permissions(paths.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec) return FailedPreconditionError("cannot chmod " + paths.dir + ": " + ec.message());

  HPOD_ASSIGN_OR_RETURN(pki::Issued ca, LoadOrCreateCa(paths, !rotate, clock, result));
  HPOD_ASSIGN_OR_RETURN(result.ca_pin, pki::CaPin(ca.cert_pem));

  std::vector<std::string> old_names;
  std::string problem = ServerCertProblem(paths, ca.cert_pem, names, clock, old_names);
  if (rotate) problem = "rotated";
  if (!problem.empty()) {
    std::vector<std::string> new_names;
    for (const auto& n : names) AddName(new_names, n);
    for (const auto& n : old_names) AddName(new_names, n);
    HPOD_ASSIGN_OR_RETURN(pki::Issued server,
                          pki::IssueServerCertificate(ca, new_names, kServerCertValidity, clock));
    // Key first: a crash between the two leaves a pair that does not match,
    // which the next init re-issues.
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.server_key, server.key_pem, 0600));
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.server_cert, server.cert_pem, 0644));
    result.server_issued = true;
    if (!result.ca_created && problem != "there was none" && !rotate) {
      result.changes.push_back("server certificate re-issued: " + problem);
    }
  }
  HPOD_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(paths.server_cert));
  HPOD_ASSIGN_OR_RETURN(pki::CertificateInfo info, pki::ParseCertificate(cert_pem));
  result.server_names = NamesOf(info);
  result.server_serial = info.serial_hex;
  return result;
}

}  // namespace

TlsPaths TlsFiles(const std::string& data_dir) {
  TlsPaths p;
  p.dir = (fs::path(data_dir) / "tls").string();
  p.ca_cert = p.dir + "/ca.pem";
  p.ca_key = p.dir + "/ca.key";
  p.server_cert = p.dir + "/server.pem";
  p.server_key = p.dir + "/server.key";
  return p;
}

std::vector<std::string> ServerCertificateNames(const std::string& listen_address,
                                                const std::vector<std::string>& tls_names) {
  std::vector<std::string> names;
  const std::string address = CanonicalName(listen_address);
  if (address.empty() || address == "0.0.0.0" || address == "::") {
    char host[256] = {0};
    // Only a host name a certificate can carry ([A-Za-z0-9.-]); another one is
    // left out rather than failing init.
    const bool plain = ::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' &&
                       std::all_of(host, host + std::strlen(host), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
                       });
    if (plain) AddName(names, host);
    AddName(names, "localhost");
    AddName(names, "127.0.0.1");
    if (address == "::") AddName(names, "::1");
  } else {
    AddName(names, listen_address);
    if (address.rfind("127.", 0) == 0 || address == "::1") AddName(names, "localhost");
    // hpodd listens on 127.0.0.1 for "localhost" (http/server_listen.cc), which
    // clients may dial by address too.
    if (address == "localhost") AddName(names, "127.0.0.1");
  }
  for (const auto& n : tls_names) AddName(names, n);
  return names;
}

StatusOr<TlsResult> EnsureTls(const std::string& data_dir, const std::vector<std::string>& names,
                              const Clock& clock) {
  return WriteTls(data_dir, names, clock, /*rotate=*/false);
}

StatusOr<TlsResult> RotateServerCertificate(const std::string& data_dir,
                                            const std::vector<std::string>& names,
                                            const Clock& clock) {
  return WriteTls(data_dir, names, clock, /*rotate=*/true);
}

StatusOr<InitResult> InitDataDir(const InitOptions& options, const Clock& clock) {
  if (options.data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) {
    return FailedPreconditionError("cannot create data dir " + options.data_dir + ": " +
                                   ec.message());
  }
  // The store holds secret keys: only the owner may read the data dir.
  fs::permissions(options.data_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  InitResult result;
  std::string path = StorePath(options.data_dir);
  result.created = !fs::exists(path);
  HPOD_ASSIGN_OR_RETURN(auto store, store::OpenSqliteStore({path}));
  ::chmod(path.c_str(), 0600);

  store::AccessKeyRecord admin;
  bool found = false;
  HPOD_RETURN_IF_ERROR(store->Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto keys, tx.ListAccessKeys());
    for (const auto& k : keys) {
      if (k.role == store::Role::kAdmin) {
        admin = k;
        found = true;
        break;
      }
    }
    return OkStatus();
  }));
  if (!found) {
    HPOD_ASSIGN_OR_RETURN(admin,
                          CreateAccessKey(*store, store::Role::kAdmin, "first admin key", clock));
  }
  result.access_key_id = admin.access_key_id;
  HPOD_RETURN_IF_ERROR(EnsureMetricsToken(options.data_dir).status());
  result.metrics_token_file = MetricsTokenPath(options.data_dir);
  HPOD_ASSIGN_OR_RETURN(
      result.tls,
      EnsureTls(options.data_dir, ServerCertificateNames(options.listen_address, options.tls_names),
                clock));

  if (!options.profile.empty()) {
    std::string aws_dir = options.aws_dir;
    if (aws_dir.empty()) {
      const char* home = std::getenv("HOME");
      aws_dir = std::string(home ? home : "/root") + "/.aws";
    }
    result.credentials_file = aws_dir + "/credentials";
    result.config_file = aws_dir + "/config";
    HPOD_RETURN_IF_ERROR(UpdateIniSection(result.credentials_file, options.profile,
                                          {{"aws_access_key_id", admin.access_key_id},
                                           {"aws_secret_access_key", admin.secret_access_key}}));
    std::vector<std::pair<std::string, std::string>> profile = {
        {"region", options.region}, {"endpoint_url", options.endpoint_url}, {"output", "json"}};
    // botocore (and so the aws CLI) trusts hpodd's CA through the profile; an
    // absolute path, as the profile is read from any directory.
    if (options.endpoint_url.rfind("https://", 0) == 0) {
      profile.push_back({"ca_bundle", fs::absolute(result.tls.paths.ca_cert).string()});
    }
    HPOD_RETURN_IF_ERROR(
        UpdateIniSection(result.config_file, "profile " + options.profile, profile));
  }
  return result;
}

}  // namespace hpod::controlplane
