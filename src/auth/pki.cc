#include "hpod/auth/pki.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <cstring>
#include <ctime>
#include <memory>

#include "hpod/base/crypto.h"

namespace hpod::auth::pki {
namespace {

// unique_ptr deleters for OpenSSL's *_free functions.
template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
template <typename T, auto Free>
using Ptr = std::unique_ptr<T, Deleter<Free>>;

using BioPtr = Ptr<BIO, BIO_free>;
using BnPtr = Ptr<BIGNUM, BN_free>;
using KeyPtr = Ptr<EVP_PKEY, EVP_PKEY_free>;
using X509Ptr = Ptr<X509, X509_free>;
using ReqPtr = Ptr<X509_REQ, X509_REQ_free>;
using NamePtr = Ptr<X509_NAME, X509_NAME_free>;
using ExtPtr = Ptr<X509_EXTENSION, X509_EXTENSION_free>;
using GenNamesPtr = Ptr<GENERAL_NAMES, GENERAL_NAMES_free>;
using GenNamePtr = Ptr<GENERAL_NAME, GENERAL_NAME_free>;
using Asn1IntPtr = Ptr<ASN1_INTEGER, ASN1_INTEGER_free>;
using OctetPtr = Ptr<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free>;
using Ia5Ptr = Ptr<ASN1_IA5STRING, ASN1_IA5STRING_free>;
using StorePtr = Ptr<X509_STORE, X509_STORE_free>;
using StoreCtxPtr = Ptr<X509_STORE_CTX, X509_STORE_CTX_free>;
using EkuPtr = Ptr<EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free>;

struct OpensslFree {
  void operator()(void* p) const { OPENSSL_free(p); }
};

// `what` plus OpenSSL's most recent reason, with the thread's error queue
// emptied so nothing stale reaches the next OpenSSL caller on this thread.
Status OpensslError(StatusCode code, const std::string& what) {
  unsigned long last = 0;
  while (unsigned long e = ERR_get_error()) last = e;
  std::string message = what;
  if (last != 0) {
    char buf[256];
    ERR_error_string_n(last, buf, sizeof(buf));
    message += " (" + std::string(buf) + ")";
  }
  return Status(code, std::move(message));
}

// Never prompts for a passphrase: our keys are unencrypted, and an encrypted one
// must fail instead of reading the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

BioPtr ReadBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

StatusOr<X509Ptr> LoadCert(const std::string& pem, const char* what) {
  BioPtr bio = ReadBio(pem);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  if (!cert) return OpensslError(StatusCode::kInvalidArgument, std::string(what) + " is not PEM");
  return cert;
}

StatusOr<KeyPtr> LoadKey(const std::string& pem, const char* what) {
  BioPtr bio = ReadBio(pem);
  KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  if (!key) {
    return OpensslError(StatusCode::kInvalidArgument,
                        std::string(what) + " is not an unencrypted PEM private key");
  }
  return key;
}

StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  // PEM_write_bio_PrivateKey writes PKCS#8 ("BEGIN PRIVATE KEY").
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpensslError(StatusCode::kInternal, "writing a private key");
  }
  return BioText(bio.get());
}

StatusOr<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpensslError(StatusCode::kInternal, "writing a certificate");
  }
  return BioText(bio.get());
}

StatusOr<KeyPtr> NewKey() {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return OpensslError(StatusCode::kInternal, "generating a P-256 key");
  return key;
}

Status CheckCommonName(const std::string& cn) {
  // 64: the X.520 upper bound OpenSSL enforces for CN.
  if (cn.empty() || cn.size() > 64) {
    return InvalidArgumentError("common name must be 1 to 64 characters, got " +
                                std::to_string(cn.size()));
  }
  return OkStatus();
}

StatusOr<NamePtr> CommonName(const std::string& cn) {
  HPOD_RETURN_IF_ERROR(CheckCommonName(cn));
  NamePtr name(X509_NAME_new());
  if (!name || X509_NAME_add_entry_by_NID(name.get(), NID_commonName, MBSTRING_UTF8,
                                          reinterpret_cast<const unsigned char*>(cn.data()),
                                          static_cast<int>(cn.size()), -1, 0) != 1) {
    return OpensslError(StatusCode::kInvalidArgument, "common name '" + cn + "' is not usable");
  }
  return name;
}

// 128 random bits, top bit clear so the DER INTEGER is positive and at most 16
// bytes (RFC 5280 allows 20); never zero.
StatusOr<Asn1IntPtr> RandomSerial() {
  std::string bytes = RandomBytes(16);
  bytes[0] = static_cast<char>(bytes[0] & 0x7f);
  bytes[15] = static_cast<char>(bytes[15] | 0x01);
  BnPtr bn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()), 16, nullptr));
  Asn1IntPtr serial(bn ? BN_to_ASN1_INTEGER(bn.get(), nullptr) : nullptr);
  if (!serial) return OpensslError(StatusCode::kInternal, "making a serial number");
  return serial;
}

// Adds extension `nid` given in openssl.cnf syntax (constant strings only:
// names from callers go through AddSubjectAltNames, never through this parser).
Status AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpensslError(StatusCode::kInternal, std::string("adding extension ") + OBJ_nid2sn(nid));
  }
  return OkStatus();
}

bool IsDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  std::string rest = name.rfind("*.", 0) == 0 ? name.substr(2) : name;
  if (rest.empty() || rest.front() == '.' || rest.back() == '.') return false;
  for (char c : rest) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return rest.find("..") == std::string::npos;
}

Status AddSubjectAltNames(X509* cert, const std::vector<std::string>& names) {
  GenNamesPtr gens(GENERAL_NAMES_new());
  if (!gens) return OpensslError(StatusCode::kInternal, "allocating subjectAltName");
  for (const std::string& name : names) {
    GenNamePtr gen(GENERAL_NAME_new());
    if (!gen) return OpensslError(StatusCode::kInternal, "allocating a name");
    unsigned char ip[16];
    int ip_len = 0;
    if (inet_pton(AF_INET, name.c_str(), ip) == 1) {
      ip_len = 4;
    } else if (inet_pton(AF_INET6, name.c_str(), ip) == 1) {
      ip_len = 16;
    }
    if (ip_len > 0) {
      OctetPtr octets(ASN1_OCTET_STRING_new());
      if (!octets || ASN1_OCTET_STRING_set(octets.get(), ip, ip_len) != 1) {
        return OpensslError(StatusCode::kInternal, "encoding IP address " + name);
      }
      GENERAL_NAME_set0_value(gen.get(), GEN_IPADD, octets.release());
    } else {
      if (!IsDnsName(name)) {
        return InvalidArgumentError("'" + name +
                                    "' is neither an IP address nor a DNS name ([A-Za-z0-9.-])");
      }
      Ia5Ptr dns(ASN1_IA5STRING_new());
      if (!dns || ASN1_STRING_set(dns.get(), name.data(), static_cast<int>(name.size())) != 1) {
        return OpensslError(StatusCode::kInternal, "encoding DNS name " + name);
      }
      GENERAL_NAME_set0_value(gen.get(), GEN_DNS, dns.release());
    }
    if (sk_GENERAL_NAME_push(gens.get(), gen.get()) == 0) {
      return OpensslError(StatusCode::kInternal, "collecting subjectAltName");
    }
    gen.release();  // owned by gens now
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, gens.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return OpensslError(StatusCode::kInternal, "adding subjectAltName");
  }
  return OkStatus();
}

// A certificate skeleton: v3, random serial, subject, issuer, validity, public key.
StatusOr<X509Ptr> NewCert(X509_NAME* subject, X509_NAME* issuer, EVP_PKEY* public_key,
                          std::chrono::seconds validity, const Clock& clock) {
  if (validity.count() <= 0) return InvalidArgumentError("validity must be positive");
  X509Ptr cert(X509_new());
  HPOD_ASSIGN_OR_RETURN(Asn1IntPtr serial, RandomSerial());
  const time_t now = std::chrono::system_clock::to_time_t(clock.Now());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      X509_set_serialNumber(cert.get(), serial.get()) != 1 ||
      X509_set_subject_name(cert.get(), subject) != 1 ||
      X509_set_issuer_name(cert.get(), issuer) != 1 ||
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), now - kBackdate.count()) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), now + validity.count()) == nullptr ||
      X509_set_pubkey(cert.get(), public_key) != 1) {
    return OpensslError(StatusCode::kInternal, "building a certificate");
  }
  return cert;
}

Status Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) <= 0) {
    return OpensslError(StatusCode::kInternal, "signing a certificate");
  }
  return OkStatus();
}

// The CA's certificate and key, checked to belong together.
struct LoadedCa {
  X509Ptr cert;
  KeyPtr key;
};
StatusOr<LoadedCa> LoadCa(const Issued& ca) {
  HPOD_ASSIGN_OR_RETURN(X509Ptr cert, LoadCert(ca.cert_pem, "CA certificate"));
  HPOD_ASSIGN_OR_RETURN(KeyPtr key, LoadKey(ca.key_pem, "CA key"));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("the CA key is not the CA certificate's key");
  }
  return LoadedCa{std::move(cert), std::move(key)};
}

// The leaf extensions hpodd's server and client certificates share.
Status AddLeafExtensions(X509* cert, X509* issuer, const char* eku) {
  HPOD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_basic_constraints, "critical,CA:FALSE"));
  HPOD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_key_usage, "critical,digitalSignature"));
  HPOD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_ext_key_usage, eku));
  HPOD_RETURN_IF_ERROR(AddExt(cert, issuer, NID_subject_key_identifier, "hash"));
  return AddExt(cert, issuer, NID_authority_key_identifier, "keyid:always");
}

std::chrono::system_clock::time_point ToTimePoint(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

StatusOr<std::string> DerSha256Hex(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (X509_digest(cert, EVP_sha256(), md, &len) != 1) {
    return OpensslError(StatusCode::kInternal, "hashing a certificate");
  }
  return HexEncode(std::string(reinterpret_cast<char*>(md), len));
}

}  // namespace

StatusOr<std::string> GeneratePrivateKeyPem() {
  HPOD_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  return KeyPem(key.get());
}

StatusOr<Issued> CreateCa(const std::string& common_name, std::chrono::seconds validity,
                          const Clock& clock, const std::string& key_pem) {
  HPOD_ASSIGN_OR_RETURN(NamePtr name, CommonName(common_name));
  KeyPtr key;
  if (key_pem.empty()) {
    HPOD_ASSIGN_OR_RETURN(key, NewKey());
  } else {
    HPOD_ASSIGN_OR_RETURN(key, LoadKey(key_pem, "CA key"));
  }
  HPOD_ASSIGN_OR_RETURN(X509Ptr cert, NewCert(name.get(), name.get(), key.get(), validity, clock));
  HPOD_RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  HPOD_RETURN_IF_ERROR(
      AddExt(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  HPOD_RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  HPOD_RETURN_IF_ERROR(Sign(cert.get(), key.get()));
  Issued out;
  HPOD_ASSIGN_OR_RETURN(out.cert_pem, CertPem(cert.get()));
  if (key_pem.empty()) {
    HPOD_ASSIGN_OR_RETURN(out.key_pem, KeyPem(key.get()));
  } else {
    out.key_pem = key_pem;
  }
  return out;
}

StatusOr<Issued> IssueServerCertificate(const Issued& ca, const std::vector<std::string>& names,
                                        std::chrono::seconds validity, const Clock& clock) {
  if (names.empty()) return InvalidArgumentError("a server certificate needs at least one name");
  HPOD_ASSIGN_OR_RETURN(LoadedCa loaded, LoadCa(ca));
  HPOD_ASSIGN_OR_RETURN(NamePtr subject, CommonName(names[0]));
  HPOD_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  HPOD_ASSIGN_OR_RETURN(
      X509Ptr cert,
      NewCert(subject.get(), X509_get_subject_name(loaded.cert.get()), key.get(), validity, clock));
  HPOD_RETURN_IF_ERROR(AddLeafExtensions(cert.get(), loaded.cert.get(), "serverAuth"));
  HPOD_RETURN_IF_ERROR(AddSubjectAltNames(cert.get(), names));
  HPOD_RETURN_IF_ERROR(Sign(cert.get(), loaded.key.get()));
  Issued out;
  HPOD_ASSIGN_OR_RETURN(out.cert_pem, CertPem(cert.get()));
  HPOD_ASSIGN_OR_RETURN(out.key_pem, KeyPem(key.get()));
  return out;
}

StatusOr<std::string> CreateCsr(const std::string& key_pem, const std::string& common_name) {
  HPOD_ASSIGN_OR_RETURN(KeyPtr key, LoadKey(key_pem, "key"));
  HPOD_ASSIGN_OR_RETURN(NamePtr subject, CommonName(common_name));
  ReqPtr req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), X509_REQ_VERSION_1) != 1 ||
      X509_REQ_set_subject_name(req.get(), subject.get()) != 1 ||
      X509_REQ_set_pubkey(req.get(), key.get()) != 1 ||
      X509_REQ_sign(req.get(), key.get(), EVP_sha256()) <= 0) {
    return OpensslError(StatusCode::kInternal, "building a certificate request");
  }
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509_REQ(bio.get(), req.get()) != 1) {
    return OpensslError(StatusCode::kInternal, "writing a certificate request");
  }
  return BioText(bio.get());
}

StatusOr<std::string> SignClientCertificate(const Issued& ca, const std::string& csr_pem,
                                            const std::string& common_name,
                                            std::chrono::seconds validity, const Clock& clock) {
  BioPtr bio = ReadBio(csr_pem);
  ReqPtr req(bio ? PEM_read_bio_X509_REQ(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  if (!req) return OpensslError(StatusCode::kInvalidArgument, "certificate request is not PEM");
  EVP_PKEY* public_key = X509_REQ_get0_pubkey(req.get());  // owned by req
  if (public_key == nullptr) {
    return OpensslError(StatusCode::kInvalidArgument, "certificate request has no usable key");
  }
  if (X509_REQ_verify(req.get(), public_key) != 1) {
    return OpensslError(StatusCode::kInvalidArgument,
                        "certificate request signature does not verify");
  }
  const int bits = EVP_PKEY_get_bits(public_key);
  const bool ec = EVP_PKEY_is_a(public_key, "EC") == 1;
  const bool rsa = EVP_PKEY_is_a(public_key, "RSA") == 1;
  if (!(ec && bits >= 256) && !(rsa && bits >= 2048)) {
    return InvalidArgumentError(
        "certificate request key must be EC (>= 256 bits) or RSA "
        "(>= 2048 bits); got " +
        std::string(EVP_PKEY_get0_type_name(public_key) ? EVP_PKEY_get0_type_name(public_key)
                                                        : "unknown") +
        " of " + std::to_string(bits) + " bits");
  }
  HPOD_ASSIGN_OR_RETURN(LoadedCa loaded, LoadCa(ca));
  HPOD_ASSIGN_OR_RETURN(NamePtr subject, CommonName(common_name));
  HPOD_ASSIGN_OR_RETURN(X509Ptr cert,
                        NewCert(subject.get(), X509_get_subject_name(loaded.cert.get()), public_key,
                                validity, clock));
  HPOD_RETURN_IF_ERROR(AddLeafExtensions(cert.get(), loaded.cert.get(), "clientAuth"));
  HPOD_RETURN_IF_ERROR(Sign(cert.get(), loaded.key.get()));
  return CertPem(cert.get());
}

StatusOr<CertificateInfo> ParseCertificate(const std::string& cert_pem) {
  HPOD_ASSIGN_OR_RETURN(X509Ptr cert, LoadCert(cert_pem, "certificate"));
  CertificateInfo info;
  X509_NAME* subject = X509_get_subject_name(cert.get());
  int idx = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (idx >= 0) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx));
    unsigned char* utf8 = nullptr;
    int n = ASN1_STRING_to_UTF8(&utf8, data);
    std::unique_ptr<unsigned char, OpensslFree> owned(utf8);
    if (n < 0) return OpensslError(StatusCode::kInvalidArgument, "certificate CN is not text");
    info.common_name.assign(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  }
  GenNamesPtr sans(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* gen = sk_GENERAL_NAME_value(sans.get(), i);
    if (gen->type == GEN_DNS) {
      const ASN1_IA5STRING* s = gen->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gen->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = gen->d.iPAddress;
      const int len = ASN1_STRING_length(s);
      char text[INET6_ADDRSTRLEN] = {0};
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof(text)) !=
              nullptr) {
        info.ip_addresses.emplace_back(text);
      }
    }
  }
  BnPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  std::unique_ptr<char, OpensslFree> hex(serial ? BN_bn2hex(serial.get()) : nullptr);
  if (!hex) return OpensslError(StatusCode::kInternal, "reading the serial number");
  info.serial_hex = Lower(hex.get());
  info.not_before = ToTimePoint(X509_get0_notBefore(cert.get()));
  info.not_after = ToTimePoint(X509_get0_notAfter(cert.get()));
  info.is_ca = (X509_get_extension_flags(cert.get()) & EXFLAG_CA) != 0;
  HPOD_ASSIGN_OR_RETURN(info.sha256_hex, DerSha256Hex(cert.get()));
  ERR_clear_error();  // X509_get_ext_d2i leaves an entry when there is no SAN
  return info;
}

Status VerifyCertificate(const std::string& ca_pem, const std::string& cert_pem, const Clock& clock,
                         Purpose purpose) {
  HPOD_ASSIGN_OR_RETURN(X509Ptr ca, LoadCert(ca_pem, "CA certificate"));
  auto leaf = LoadCert(cert_pem, "certificate");
  if (!leaf.ok()) return UnauthenticatedError(leaf.status().message());
  if ((X509_get_extension_flags(leaf->get()) & EXFLAG_CA) != 0) {
    return UnauthenticatedError("certificate is a CA certificate, not a leaf");
  }
  StorePtr store(X509_STORE_new());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), leaf->get(), nullptr) != 1) {
    return OpensslError(StatusCode::kInternal, "setting up certificate verification");
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, std::chrono::system_clock::to_time_t(clock.Now()));
  X509_STORE_CTX_set_flags(ctx.get(), X509_V_FLAG_X509_STRICT);
  if (purpose != Purpose::kAny &&
      X509_STORE_CTX_set_purpose(ctx.get(), purpose == Purpose::kServer
                                                ? X509_PURPOSE_SSL_SERVER
                                                : X509_PURPOSE_SSL_CLIENT) != 1) {
    return OpensslError(StatusCode::kInternal, "setting the verification purpose");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return UnauthenticatedError(std::string("certificate not accepted: ") +
                                X509_verify_cert_error_string(err));
  }
  return OkStatus();
}

StatusOr<std::string> CaPin(const std::string& ca_cert_pem) {
  HPOD_ASSIGN_OR_RETURN(X509Ptr cert, LoadCert(ca_cert_pem, "CA certificate"));
  return DerSha256Hex(cert.get());
}

StatusOr<std::string> PublicKeySha256(const std::string& key_pem) {
  HPOD_ASSIGN_OR_RETURN(KeyPtr key, LoadKey(key_pem, "key"));
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key.get(), &der);
  std::unique_ptr<unsigned char, OpensslFree> owned(der);
  if (len <= 0) return OpensslError(StatusCode::kInternal, "encoding a public key");
  return HexEncode(Sha256(std::string_view(reinterpret_cast<char*>(der), len)));
}

Status KeyMatchesCertificate(const std::string& key_pem, const std::string& cert_pem) {
  HPOD_ASSIGN_OR_RETURN(KeyPtr key, LoadKey(key_pem, "key"));
  HPOD_ASSIGN_OR_RETURN(X509Ptr cert, LoadCert(cert_pem, "certificate"));
  if (EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key.get()) != 1) {
    ERR_clear_error();
    return FailedPreconditionError("the private key is not the certificate's key");
  }
  return OkStatus();
}

}  // namespace hpod::auth::pki
