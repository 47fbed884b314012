#include "hpod/controlplane/api_tls.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/controlplane/init.h"

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;

class ApiTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hpod-api-tls-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string data_dir() const { return dir_.string(); }

  fs::path dir_;
  FakeClock clock_;
};

TEST(IsLoopbackAddressTest, OnlyLoopbackIsLoopback) {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a :
       {"0.0.0.0", "::", "10.0.0.5", "192.168.1.10", "fe80::1", "128.0.0.1", "hpodd.example"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

// Loopback stays plain HTTP unless --tls: the quickstart needs no CA.
TEST_F(ApiTlsTest, LoopbackIsPlainUnlessForced) {
  auto tls = ApiTlsOptions(data_dir(), "127.0.0.1", /*force=*/false, clock_);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_FALSE(tls->enabled);
}

// Any other address is TLS only; without the certificate hpodd does not start,
// and says which command makes it.
TEST_F(ApiTlsTest, OtherAddressesNeedTheCertificate) {
  auto tls = ApiTlsOptions(data_dir(), "10.0.0.5", /*force=*/false, clock_);
  ASSERT_EQ(tls.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tls.status().message().find("only TLS on an address other than loopback, such as "
                                        "10.0.0.5"),
            std::string::npos)
      << tls.status().message();
  EXPECT_NE(tls.status().message().find("hpodd init --data-dir " + data_dir() +
                                        " --listen 10.0.0.5:PORT"),
            std::string::npos)
      << tls.status().message();
  EXPECT_EQ(ApiTlsOptions(data_dir(), "127.0.0.1", /*force=*/true, clock_).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(ApiTlsTest, ServesTheCertificateThatNamesTheAddress) {
  auto made = EnsureTls(data_dir(), ServerCertificateNames("10.0.0.5", {}), clock_);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto tls = ApiTlsOptions(data_dir(), "10.0.0.5", /*force=*/false, clock_);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_TRUE(tls->enabled);
  EXPECT_EQ(tls->cert_file, TlsFiles(data_dir()).server_cert);
  EXPECT_EQ(tls->key_file, TlsFiles(data_dir()).server_key);
  EXPECT_FALSE(tls->require_client_cert);
  // A wildcard address is named by no certificate: not checked.
  EXPECT_TRUE(ApiTlsOptions(data_dir(), "0.0.0.0", false, clock_).ok());
}

// A certificate every client would refuse is refused at start, naming the fix.
TEST_F(ApiTlsTest, RefusesACertificateThatDoesNotNameTheAddress) {
  ASSERT_TRUE(EnsureTls(data_dir(), ServerCertificateNames("10.0.0.5", {}), clock_).ok());
  auto tls = ApiTlsOptions(data_dir(), "10.0.0.6", false, clock_);
  ASSERT_EQ(tls.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tls.status().message().find("names 10.0.0.5, not 10.0.0.6"), std::string::npos)
      << tls.status().message();
  EXPECT_NE(tls.status().message().find("hpodd rotate-certs --data-dir " + data_dir() +
                                        " --tls-name 10.0.0.6"),
            std::string::npos)
      << tls.status().message();
}

// An expired certificate too (the fake clock moves past its year).
TEST_F(ApiTlsTest, RefusesAnExpiredCertificate) {
  ASSERT_TRUE(EnsureTls(data_dir(), ServerCertificateNames("10.0.0.5", {}), clock_).ok());
  clock_.AdvanceTime(kServerCertValidity + std::chrono::hours(1));
  auto tls = ApiTlsOptions(data_dir(), "10.0.0.5", false, clock_);
  ASSERT_EQ(tls.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tls.status().message().find("does not verify"), std::string::npos)
      << tls.status().message();
}

}  // namespace
}  // namespace hpod::controlplane
