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
using api::HostState;
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
    r.instance_type = "ml.p5.4xlarge";  // 16 vCPUs, 256 GiB, 1 GPU: this machine fits
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
  EXPECT_EQ(joined->host.state, "Joining");
  EXPECT_EQ(joined->host.instance_type, "ml.p5.4xlarge");
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
  // A launch's host is its instance's type by construction: no type is asked for.
  JoinRequest r = Request(Token(spec));
  r.instance_type.clear();
  auto joined = service_->Join(r);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->host.instance_id, "i-0123456789abcdef0");
  EXPECT_EQ(joined->host.state, "Assigned");
  EXPECT_EQ(joined->host.instance_type, "");
}

TEST_F(JoinServiceTest, AHostIsJoiningUntilItsAgentConnectsThenSpare) {
  auto joined = service_->Join(Request(Token()));
  ASSERT_TRUE(joined.ok());
  const std::string id = joined->host.host_id;
  clock_.AdvanceTime(std::chrono::seconds(5));
  ASSERT_TRUE(service_->HostConnected(id).ok());
  ASSERT_TRUE(service_->HostConnected(id).ok());  // reconnects change nothing
  ASSERT_TRUE(store_->Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::HostRecord h, tx.GetHost(id));
    EXPECT_EQ(h.state, "Spare");
    EXPECT_THAT(h.state_reason, HasSubstr("its agent connected"));
    HPOD_ASSIGN_OR_RETURN(auto history, tx.ListHostHistory(id));
    EXPECT_EQ(history.size(), 2u);
    if (history.size() == 2) {
      EXPECT_EQ(history[0].from_state, "");
      EXPECT_EQ(history[0].to_state, "Joining");
      EXPECT_THAT(history[0].reason, HasSubstr("as ml.p5.4xlarge"));
      EXPECT_EQ(history[1].from_state, "Joining");
      EXPECT_EQ(history[1].to_state, "Spare");
      EXPECT_EQ(history[1].time, history[0].time + 5);
    }
    return OkStatus();
  }).ok());
  EXPECT_EQ(service_->HostConnected("h-0000000000000000").code(), StatusCode::kNotFound);

  // The boot id its agent reports on each connection is kept: a reboot shows.
  // So is the address its channel came from: where other nodes reach it.
  ASSERT_TRUE(
      service_->HostConnected(id, "7a0e5c1e-0000-4000-8000-000000000001", "10.9.0.11").ok());
  ASSERT_TRUE(service_->HostConnected(id, "").ok());  // not reported: kept
  ASSERT_TRUE(store_->Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::HostRecord h, tx.GetHost(id));
    EXPECT_EQ(h.facts["boot_id"], "7a0e5c1e-0000-4000-8000-000000000001");
    EXPECT_EQ(h.facts["channel_address"], "10.9.0.11");
    EXPECT_EQ(h.state, "Spare");
    HPOD_ASSIGN_OR_RETURN(auto history, tx.ListHostHistory(id));
    EXPECT_EQ(history.size(), 2u);  // not a state change
    return OkStatus();
  }).ok());
}

TEST_F(JoinServiceTest, APoolHostNeedsAnInstanceTypeItsFactsFit) {
  std::string token = Token();
  JoinRequest none = Request(token);
  none.instance_type.clear();
  Status s = service_->Join(none).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--instance-type"));
  // 96 CPUs, 512 GiB, 1 GPU: the largest types it fits come first.
  EXPECT_THAT(s.message(), HasSubstr("it fits ml.g6e.16xlarge, ml.g5.16xlarge"));

  JoinRequest big = Request(token);
  big.instance_type = "ml.p5.48xlarge";
  s = service_->Join(big).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "this machine is not a ml.p5.48xlarge: it has 96 CPUs, ml.p5.48xlarge has 192; it "
            "has 512.0 GiB of memory, ml.p5.48xlarge has 2048.0 GiB (at least 90% of it is "
            "needed); it has 1 GPUs, ml.p5.48xlarge has 8");
  JoinRequest unknown = Request(token);
  unknown.instance_type = "ml.x9.huge";
  EXPECT_THAT(service_->Join(unknown).status().message(),
              HasSubstr("not a HyperPod instance type"));

  // The token's type serves when the agent names none; none of the refusals
  // above spent its one use.
  JoinTokenSpec typed;
  typed.instance_type = "ml.g5.16xlarge";  // 64 vCPUs, 256 GiB, 1 GPU
  JoinRequest from_token = Request(Token(typed), kMachineB);
  from_token.instance_type.clear();
  auto joined = service_->Join(from_token);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->host.instance_type, "ml.g5.16xlarge");
  EXPECT_TRUE(service_->Join(Request(token)).ok());
}

TEST_F(JoinServiceTest, ATokensTypeIsTheWordOnIt) {
  JoinTokenSpec typed;
  typed.instance_type = "ml.g5.16xlarge";
  JoinRequest other = Request(Token(typed));
  other.instance_type = "ml.p5.4xlarge";  // fits too, but is not what the admin said
  Status s = service_->Join(other).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is for ml.g5.16xlarge hosts, and this join says "
                                     "ml.p5.4xlarge"));
  other.instance_type = "ml.g5.16xlarge";  // the same: fine
  EXPECT_TRUE(service_->Join(other).ok());
}

TEST_F(JoinServiceTest, AMachineJoiningAgainKeepsWhatAPersonMustUndo) {
  JoinTokenSpec spec;
  spec.uses = 10;
  std::string token = Token(spec);
  auto first = service_->Join(Request(token));
  ASSERT_TRUE(first.ok());
  const std::string id = first->host.host_id;
  auto set_state = [&](HostState to, const std::string& instance) {
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(store::HostRecord h, tx.GetHost(id));
                      h.state = api::NameString(to);
                      h.instance_id = instance;
                      return tx.PutHost(h);
                    })
                    .ok());
  };
  // Serving a node: refused, the node is replaced first.
  set_state(HostState::kAssigned, "i-0123456789abcdef0");
  Status s = service_->Join(Request(token)).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("serves instance i-0123456789abcdef0; replace that node"));
  // Quarantined: it joins (a new certificate) and stays Quarantined.
  set_state(HostState::kQuarantined, "");
  auto again = service_->Join(Request(token));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->host.state, "Quarantined");
  // Revoked: joining is its way back.
  ASSERT_TRUE(service_->RevokeHost(id).ok());
  auto back = service_->Join(Request(token));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->host.state, "Joining");
  EXPECT_EQ(back->host.host_id, id);
}

TEST_F(JoinServiceTest, TheApiListsTokensAndHostsAndRevokes) {
  std::vector<std::string> disconnected;
  HostApiHooks hooks;
  hooks.connected = [](const store::HostRecord&) { return true; };
  hooks.disconnect = [&](const store::HostRecord& h) { disconnected.push_back(h.host_id); };
  HostApi api(*store_, clock_, service_.get(), hooks);
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
  EXPECT_EQ((*revoked)["Status"], "Retired");
  auto listed = api.Call("HpodListHosts", nlohmann::json::object());
  EXPECT_EQ((*listed)["Hosts"][0]["Status"], "Retired");
  EXPECT_THAT((*listed)["Hosts"][0]["StatusReason"].get<std::string>(), HasSubstr("revoked"));
  EXPECT_FALSE((*listed)["Hosts"][0].contains("CertificateSerial"));
  auto described = api.Call("HpodDescribeHost", {{"HostId", joined->host.host_id}});
  ASSERT_TRUE(described.ok());
  EXPECT_EQ((*described)["Revoked"], true);
  // A revoked host comes back only by joining again, not by a release.
  auto released = api.Call("HpodReleaseHost", {{"HostId", joined->host.host_id}});
  EXPECT_EQ(released.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(released.status().message(), HasSubstr("join the machine again"));
}

}  // namespace
}  // namespace hpod::controlplane
