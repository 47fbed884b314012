#pragma once

// For the TLS tests (tls_test.cc, tls_websocket_test.cc): a throwaway PKI made in
// memory with OpenSSL's X509 API (P-256 keys, a self-signed CA, server certificates
// with IP and DNS SANs, client certificates with a chosen CN and serial), written
// as PEM files to a fresh temporary directory that is removed again. Independent of
// src/auth (hpod_http may depend on base only).

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hpod::http::testing {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

// A certificate and key on disk, and what the server should report for it.
struct TestCertFiles {
  std::string cert;  // PEM certificate path
  std::string key;   // PEM private key path
  std::string cn;
  std::string serial_hex;  // lowercase, even number of digits
  std::string sha256_hex;  // of the DER certificate
};

// A test certificate authority whose files live in `dir` (created by TestPki).
//
// Thread contract: not thread-safe; used by one test.
class TestCa {
 public:
  TestCa(std::string dir, const std::string& name) : dir_(std::move(dir)), name_(name) {
    key_ = NewKey();
    cert_ = Build(name, key_.get(), nullptr, nullptr, 1, {"critical,CA:TRUE"},
                  {"critical,keyCertSign,cRLSign"}, "", "");
    ca_file_ = Write(name + "-ca.pem", cert_.get(), nullptr).cert;
  }

  const std::string& ca_file() const { return ca_file_; }

  // A server certificate for `ips` (IP SANs) and `dns` (DNS SANs).
  TestCertFiles Server(const std::string& file_name, const std::string& cn,
                       const std::vector<std::string>& ips, const std::vector<std::string>& dns,
                       uint64_t serial = 2) {
    std::string san;
    for (const std::string& ip : ips) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
    for (const std::string& d : dns) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
    Pkey key = NewKey();
    Cert cert = Build(cn, key.get(), cert_.get(), key_.get(), serial, {"critical,CA:FALSE"},
                      {"critical,digitalSignature"}, "serverAuth", san);
    return Write(file_name, cert.get(), key.get());
  }

  // A client certificate with subject CN `cn`.
  TestCertFiles Client(const std::string& file_name, const std::string& cn, uint64_t serial) {
    Pkey key = NewKey();
    Cert cert = Build(cn, key.get(), cert_.get(), key_.get(), serial, {"critical,CA:FALSE"},
                      {"critical,digitalSignature"}, "clientAuth", "");
    return Write(file_name, cert.get(), key.get());
  }

 private:
  static Pkey NewKey() {
    Pkey key(EVP_EC_gen("P-256"));
    if (key == nullptr) throw std::runtime_error("EVP_EC_gen failed");
    return key;
  }

  static void AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
    if (value.empty()) return;
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) throw std::runtime_error("bad extension " + value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }

  // Signed by `issuer_key` (self-signed when `issuer` is null).
  static Cert Build(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                    uint64_t serial, const std::vector<std::string>& basic,
                    const std::vector<std::string>& usage, const std::string& extended_usage,
                    const std::string& san) {
    Cert cert(X509_new());
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
    X509_set_pubkey(cert.get(), key);
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
    for (const std::string& b : basic) AddExtension(cert.get(), issuer, NID_basic_constraints, b);
    for (const std::string& u : usage) AddExtension(cert.get(), issuer, NID_key_usage, u);
    AddExtension(cert.get(), issuer, NID_ext_key_usage, extended_usage);
    AddExtension(cert.get(), issuer, NID_subject_key_identifier, "hash");
    if (issuer != nullptr) {
      AddExtension(cert.get(), issuer, NID_authority_key_identifier, "keyid:always");
    }
    AddExtension(cert.get(), issuer, NID_subject_alt_name, san);
    if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
      throw std::runtime_error("X509_sign failed");
    }
    return cert;
  }

  TestCertFiles Write(const std::string& file_name, X509* cert, EVP_PKEY* key) {
    TestCertFiles files;
    files.cert = dir_ + "/" + file_name;
    FILE* f = std::fopen(files.cert.c_str(), "w");
    if (f == nullptr || PEM_write_X509(f, cert) != 1) throw std::runtime_error("write cert");
    std::fclose(f);
    if (key != nullptr) {
      files.key = files.cert + ".key";
      f = std::fopen(files.key.c_str(), "w");
      if (f == nullptr ||
          PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
        throw std::runtime_error("write key");
      }
      std::fclose(f);
    }
    X509_NAME* name = X509_get_subject_name(cert);
    char cn[256] = {0};
    X509_NAME_get_text_by_NID(name, NID_commonName, cn, sizeof(cn));
    files.cn = cn;
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
    char* hex = BN_bn2hex(bn);
    files.serial_hex = hex;
    for (char& c : files.serial_hex) c = static_cast<char>(std::tolower(c));
    if (files.serial_hex.size() % 2 == 1) files.serial_hex = "0" + files.serial_hex;
    OPENSSL_free(hex);
    BN_free(bn);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    X509_digest(cert, EVP_sha256(), digest, &size);
    static constexpr char kDigits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < size; ++i) {
      files.sha256_hex += kDigits[digest[i] >> 4];
      files.sha256_hex += kDigits[digest[i] & 0xf];
    }
    return files;
  }

  std::string dir_;
  std::string name_;
  Pkey key_;
  Cert cert_;
  std::string ca_file_;
};

// A temporary directory for one test's PKI files, removed with the object.
class TestPki {
 public:
  TestPki() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "hpod-tls-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
  }
  ~TestPki() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& dir() const { return dir_; }
  TestCa NewCa(const std::string& name) { return TestCa(dir_, name); }

 private:
  std::string dir_;
};

}  // namespace hpod::http::testing
