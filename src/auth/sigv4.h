#pragma once

// AWS Signature Version 4: signing (CLI, agent) and verification (hpodd), both in
// header form (Authorization: AWS4-HMAC-SHA256 ...) and presigned query form
// (X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires,
// X-Amz-SignedHeaders, X-Amz-Signature). No dependency on the HTTP stack: callers
// convert their request into a SignableRequest.
//
// Thread contract: free functions; SecretLookup implementations must be thread-safe.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::auth {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional; sent as X-Amz-Security-Token
};

struct SignableRequest {
  std::string method;  // "POST"
  std::string target;  // raw path and query as on the wire: "/", "/a%20b?x=1&y=2"
  std::vector<std::pair<std::string, std::string>> headers;  // must include "host"
  std::string body;
};

// Adds X-Amz-Date, X-Amz-Security-Token (when a session token is set) and
// Authorization to `request`, signing every header present (lowercased, trimmed).
// `region`/`service` form the credential scope ("us-west-2", "sagemaker").
Status SignRequest(SignableRequest& request, const Credentials& credentials,
                   std::string_view region, std::string_view service,
                   std::chrono::system_clock::time_point now);

// Returns `request.target` with the presigned query parameters appended (only
// "host" is signed; payload hash UNSIGNED-PAYLOAD), valid for `expires`.
StatusOr<std::string> PresignTarget(const SignableRequest& request,
                                    const Credentials& credentials, std::string_view region,
                                    std::string_view service,
                                    std::chrono::system_clock::time_point now,
                                    std::chrono::seconds expires);

// Finds the secret of an access key. Returns kNotFound for an unknown key.
class SecretLookup {
 public:
  virtual ~SecretLookup() = default;
  virtual StatusOr<std::string> SecretFor(std::string_view access_key_id) const = 0;
};

struct VerifyOptions {
  // The signing name a request must be scoped to.
  std::string service = "sagemaker";
  // When non-empty, the credential scope's region must equal it.
  std::string region;
  // Largest allowed difference between X-Amz-Date and now (AWS uses 15 min).
  std::chrono::seconds max_skew{900};
};

struct VerifiedCaller {
  std::string access_key_id;
  std::string region;  // from the credential scope
};

// Verifies a request signed in header or presigned form. Failures are
// kUnauthenticated with aws_type() set to the AWS error name, and AWS's message:
//   MissingAuthenticationTokenException  no Authorization header and no presigned query
//   IncompleteSignatureException         malformed Authorization / missing X-Amz-Date /
//                                        'host' not among the signed headers
//   UnrecognizedClientException          unknown access key
//   InvalidSignatureException            signature mismatch; expired or outside max_skew;
//                                        wrong service or region in the scope
// Never logs secrets or signatures.
StatusOr<VerifiedCaller> VerifyRequest(const SignableRequest& request,
                                       const SecretLookup& secrets, const VerifyOptions& options,
                                       std::chrono::system_clock::time_point now);

}  // namespace hpod::auth
