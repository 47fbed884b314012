// Interoperability with botocore: testdata/botocore_vectors.json holds requests
// signed by botocore's SigV4Auth / SigV4QueryAuth (see gen_botocore_vectors.py).
// We must produce the same Authorization header (and presigned target), compute
// the same canonical request, and accept botocore's requests at their time.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hpod/auth/canonical.h"
#include "hpod/auth/in_memory_secret_lookup.h"
#include "hpod/auth/sigv4.h"
#include "hpod/base/crypto.h"

#ifndef HPOD_AUTH_TESTDATA
#error "HPOD_AUTH_TESTDATA must name src/auth/testdata"
#endif

namespace hpod::auth {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using std::chrono::system_clock;

json LoadVectors() {
  const std::string path = std::string(HPOD_AUTH_TESTDATA) + "/botocore_vectors.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str())["vectors"];
}

internal::HeaderList Headers(const json& list) {
  internal::HeaderList headers;
  for (const json& h : list) headers.emplace_back(h[0].get<std::string>(), h[1].get<std::string>());
  return headers;
}

std::string HeaderValue(const internal::HeaderList& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

std::string S(const json& j) { return j.get<std::string>(); }

struct Vector {
  json v;
  std::string name() const { return S(v["name"]); }
  std::string kind() const { return S(v["kind"]); }
  Credentials credentials() const {
    return {S(v["access_key_id"]), S(v["secret_access_key"]), S(v["session_token"])};
  }
  system_clock::time_point time(int64_t offset = 0) const {
    return system_clock::time_point(seconds(v["epoch_seconds"].get<int64_t>() + offset));
  }
  // The request as the client held it before signing.
  SignableRequest unsigned_request() const {
    return {S(v["method"]), S(v["target"]), Headers(v["headers"]), S(v["body"])};
  }
  // The request as botocore put it on the wire.
  SignableRequest signed_request() const {
    if (kind() == "presigned") {
      return {S(v["method"]), S(v["signed_target"]), Headers(v["headers"]), ""};
    }
    return {S(v["method"]), S(v["target"]), Headers(v["signed_headers"]), S(v["body"])};
  }
  VerifyOptions options() const {
    VerifyOptions options;
    options.service = S(v["service"]);
    options.region = S(v["region"]);
    return options;
  }
  InMemorySecretLookup secrets() const {
    return InMemorySecretLookup(
        InMemorySecretLookup::SecretMap{{S(v["access_key_id"]), S(v["secret_access_key"])}});
  }
};

std::vector<Vector> Vectors(std::string_view kind) {
  std::vector<Vector> out;
  for (const json& v : LoadVectors()) {
    if (v["kind"] == kind) out.push_back({v});
  }
  return out;
}

TEST(BotocoreVectorsTest, FileHoldsEveryKind) {
  EXPECT_GE(Vectors("header").size(), 6u);
  EXPECT_GE(Vectors("presigned").size(), 3u);
}

TEST(BotocoreVectorsTest, HeaderFormSignsIdentically) {
  for (const Vector& vec : Vectors("header")) {
    SCOPED_TRACE(vec.name());
    SignableRequest request = vec.unsigned_request();
    ASSERT_TRUE(SignRequest(request, vec.credentials(), vec.v["region"].get<std::string>(),
                            vec.v["service"].get<std::string>(), vec.time())
                    .ok());
    EXPECT_EQ(HeaderValue(request.headers, "Authorization"),
              vec.v["authorization"].get<std::string>());
    EXPECT_EQ(HeaderValue(request.headers, "X-Amz-Date"),
              HeaderValue(Headers(vec.v["signed_headers"]), "X-Amz-Date"));
    EXPECT_EQ(HeaderValue(request.headers, "X-Amz-Security-Token"),
              vec.v["session_token"].get<std::string>());
  }
}

// Pinpoints a disagreement before it shows up as an opaque signature mismatch.
TEST(BotocoreVectorsTest, CanonicalRequestsMatch) {
  for (const Vector& vec : Vectors("header")) {
    SCOPED_TRACE(vec.name());
    const SignableRequest request = vec.signed_request();
    const std::string authorization = HeaderValue(request.headers, "Authorization");
    const size_t from = authorization.find("SignedHeaders=") + 14;
    std::vector<std::string> names;
    std::stringstream list(authorization.substr(from, authorization.find(',', from) - from));
    for (std::string name; std::getline(list, name, ';');) names.push_back(name);
    const auto [path, query] = internal::SplitTarget(request.target);
    const std::string canonical =
        internal::CanonicalRequest(request.method, internal::CanonicalPath(path),
                                   internal::CanonicalQuery(internal::ParseQuery(query)),
                                   request.headers, names, HexEncode(Sha256(request.body)));
    EXPECT_EQ(canonical, vec.v["canonical_request"].get<std::string>());
  }
}

TEST(BotocoreVectorsTest, HeaderFormVerifies) {
  for (const Vector& vec : Vectors("header")) {
    SCOPED_TRACE(vec.name());
    const InMemorySecretLookup secrets = vec.secrets();
    StatusOr<VerifiedCaller> caller =
        VerifyRequest(vec.signed_request(), secrets, vec.options(), vec.time());
    ASSERT_TRUE(caller.ok()) << caller.status().ToString();
    EXPECT_EQ(caller->access_key_id, vec.v["access_key_id"].get<std::string>());
    EXPECT_EQ(caller->region, vec.v["region"].get<std::string>());
    EXPECT_EQ(caller->session_token, vec.v["session_token"].get<std::string>());
    EXPECT_TRUE(VerifyRequest(vec.signed_request(), secrets, vec.options(), vec.time(900)).ok());

    SignableRequest tampered = vec.signed_request();
    tampered.body += " ";
    EXPECT_EQ(VerifyRequest(tampered, secrets, vec.options(), vec.time()).status().aws_type(),
              "InvalidSignatureException");
    EXPECT_EQ(VerifyRequest(vec.signed_request(), secrets, vec.options(), vec.time(901))
                  .status()
                  .aws_type(),
              "InvalidSignatureException");
  }
}

TEST(BotocoreVectorsTest, PresignedTargetsMatchWhenThePayloadIsUnsigned) {
  int compared = 0;
  for (const Vector& vec : Vectors("presigned")) {
    if (vec.v["payload_signed"].get<bool>()) continue;  // PresignTarget never hashes a body
    SCOPED_TRACE(vec.name());
    StatusOr<std::string> target = PresignTarget(
        vec.unsigned_request(), vec.credentials(), vec.v["region"].get<std::string>(),
        vec.v["service"].get<std::string>(), vec.time(), seconds(vec.v["expires"].get<int64_t>()));
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    EXPECT_EQ(*target, vec.v["signed_target"].get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 2);
}

TEST(BotocoreVectorsTest, PresignedVerifiesUntilExpiry) {
  for (const Vector& vec : Vectors("presigned")) {
    SCOPED_TRACE(vec.name());
    const InMemorySecretLookup secrets = vec.secrets();
    const int64_t expires = vec.v["expires"];
    StatusOr<VerifiedCaller> caller =
        VerifyRequest(vec.signed_request(), secrets, vec.options(), vec.time());
    ASSERT_TRUE(caller.ok()) << caller.status().ToString();
    EXPECT_EQ(caller->session_token, vec.v["session_token"].get<std::string>());
    EXPECT_TRUE(
        VerifyRequest(vec.signed_request(), secrets, vec.options(), vec.time(expires)).ok());
    StatusOr<VerifiedCaller> late =
        VerifyRequest(vec.signed_request(), secrets, vec.options(), vec.time(expires + 1));
    EXPECT_EQ(late.status().aws_type(), "InvalidSignatureException");
    EXPECT_NE(late.status().message().find("Signature expired"), std::string::npos);
  }
}

}  // namespace
}  // namespace hpod::auth
