#include "hpod/controlplane/init.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/auth/pki.h"
#include "hpod/base/file_util.h"

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(InitTest, CreatesStoreKeyAndProfileIdempotently) {
  fs::path dir = fs::temp_directory_path() / ("hpod-init-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "aws");
  {
    std::ofstream f(dir / "aws" / "credentials");
    f << "[default]\naws_access_key_id = KEEP\naws_secret_access_key = ME\n";
  }
  InitOptions o;
  o.data_dir = (dir / "data").string();
  o.aws_dir = (dir / "aws").string();
  o.endpoint_url = "http://127.0.0.1:9999";
  FakeClock clock;
  auto r = InitDataDir(o, clock);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->access_key_id.rfind("HPOD", 0), 0u);
  std::string creds = Read(r->credentials_file);
  EXPECT_NE(creds.find("[default]\naws_access_key_id = KEEP"), std::string::npos);
  EXPECT_NE(creds.find("[hpod]\naws_access_key_id = " + r->access_key_id), std::string::npos);
  std::string config = Read(r->config_file);
  EXPECT_NE(config.find("[profile hpod]"), std::string::npos);
  EXPECT_NE(config.find("endpoint_url = http://127.0.0.1:9999"), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat(r->credentials_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(o.data_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  auto again = InitDataDir(o, clock);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->access_key_id, r->access_key_id);
  std::string creds2 = Read(r->credentials_file);
  // One [hpod] section, not two.
  EXPECT_EQ(creds2.find("[hpod]"), creds2.rfind("[hpod]"));
  fs::remove_all(dir);
}

// ---- TLS (issue 25) ----

class InitTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hpod-init-tls-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    options_.data_dir = (dir_ / "data").string();
    options_.aws_dir = (dir_ / "aws").string();
    options_.tls_names = {"hpodd.example"};
  }
  void TearDown() override { fs::remove_all(dir_); }

  InitResult Init() {
    auto r = InitDataDir(options_, clock_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : InitResult{};
  }
  static unsigned Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  }
  auth::pki::CertificateInfo Server() {
    auto info = auth::pki::ParseCertificate(Read(TlsFiles(options_.data_dir).server_cert));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? *info : auth::pki::CertificateInfo{};
  }

  fs::path dir_;
  InitOptions options_;
  FakeClock clock_;
};

TEST_F(InitTlsTest, FreshInitWritesACaAndAServerCertificateForTheNames) {
  InitResult r = Init();
  const TlsPaths p = TlsFiles(options_.data_dir);
  EXPECT_EQ(r.tls.paths.ca_cert, p.ca_cert);
  EXPECT_TRUE(r.tls.ca_created);
  EXPECT_TRUE(r.tls.server_issued);
  EXPECT_TRUE(r.tls.changes.empty());
  EXPECT_EQ(Mode(options_.data_dir), 0700u);
  EXPECT_EQ(Mode(p.dir), 0700u);
  EXPECT_EQ(Mode(p.ca_cert), 0644u);
  EXPECT_EQ(Mode(p.ca_key), 0600u);
  EXPECT_EQ(Mode(p.server_cert), 0644u);
  EXPECT_EQ(Mode(p.server_key), 0600u);
  const std::string ca = Read(p.ca_cert);
  EXPECT_EQ(r.tls.ca_pin, *auth::pki::CaPin(ca));
  EXPECT_TRUE(auth::pki::ParseCertificate(ca)->is_ca);
  EXPECT_TRUE(auth::pki::KeyMatchesCertificate(Read(p.ca_key), ca).ok());
  EXPECT_TRUE(
      auth::pki::VerifyCertificate(ca, Read(p.server_cert), clock_, auth::pki::Purpose::kServer)
          .ok());
  EXPECT_TRUE(auth::pki::KeyMatchesCertificate(Read(p.server_key), Read(p.server_cert)).ok());
  auth::pki::CertificateInfo server = Server();
  EXPECT_EQ(server.ip_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(server.dns_names, (std::vector<std::string>{"localhost", "hpodd.example"}));
  EXPECT_EQ(server.not_after, clock_.Now() + kServerCertValidity);
  EXPECT_EQ(r.tls.server_serial, server.serial_hex);
  EXPECT_EQ(r.tls.server_names,
            (std::vector<std::string>{"localhost", "hpodd.example", "127.0.0.1"}));
  // The default endpoint is http://: no ca_bundle in the profile.
  EXPECT_EQ(Read(r.config_file).find("ca_bundle"), std::string::npos);
}

TEST_F(InitTlsTest, SecondInitKeepsTheCaAndTheServerCertificate) {
  InitResult first = Init();
  const std::string server_key = Read(TlsFiles(options_.data_dir).server_key);
  InitResult second = Init();
  EXPECT_EQ(second.tls.ca_pin, first.tls.ca_pin);
  EXPECT_FALSE(second.tls.ca_created);
  EXPECT_FALSE(second.tls.server_issued);
  EXPECT_EQ(second.tls.server_serial, first.tls.server_serial);
  EXPECT_TRUE(second.tls.changes.empty());
  EXPECT_EQ(Read(TlsFiles(options_.data_dir).server_key), server_key);
  // A name it already has, in another spelling, changes nothing either.
  options_.tls_names = {"HPODD.example", "127.0.0.1"};
  EXPECT_FALSE(Init().tls.server_issued);
}

TEST_F(InitTlsTest, ANewTlsNameReissuesTheServerCertificateKeepingTheOldNames) {
  InitResult first = Init();
  options_.tls_names = {"10.1.2.3"};
  InitResult second = Init();
  EXPECT_EQ(second.tls.ca_pin, first.tls.ca_pin);
  EXPECT_TRUE(second.tls.server_issued);
  EXPECT_NE(second.tls.server_serial, first.tls.server_serial);
  ASSERT_EQ(second.tls.changes.size(), 1u);
  EXPECT_EQ(second.tls.changes[0], "server certificate re-issued: it does not cover 10.1.2.3");
  auth::pki::CertificateInfo server = Server();
  EXPECT_EQ(server.ip_addresses, (std::vector<std::string>{"127.0.0.1", "10.1.2.3"}));
  EXPECT_EQ(server.dns_names, (std::vector<std::string>{"localhost", "hpodd.example"}));
}

TEST_F(InitTlsTest, RotateGivesANewKeyAndSerialFromTheSameCa) {
  InitResult first = Init();
  const TlsPaths p = TlsFiles(options_.data_dir);
  const std::string old_key = Read(p.server_key);
  clock_.AdvanceTime(std::chrono::hours(24));
  auto rotated = RotateServerCertificate(options_.data_dir, {"127.0.0.1", "hpodd.example"}, clock_);
  ASSERT_TRUE(rotated.ok()) << rotated.status().ToString();
  EXPECT_TRUE(rotated->server_issued);
  EXPECT_FALSE(rotated->ca_created);
  EXPECT_EQ(rotated->ca_pin, first.tls.ca_pin);
  EXPECT_NE(rotated->server_serial, first.tls.server_serial);
  EXPECT_NE(Read(p.server_key), old_key);
  EXPECT_TRUE(auth::pki::VerifyCertificate(Read(p.ca_cert), Read(p.server_cert), clock_,
                                           auth::pki::Purpose::kServer)
                  .ok());
  // "localhost" was not asked for again, but the old certificate had it.
  auth::pki::CertificateInfo server = Server();
  EXPECT_EQ(server.dns_names, (std::vector<std::string>{"hpodd.example", "localhost"}));
  EXPECT_EQ(server.not_after, clock_.Now() + kServerCertValidity);
  EXPECT_EQ(Mode(p.server_key), 0600u);
}

TEST_F(InitTlsTest, RotateWithoutACaIsRefused) {
  auto r = RotateServerCertificate(options_.data_dir, {"127.0.0.1"}, clock_);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("hpodd init"), std::string::npos);
  EXPECT_FALSE(fs::exists(TlsFiles(options_.data_dir).dir));
}

TEST_F(InitTlsTest, InitRenewsAServerCertificateNearItsEnd) {
  InitResult first = Init();
  clock_.AdvanceTime(kServerCertValidity - kServerCertRenewWithin + std::chrono::hours(1));
  InitResult second = Init();
  EXPECT_TRUE(second.tls.server_issued);
  ASSERT_EQ(second.tls.changes.size(), 1u);
  EXPECT_NE(second.tls.changes[0].find("it ends on"), std::string::npos);
  EXPECT_EQ(second.tls.ca_pin, first.tls.ca_pin);
}

TEST_F(InitTlsTest, ALostCaKeyIsRefusedAndALostCaCertificateIsMadeAgainFromTheKey) {
  InitResult first = Init();
  const TlsPaths p = TlsFiles(options_.data_dir);
  const std::string key = Read(p.ca_key);
  fs::remove(p.ca_key);
  auto r = InitDataDir(options_, clock_);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("restore ca.key"), std::string::npos);

  ASSERT_TRUE(WriteFileAtomic(p.ca_key, key, 0600).ok());
  fs::remove(p.ca_cert);
  InitResult again = Init();
  EXPECT_FALSE(again.tls.ca_created);
  EXPECT_NE(again.tls.ca_pin, first.tls.ca_pin);
  ASSERT_EQ(again.tls.changes.size(), 1u);
  EXPECT_NE(again.tls.changes[0].find("made again from ca.key"), std::string::npos);
  // The server certificate the key signed still verifies: it stays.
  EXPECT_FALSE(again.tls.server_issued);
  EXPECT_TRUE(auth::pki::VerifyCertificate(Read(p.ca_cert), Read(p.server_cert), clock_).ok());
}

TEST_F(InitTlsTest, HttpsEndpointGetsTheCaBundleInTheProfile) {
  options_.endpoint_url = "https://hpodd.example:8450";
  InitResult r = Init();
  EXPECT_NE(Read(r.config_file).find("ca_bundle = " + r.tls.paths.ca_cert), std::string::npos)
      << Read(r.config_file);
  options_.endpoint_url = "http://127.0.0.1:8450";
  Init();
  EXPECT_EQ(Read(r.config_file).find("ca_bundle"), std::string::npos);
}

TEST_F(InitTlsTest, ABadTlsNameIsRefused) {
  options_.tls_names = {"not a name"};
  auto r = InitDataDir(options_, clock_);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a name"), std::string::npos);
}

TEST(InitTlsNamesTest, ServerCertificateNamesFollowTheListenAddress) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ServerCertificateNames("127.0.0.1", {}), (V{"127.0.0.1", "localhost"}));
  EXPECT_EQ(ServerCertificateNames("::1", {}), (V{"::1", "localhost"}));
  // hpodd serves "localhost" on 127.0.0.1, which clients may dial by address.
  EXPECT_EQ(ServerCertificateNames("localhost", {}), (V{"localhost", "127.0.0.1"}));
  EXPECT_EQ(ServerCertificateNames("10.0.0.5", {"hpodd.example", "10.0.0.5", "HPODD.EXAMPLE"}),
            (V{"10.0.0.5", "hpodd.example"}));
  EXPECT_EQ(ServerCertificateNames("fd00::0001", {"fd00::1"}), (V{"fd00::0001"}));
  V any = ServerCertificateNames("0.0.0.0", {"192.0.2.9"});
  EXPECT_NE(std::find(any.begin(), any.end(), "localhost"), any.end());
  EXPECT_NE(std::find(any.begin(), any.end(), "127.0.0.1"), any.end());
  EXPECT_EQ(any.back(), "192.0.2.9");
  V any6 = ServerCertificateNames("::", {});
  EXPECT_NE(std::find(any6.begin(), any6.end(), "::1"), any6.end());
}

}  // namespace
}  // namespace hpod::controlplane
