#pragma once

// hpod's certificate authority: the X.509 pieces behind mutual TLS between hpodd
// and the node agents of hosts that join over the network (issue 25).
//
// hpodd holds one self-signed CA (`hpodd init` creates it). It signs hpodd's own
// server certificate and, for each host that joins with a one-time join token, a
// client certificate whose subject CN is the host id hpodd chose. The agent makes
// its key and a CSR itself, so its private key never leaves its machine; the join
// token carries the CA's pin (CaPin) so the agent trusts the right hpodd before it
// has the CA certificate.
//
// Keys are ECDSA P-256; signatures ECDSA with SHA-256; everything is PEM text.
// Every certificate gets a random 128-bit serial, subject and authority key
// identifiers, and a notBefore backdated by kBackdate so a host whose clock lags a
// little still accepts it. Built on OpenSSL 3's EVP/X509 APIs only.
//
// Errors: kInvalidArgument for input that is not what the call needs (unparsable
// PEM, a CSR whose signature does not verify, a bad name, a non-positive
// validity); kUnauthenticated from VerifyCertificate for a certificate it refuses;
// kFailedPrecondition from KeyMatchesCertificate for a key of another certificate;
// kInternal when OpenSSL fails on valid input. Messages are one line and never
// contain key material. Every call leaves the calling thread's OpenSSL error
// queue empty.
//
// Thread contract: free functions over values; safe from any thread.

#include <chrono>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"

namespace hpod::auth::pki {

// How far before "now" every certificate's notBefore lies: clocks of hosts that
// join over the network are only roughly in step with hpodd's.
inline constexpr std::chrono::seconds kBackdate{5 * 60};

// A certificate and, where this process made it, its private key.
struct Issued {
  std::string cert_pem;
  std::string key_pem;  // PKCS#8 PEM; empty when the key stays elsewhere
};

// A new ECDSA P-256 private key as unencrypted PKCS#8 PEM
// ("-----BEGIN PRIVATE KEY-----").
StatusOr<std::string> GeneratePrivateKeyPem();

// A self-signed CA certificate with subject and issuer CN = `common_name`,
// basicConstraints CA:TRUE (critical), keyUsage keyCertSign|cRLSign (critical),
// valid from now - kBackdate to now + `validity` by `clock`. `key_pem` empty: a new
// key, returned in Issued::key_pem; else the CA is made for that key (re-creating
// a lost ca.pem keeps every certificate the key signed valid) and key_pem is
// returned as given.
// kInvalidArgument: empty or over-long (64) common_name, validity <= 0, an
// unparsable key_pem.
StatusOr<Issued> CreateCa(const std::string& common_name, std::chrono::seconds validity,
                          const Clock& clock, const std::string& key_pem = "");

// A server certificate for a new key, signed by `ca` (which must hold key_pem):
// subject CN = names[0], one subjectAltName per entry of `names` in that order
// (an IPv4 or IPv6 literal becomes an IP SAN, anything else a DNS SAN),
// basicConstraints CA:FALSE, keyUsage digitalSignature, extendedKeyUsage
// serverAuth, valid from now - kBackdate to now + `validity`.
// kInvalidArgument: `names` empty, a DNS name that is not [A-Za-z0-9.-] (an
// optional leading "*." aside) or longer than 253, validity <= 0, an unparsable
// CA certificate or key, or a CA key that is not the certificate's.
StatusOr<Issued> IssueServerCertificate(const Issued& ca, const std::vector<std::string>& names,
                                        std::chrono::seconds validity, const Clock& clock);

// A PKCS#10 certificate request (PEM) signed by `key_pem`, subject CN =
// `common_name`. The agent makes it; hpodd decides the CN it signs anyway.
// kInvalidArgument: unparsable key, empty or over-long common_name.
StatusOr<std::string> CreateCsr(const std::string& key_pem, const std::string& common_name);

// A client certificate for the public key in `csr_pem`, signed by `ca`, after
// the CSR's self-signature verifies (proof that the requester holds the key).
// The subject is CN = `common_name` alone — hpodd's choice (the host id); the
// CSR's subject and any extensions it asks for are ignored. basicConstraints
// CA:FALSE, keyUsage digitalSignature, extendedKeyUsage clientAuth, random
// 128-bit serial, valid from now - kBackdate to now + `validity`.
// kInvalidArgument: unparsable CSR, a CSR signature that does not verify, a key
// other than EC (>= 256 bits) or RSA (>= 2048 bits), a bad common_name or
// validity, an unusable `ca`.
StatusOr<std::string> SignClientCertificate(const Issued& ca, const std::string& csr_pem,
                                            const std::string& common_name,
                                            std::chrono::seconds validity, const Clock& clock);

// What a certificate says, for display, storage and checks.
struct CertificateInfo {
  std::string common_name;                // subject CN; empty when it has none
  std::vector<std::string> dns_names;     // DNS SANs in certificate order
  std::vector<std::string> ip_addresses;  // IP SANs as inet_ntop prints them
  std::string serial_hex;                 // lowercase, no leading zeros
  std::chrono::system_clock::time_point not_before, not_after;
  bool is_ca = false;      // basicConstraints CA:TRUE
  std::string sha256_hex;  // lowercase SHA-256 of the DER encoding
};

// Parses the first certificate in `cert_pem`. kInvalidArgument when there is none.
StatusOr<CertificateInfo> ParseCertificate(const std::string& cert_pem);

// Which use VerifyCertificate checks the leaf's extendedKeyUsage for.
enum class Purpose { kAny, kServer, kClient };

// OK when `cert_pem` is a leaf (not a CA) signed by the CA in `ca_pem` (a chain
// of one), valid at clock.Now(), and allowed for `purpose`. kUnauthenticated with
// a one-line reason otherwise (OpenSSL's: "certificate has expired", "unable to
// get local issuer certificate", "unsupported certificate purpose", ...), also
// when `cert_pem` holds no certificate. kInvalidArgument when `ca_pem` does not.
Status VerifyCertificate(const std::string& ca_pem, const std::string& cert_pem, const Clock& clock,
                         Purpose purpose = Purpose::kAny);

// The CA pin a join token carries: the lowercase hex SHA-256 of the CA
// certificate's DER encoding (64 characters; what `openssl x509 -outform DER |
// sha256sum` prints). kInvalidArgument for unparsable PEM.
StatusOr<std::string> CaPin(const std::string& ca_cert_pem);

// The lowercase hex SHA-256 of the DER SubjectPublicKeyInfo of `key_pem`'s
// public key (what `openssl pkey -pubout -outform DER | sha256sum` prints): a
// name for a key that gives nothing of it away. kInvalidArgument for unparsable PEM.
StatusOr<std::string> PublicKeySha256(const std::string& key_pem);

// OK when `key_pem` is the private key of `cert_pem`'s public key.
// kFailedPrecondition when it is another key; kInvalidArgument when either does
// not parse.
Status KeyMatchesCertificate(const std::string& key_pem, const std::string& cert_pem);

}  // namespace hpod::auth::pki
