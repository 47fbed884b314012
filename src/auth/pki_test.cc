#include "hpod/auth/pki.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"

namespace hpod::auth::pki {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

constexpr seconds kDay = std::chrono::duration_cast<seconds>(hours(24));

Issued NewCa(const Clock& clock, const std::string& cn = "hpod test CA") {
  auto ca = CreateCa(cn, 365 * kDay, clock);
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  return ca.ok() ? *ca : Issued{};
}

std::string ClientCert(const Issued& ca, const Clock& clock, const std::string& cn,
                       seconds validity = 30 * kDay) {
  auto key = GeneratePrivateKeyPem();
  EXPECT_TRUE(key.ok());
  auto csr = CreateCsr(*key, "whatever-the-agent-says");
  EXPECT_TRUE(csr.ok()) << csr.status().ToString();
  auto cert = SignClientCertificate(ca, *csr, cn, validity, clock);
  EXPECT_TRUE(cert.ok()) << cert.status().ToString();
  return cert.ok() ? *cert : "";
}

TEST(PkiTest, PrivateKeyIsPkcs8Pem) {
  auto key = GeneratePrivateKeyPem();
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->rfind("-----BEGIN PRIVATE KEY-----\n", 0), 0u);
  auto other = GeneratePrivateKeyPem();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*key, *other);
}

TEST(PkiTest, CaIsSelfSignedCaWithValidityFromTheClock) {
  FakeClock clock;
  auto ca = CreateCa("hpod CA 1234", 10 * 365 * kDay, clock);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_EQ(ca->key_pem.rfind("-----BEGIN PRIVATE KEY-----", 0), 0u);
  auto info = ParseCertificate(ca->cert_pem);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->common_name, "hpod CA 1234");
  EXPECT_TRUE(info->is_ca);
  EXPECT_EQ(info->not_before, clock.Now() - kBackdate);
  EXPECT_EQ(info->not_after, clock.Now() + 10 * 365 * kDay);
  EXPECT_TRUE(KeyMatchesCertificate(ca->key_pem, ca->cert_pem).ok());
  EXPECT_TRUE(info->dns_names.empty());
  // 128 random bits, top bit clear: at most 32 hex digits.
  EXPECT_LE(info->serial_hex.size(), 32u);
  EXPECT_GE(info->serial_hex.size(), 16u);
}

TEST(PkiTest, CaFromAnExistingKeyKeepsItsSignaturesValid) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  std::string client = ClientCert(ca, clock, "h-0123456789abcdef");
  auto again = CreateCa("hpod test CA", 365 * kDay, clock, ca.key_pem);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->key_pem, ca.key_pem);
  EXPECT_NE(again->cert_pem, ca.cert_pem);
  EXPECT_TRUE(VerifyCertificate(again->cert_pem, client, clock).ok());
}

TEST(PkiTest, CaRefusesBadInput) {
  FakeClock clock;
  EXPECT_EQ(CreateCa("", kDay, clock).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCa(std::string(65, 'a'), kDay, clock).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCa("ca", seconds(0), clock).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCa("ca", kDay, clock, "not a key").status().code(), StatusCode::kInvalidArgument);
}

TEST(PkiTest, ServerCertificateHasExactlyTheGivenNames) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  auto server = IssueServerCertificate(
      ca, {"hpodd.example", "10.0.0.7", "localhost", "fe80::1", "*.hpod.internal"}, kDay, clock);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto info = ParseCertificate(server->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, "hpodd.example");
  EXPECT_EQ(info->dns_names,
            (std::vector<std::string>{"hpodd.example", "localhost", "*.hpod.internal"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"10.0.0.7", "fe80::1"}));
  EXPECT_FALSE(info->is_ca);
  EXPECT_EQ(info->not_after, clock.Now() + kDay);
  EXPECT_TRUE(KeyMatchesCertificate(server->key_pem, server->cert_pem).ok());
  EXPECT_TRUE(VerifyCertificate(ca.cert_pem, server->cert_pem, clock, Purpose::kServer).ok());
  EXPECT_EQ(VerifyCertificate(ca.cert_pem, server->cert_pem, clock, Purpose::kClient).code(),
            StatusCode::kUnauthenticated);
}

TEST(PkiTest, ServerCertificateRefusesBadNamesAndAForeignCaKey) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  for (const char* bad : {"", "a b", "x..y", ".lead", "bad,comma", "DNS:evil"}) {
    auto r = IssueServerCertificate(ca, {"ok.example", bad}, kDay, clock);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_EQ(IssueServerCertificate(ca, {}, kDay, clock).status().code(),
            StatusCode::kInvalidArgument);
  Issued mixed{ca.cert_pem, NewCa(clock).key_pem};
  auto r = IssueServerCertificate(mixed, {"a.example"}, kDay, clock);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not the CA certificate's key"), std::string::npos);
}

TEST(PkiTest, ClientCertificateTakesHpoddsCommonNameNotTheCsrs) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  std::string cert = ClientCert(ca, clock, "h-0123456789abcdef");
  auto info = ParseCertificate(cert);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, "h-0123456789abcdef");
  EXPECT_FALSE(info->is_ca);
  EXPECT_TRUE(info->dns_names.empty());
  EXPECT_TRUE(VerifyCertificate(ca.cert_pem, cert, clock, Purpose::kClient).ok());
  EXPECT_EQ(VerifyCertificate(ca.cert_pem, cert, clock, Purpose::kServer).code(),
            StatusCode::kUnauthenticated);
}

TEST(PkiTest, ClientCertificateKeepsTheCsrKey) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  auto key = GeneratePrivateKeyPem();
  ASSERT_TRUE(key.ok());
  auto csr = CreateCsr(*key, "agent");
  ASSERT_TRUE(csr.ok());
  EXPECT_EQ(csr->rfind("-----BEGIN CERTIFICATE REQUEST-----", 0), 0u);
  auto cert = SignClientCertificate(ca, *csr, "h-1", kDay, clock);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  EXPECT_TRUE(KeyMatchesCertificate(*key, *cert).ok());
}

// Replaces the CSR's CN after it was signed, so its signature no longer covers
// its content.
std::string TamperedCsr(const std::string& csr_pem) {
  BIO* in = BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size()));
  X509_REQ* req = PEM_read_bio_X509_REQ(in, nullptr, nullptr, nullptr);
  BIO_free(in);
  unsigned char* der = nullptr;
  int len = i2d_X509_REQ(req, &der);
  X509_REQ_free(req);
  std::string bytes(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  size_t at = bytes.find("honest-agent");
  EXPECT_NE(at, std::string::npos);
  bytes.replace(at, 12, "forged-agent");
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
  req = d2i_X509_REQ(nullptr, &p, static_cast<long>(bytes.size()));
  BIO* out = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_REQ(out, req);
  char* data = nullptr;
  long n = BIO_get_mem_data(out, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(out);
  X509_REQ_free(req);
  return pem;
}

TEST(PkiTest, CsrWithABadSignatureIsRefused) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  auto key = GeneratePrivateKeyPem();
  ASSERT_TRUE(key.ok());
  auto csr = CreateCsr(*key, "honest-agent");
  ASSERT_TRUE(csr.ok());
  auto r = SignClientCertificate(ca, TamperedCsr(*csr), "h-1", kDay, clock);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("signature does not verify"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(SignClientCertificate(ca, "garbage", "h-1", kDay, clock).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PkiTest, ExpiredAndNotYetValidCertificatesAreRefused) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  std::string cert = ClientCert(ca, clock, "h-1", seconds(3600));
  clock.AdvanceTime(seconds(3599));
  EXPECT_TRUE(VerifyCertificate(ca.cert_pem, cert, clock).ok());
  clock.AdvanceTime(seconds(2));
  Status s = VerifyCertificate(ca.cert_pem, cert, clock);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("expired"), std::string::npos) << s.message();

  FakeClock early(clock.Now() - hours(48));
  s = VerifyCertificate(ca.cert_pem, cert, early);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("not yet valid"), std::string::npos) << s.message();
}

TEST(PkiTest, CertificateOfAnotherCaIsRefused) {
  FakeClock clock;
  Issued ours = NewCa(clock, "hpod CA ours");
  Issued theirs = NewCa(clock, "hpod CA ours");  // same name, other key
  std::string cert = ClientCert(theirs, clock, "h-1");
  Status s = VerifyCertificate(ours.cert_pem, cert, clock);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_EQ(VerifyCertificate(ours.cert_pem, "not a cert", clock).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(VerifyCertificate("not a CA", cert, clock).code(), StatusCode::kInvalidArgument);
  // The CA itself is not a leaf hpodd accepts.
  EXPECT_EQ(VerifyCertificate(ours.cert_pem, ours.cert_pem, clock).code(),
            StatusCode::kUnauthenticated);
}

TEST(PkiTest, PinIsStableLowercaseHexOfTheDer) {
  FakeClock clock;
  Issued ca = NewCa(clock);
  auto pin = CaPin(ca.cert_pem);
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(pin->size(), 64u);
  EXPECT_TRUE(std::all_of(pin->begin(), pin->end(),
                          [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }));
  EXPECT_EQ(*CaPin(ca.cert_pem), *pin);
  EXPECT_EQ(ParseCertificate(ca.cert_pem)->sha256_hex, *pin);
  EXPECT_NE(*CaPin(NewCa(clock).cert_pem), *pin);
  EXPECT_EQ(CaPin("nope").status().code(), StatusCode::kInvalidArgument);
}

TEST(PkiTest, PublicKeyHashNamesTheKey) {
  auto key = GeneratePrivateKeyPem();
  ASSERT_TRUE(key.ok());
  auto hash = PublicKeySha256(*key);
  ASSERT_TRUE(hash.ok()) << hash.status().ToString();
  EXPECT_EQ(hash->size(), 64u);
  EXPECT_EQ(*PublicKeySha256(*key), *hash);
  EXPECT_NE(*PublicKeySha256(*GeneratePrivateKeyPem()), *hash);
  EXPECT_EQ(PublicKeySha256("x").status().code(), StatusCode::kInvalidArgument);
}

TEST(PkiTest, KeyOfAnotherCertificateIsDetected) {
  FakeClock clock;
  Issued a = NewCa(clock);
  Issued b = NewCa(clock);
  EXPECT_EQ(KeyMatchesCertificate(b.key_pem, a.cert_pem).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(KeyMatchesCertificate("x", a.cert_pem).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KeyMatchesCertificate(a.key_pem, "x").code(), StatusCode::kInvalidArgument);
}

// The openssl CLI, an independent implementation, accepts what we make and we
// accept what it makes.
TEST(PkiTest, InteroperatesWithTheOpensslCli) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/openssl";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hpod-pki-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto path = [&](const char* name) { return (dir / name).string(); };
  const Clock& clock = RealClock::Get();  // openssl verifies at the real time
  Issued ca = NewCa(clock);
  auto server = IssueServerCertificate(ca, {"hpodd.example", "192.0.2.1"}, kDay, clock);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(WriteFileAtomic(path("ca.pem"), ca.cert_pem).ok());
  ASSERT_TRUE(WriteFileAtomic(path("server.pem"), server->cert_pem).ok());
  ASSERT_TRUE(WriteFileAtomic(path("client.pem"), ClientCert(ca, clock, "h-1")).ok());

  const std::string openssl = "/usr/bin/openssl";
  auto out = RunChecked({openssl, "verify", "-x509_strict", "-purpose", "sslserver", "-CAfile",
                         path("ca.pem"), path("server.pem")});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE(out->find("server.pem: OK"), std::string::npos) << *out;
  out = RunChecked({openssl, "verify", "-x509_strict", "-purpose", "sslclient", "-CAfile",
                    path("ca.pem"), path("client.pem")});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  out =
      RunChecked({openssl, "x509", "-in", path("server.pem"), "-noout", "-ext", "subjectAltName"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE(out->find("DNS:hpodd.example, IP Address:192.0.2.1"), std::string::npos) << *out;
  // The pin is what `openssl x509 -outform DER | sha256sum` gives.
  out = RunChecked({"/bin/sh", "-c",
                    openssl + " x509 -in " + path("ca.pem") + " -outform DER | " + openssl +
                        " dgst -sha256 -r"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->substr(0, 64), *CaPin(ca.cert_pem));

  // A key and CSR made by the CLI, signed by us.
  ASSERT_TRUE(RunChecked({openssl, "genpkey", "-algorithm", "EC", "-pkeyopt",
                          "ec_paramgen_curve:P-256", "-out", path("agent.key")})
                  .ok());
  ASSERT_TRUE(RunChecked({openssl, "req", "-new", "-key", path("agent.key"), "-subj", "/CN=cli",
                          "-out", path("agent.csr")})
                  .ok());
  out = RunChecked({"/bin/sh", "-c",
                    openssl + " pkey -in " + path("agent.key") + " -pubout -outform DER | " +
                        openssl + " dgst -sha256 -r"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->substr(0, 64), *PublicKeySha256(*ReadFile(path("agent.key"))));
  auto csr = ReadFile(path("agent.csr"));
  ASSERT_TRUE(csr.ok());
  auto cert = SignClientCertificate(ca, *csr, "h-cli", kDay, clock);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  EXPECT_TRUE(KeyMatchesCertificate(*ReadFile(path("agent.key")), *cert).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hpod::auth::pki
