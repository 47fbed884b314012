// Join tokens, joins and host certificates (join_service.h) and their API
// (host_api.h), over a real SQLite store and real certificates.

#include "hpod/controlplane/join_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "hpod/auth/join_token.h"
#include "hpod/controlplane/host_api.h"

namespace hpod::controlplane {
namespace {

namespace pki = auth::pki;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMachineA[] = "0123456789abcdef0123456789abcdef";
constexpr char kMachineB[] = "fedcba9876543210fedcba9876543210";

class JoinServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore({});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    auto ca = pki::CreateCa("hpod test CA", std::chrono::hours(24 * 365), clock_);
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = *ca;
    pin_ = *pki::CaPin(ca_.cert_pem);
    service_ = std::make_unique<JoinService>(
        *store_, clock_, ca_, pin_, JoinServiceOptions{std::chrono::hours(1)},
        [this](const store::HostRecord& h) { return live_.count(h.host_id) > 0; });
  }

  std::string Token(JoinTokenSpec spec = {}) {
    auto t = service_->CreateToken(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->text : "";
  }

  JoinRequest Request(const std::string& token, const std::string& machine = kMachineA) {
    JoinRequest r;
    r.token = token;
    key_ = *pki::GeneratePrivateKeyPem();
    r.csr_pem = *pki::CreateCsr(key_, "whatever-the-agent-says");
    r.facts = {{"machine_id", machine},
               {"hostname", "gpu-17"},
               {"cpus", 96},
               {"memory_bytes", int64_t{512} << 30},
               {"gpus", {{{"name", "H200"}}}},
               {"os", "Debian GNU/Linux 12 (bookworm)"},
               {"slurm_version", "22.05.8"}};
    return r;
  }

  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  pki::Issued ca_;
  std::string pin_;
  std::string key_;
  std::set<std::string> live_;
  std::unique_ptr<JoinService> service_;
};

TEST_F(JoinServiceTest, AJoinSignsTheMachinesKeyWithTheHostIdAndSpendsAUse) {
  JoinTokenSpec spec;
  spec.pool = "rack4";
  spec.uses = 2;
  auto created = service_->CreateToken(spec);
  ASSERT_TRUE(created.ok());
  auto parsed = auth::ParseJoinToken(created->text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->ca_pin, pin_);
  // Only the secret's hash is kept.
  EXPECT_THAT(created->record.secret_hash, Not(HasSubstr(parsed->secret)));

  auto joined = service_->Join(Request(created->text));
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_THAT(joined->host.host_id, ::testing::MatchesRegex("h-[0-9a-f]{16}"));
  EXPECT_EQ(joined->host.pool, "rack4");
  EXPECT_EQ(joined->host.state, "Spare");
  EXPECT_TRUE(pki::KeyMatchesCertificate(key_, joined->certificate.certificate_pem).ok());
  auto info = pki::ParseCertificate(joined->certificate.certificate_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, joined->host.host_id);
  EXPECT_EQ(info->serial_hex, joined->certificate.serial);
  EXPECT_TRUE(pki::VerifyCertificate(ca_.cert_pem, joined->certificate.certificate_pem, clock_,
                                     pki::Purpose::kClient)
                  .ok());

  auto host = service_->Authenticate(joined->certificate.serial, joined->host.host_id);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->facts["cpus"], 96);
  store_->Read([&](store::ReadTx& tx) -> Status {
    EXPECT_EQ(tx.GetJoinToken(parsed->id)->uses_left, 1);
    return OkStatus();
  });
}

TEST_F(JoinServiceTest, EveryTokenRefusalIsOneLineWithoutTheSecret) {
  std::string good = Token();
  auto parsed = *auth::ParseJoinToken(good);

  auth::JoinToken other_ca = parsed;
  other_ca.ca_pin = std::string(64, 'a');
  auth::JoinToken unknown = parsed;
  unknown.id = "00000000";
  auth::JoinToken wrong_secret = parsed;
  wrong_secret.secret = std::string(32, 'x');

  struct Case {
    std::string token;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{{auth::FormatJoinToken(other_ca), "is for another hpodd"},
                                         {auth::FormatJoinToken(unknown), "is not valid here"},
                                         {auth::FormatJoinToken(wrong_secret), "is not valid here"},
                                         {"hpodjoin1.zz", "join token"}}) {
    auto r = service_->Join(Request(c.token));
    ASSERT_FALSE(r.ok()) << c.token;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says));
    EXPECT_THAT(r.status().message(), Not(HasSubstr(parsed.secret)));
    EXPECT_THAT(r.status().message(), Not(HasSubstr("\n")));
  }
  // None of them spent the token.
  EXPECT_TRUE(service_->Join(Request(good)).ok());
}

TEST_F(JoinServiceTest, RevokedExpiredAndUsedUpTokensAreRefused) {
  std::string revoked = Token();
  ASSERT_TRUE(service_->RevokeToken(auth::ParseJoinToken(revoked)->id).ok());
  auto r = service_->Join(Request(revoked));
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(r.status().message(), HasSubstr("was revoked"));

  JoinTokenSpec short_lived;
  short_lived.ttl = std::chrono::seconds(60);
  std::string expired = Token(short_lived);
  clock_.AdvanceTime(std::chrono::seconds(61));
  r = service_->Join(Request(expired));
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(r.status().message(), HasSubstr("expired at"));

  std::string once = Token();
  ASSERT_TRUE(service_->Join(Request(once, kMachineA)).ok());
  r = service_->Join(Request(once, kMachineB));
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(r.status().message(), HasSubstr("is used up"));

  EXPECT_EQ(service_->RevokeToken("12345678").status().code(), StatusCode::kNotFound);
}

TEST_F(JoinServiceTest, ALiveMachineCannotJoinTwiceAndAGoneOneKeepsItsHostId) {
  JoinTokenSpec spec;
  spec.uses = 3;
  std::string token = Token(spec);
  auto first = service_->Join(Request(token));
  ASSERT_TRUE(first.ok());
  live_.insert(first->host.host_id);

  auto again = service_->Join(Request(token));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("already joined as host " + first->host.host_id));

  // Its agent is gone (the machine was reinstalled): it joins again as the same
  // host, and its old certificate is dead.
  live_.clear();
  auto second = service_->Join(Request(token));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->host.host_id, first->host.host_id);
  EXPECT_NE(second->certificate.serial, first->certificate.serial);
  auto old = service_->Authenticate(first->certificate.serial, first->host.host_id);
  EXPECT_EQ(old.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(old.status().message(), HasSubstr("was revoked"));
  EXPECT_TRUE(service_->Authenticate(second->certificate.serial, second->host.host_id).ok());
}

TEST_F(JoinServiceTest, BadFactsAndBadCsrsAreRefusedWithoutSpendingTheToken) {
  std::string token = Token();
  JoinRequest no_machine = Request(token);
  no_machine.facts.erase("machine_id");
  EXPECT_THAT(service_->Join(no_machine).status().message(), HasSubstr("machine_id"));
  JoinRequest bad_csr = Request(token);
  bad_csr.csr_pem =
      "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
  EXPECT_EQ(service_->Join(bad_csr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(service_->Join(Request(token)).ok());
}

TEST_F(JoinServiceTest, CertificatesAreCheckedAgainstWhatWasIssuedAndRevoked) {
  auto joined = service_->Join(Request(Token()));
  ASSERT_TRUE(joined.ok());
  const std::string host = joined->host.host_id;
  EXPECT_THAT(service_->Authenticate("abcdef", host).status().message(),
              HasSubstr("was not issued by this hpodd"));
  EXPECT_THAT(
      service_->Authenticate(joined->certificate.serial, "h-0000000000000000").status().message(),
      HasSubstr("was issued to host " + host));

  // Renewal: a new key, a new serial, the same host; both work until revoked.
  std::string new_key = *pki::GeneratePrivateKeyPem();
  auto renewed = service_->Renew(joined->certificate.serial, host, *pki::CreateCsr(new_key, "x"));
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_TRUE(pki::KeyMatchesCertificate(new_key, renewed->certificate_pem).ok());
  EXPECT_EQ(service_->Authenticate(renewed->serial, host)->host_id, host);

  auto revoked = service_->RevokeHost(host);
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ(revoked->size(), 2u);
  EXPECT_THAT(service_->Authenticate(renewed->serial, host).status().message(),
              HasSubstr("was revoked"));
  EXPECT_EQ(service_->Renew(renewed->serial, host, *pki::CreateCsr(new_key, "x")).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(service_->RevokeHost("h-0000000000000000").status().code(), StatusCode::kNotFound);
}

TEST_F(JoinServiceTest, ATokenForALaunchMakesTheHostThatNode) {
  JoinTokenSpec spec;
  spec.instance_id = "i-0123456789abcdef0";
  auto joined = service_->Join(Request(Token(spec)));
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->host.instance_id, "i-0123456789abcdef0");
  EXPECT_EQ(joined->host.state, "Assigned");
}

TEST_F(JoinServiceTest, TheApiListsTokensAndHostsAndRevokes) {
  std::vector<std::string> disconnected;
  HostApi api(
      *store_, clock_, *service_, [](const store::HostRecord&) { return true; },
      [&](const store::HostRecord& h) { disconnected.push_back(h.host_id); });
  auto created =
      api.Call("HpodCreateJoinToken", {{"Pool", "gpu"}, {"TtlSeconds", 120}, {"Uses", 1}});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string text = (*created)["JoinToken"];
  EXPECT_EQ((*created)["TokenId"], auth::ParseJoinToken(text)->id);
  EXPECT_DOUBLE_EQ((*created)["ExpiresAt"].get<double>(), clock_.NowEpochSeconds() + 120);

  auto joined = service_->Join(Request(text));
  ASSERT_TRUE(joined.ok());
  auto tokens = api.Call("HpodListJoinTokens", nlohmann::json::object());
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ((*tokens)["JoinTokens"][0]["Status"], "UsedUp");
  EXPECT_FALSE((*tokens)["JoinTokens"][0].contains("JoinToken"));

  auto hosts = api.Call("HpodListHosts", {{"Pool", "gpu"}});
  ASSERT_TRUE(hosts.ok());
  const auto& h = (*hosts)["Hosts"][0];
  EXPECT_EQ(h["HostId"], joined->host.host_id);
  EXPECT_EQ(h["Hostname"], "gpu-17");
  EXPECT_EQ(h["Cpus"], 96);
  EXPECT_EQ(h["MemoryMiB"], 512 * 1024);
  EXPECT_EQ(h["Gpus"], 1);
  EXPECT_EQ(h["Connected"], true);
  EXPECT_EQ(h["CertificateSerial"], joined->certificate.serial);

  auto revoked = api.Call("HpodRevokeHost", {{"HostId", joined->host.host_id}});
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ((*revoked)["RevokedSerials"][0], joined->certificate.serial);
  EXPECT_EQ(disconnected, std::vector<std::string>{joined->host.host_id});
  EXPECT_EQ((*api.Call("HpodListHosts", nlohmann::json::object()))["Hosts"][0]["Status"],
            "Revoked");
}

}  // namespace
}  // namespace hpod::controlplane
