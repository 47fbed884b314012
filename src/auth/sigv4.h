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
// Authorization to `request`, signing every header present (lowercased, trimmed)
// except those a proxy may legitimately rewrite, which botocore does not sign
// either: user-agent, x-amzn-trace-id and the hop-by-hop headers (connection,
// expect, keep-alive, proxy-authenticate, proxy-authorization, te, trailer,
// transfer-encoding, upgrade). Any Authorization, X-Amz-Date or
// X-Amz-Security-Token already present is replaced, so a retry can re-sign. The
// payload hash is the x-amz-content-sha256 header when present, else the SHA-256
// of the body. `region`/`service` form the credential scope ("us-west-2",
// "sagemaker"). For service "s3" the path is encoded once and not normalized, as
// S3 requires. kInvalidArgument (request untouched) when there is no host header
// or a credential or scope field is empty or contains '/'.
Status SignRequest(SignableRequest& request, const Credentials& credentials,
                   std::string_view region, std::string_view service,
                   std::chrono::system_clock::time_point now);

// Percent-encodes every byte but A-Z a-z 0-9 - _ . ~ (and '/' when `keep_slash`),
// with uppercase hex: how SigV4 clients put S3 keys and query values on the wire.
std::string UriEncode(std::string_view text, bool keep_slash);

// Returns `request.target` with the presigned query parameters appended (only
// "host" is signed; payload hash UNSIGNED-PAYLOAD), valid for `expires`. The
// parameters come in botocore's order (X-Amz-Algorithm, -Credential, -Date,
// -Expires, -SignedHeaders, -Security-Token, then -Signature), so the result is
// byte-identical to botocore's SigV4QueryAuth with payload signing disabled.
// kInvalidArgument when `expires` is outside 1..kMaxPresignedExpiry, there is no
// host header, or the target already carries presigned parameters.
StatusOr<std::string> PresignTarget(const SignableRequest& request, const Credentials& credentials,
                                    std::string_view region, std::string_view service,
                                    std::chrono::system_clock::time_point now,
                                    std::chrono::seconds expires);

// The longest validity of a presigned request, as AWS allows: one week.
inline constexpr std::chrono::seconds kMaxPresignedExpiry{604800};

// Finds the secret of an access key. Returns kNotFound for an unknown key.
class SecretLookup {
 public:
  virtual ~SecretLookup() = default;
  virtual StatusOr<std::string> SecretFor(std::string_view access_key_id) const = 0;
};

class SigningKeyCache;  // signing_key_cache.h

struct VerifyOptions {
  // The signing name a request must be scoped to.
  std::string service = "sagemaker";
  // When non-empty, the credential scope's region must equal it.
  std::string region;
  // Largest allowed difference between X-Amz-Date and now (AWS uses 15 min).
  std::chrono::seconds max_skew{900};
  // Whether a header-form request may declare x-amz-content-sha256:
  // UNSIGNED-PAYLOAD, leaving its body outside the signature. Off because hpodd's
  // JSON bodies carry the caller's intent; presigned requests always may (they
  // have no body worth protecting, and PresignTarget signs that way).
  bool allow_unsigned_payload = false;
  // Where signing keys are kept between requests (must outlive the call); none:
  // derived for each.
  SigningKeyCache* signing_keys = nullptr;
};

struct VerifiedCaller {
  std::string access_key_id;
  std::string region;  // from the credential scope
  // X-Amz-Security-Token as sent (covered by the signature), empty when none.
  // Validating it is the caller's business: SecretLookup only maps keys.
  std::string session_token;
  // Whether the signature covers the body. False only for requests signed over
  // UNSIGNED-PAYLOAD: their body is not the signer's and must not be acted on.
  bool body_signed = true;
};

// Verifies a request signed in header or presigned form. Failures are
// kUnauthenticated with aws_type() set to the AWS error name, and AWS's message:
//   MissingAuthenticationTokenException  no Authorization header and no presigned query
//   IncompleteSignatureException         malformed Authorization / missing X-Amz-Date /
//                                        'host' not among the signed headers
//   UnrecognizedClientException          unknown access key
//   InvalidSignatureException            signature mismatch; expired or outside max_skew;
//                                        wrong service or region in the scope
// A SecretLookup failure other than kNotFound is returned as is (e.g. kUnavailable,
// so the caller can answer 503 rather than 403).
//
// Header form: X-Amz-Date must be within max_skew of `now`; an
// x-amz-security-token header must be among the signed headers; an
// x-amz-content-sha256 header, when present, must be the body's hash (or
// UNSIGNED-PAYLOAD where allowed) and is what the signature covers.
// Presigned form: X-Amz-Expires in 1..kMaxPresignedExpiry; valid from X-Amz-Date
// minus max_skew to X-Amz-Date plus X-Amz-Expires; the signature may cover either
// UNSIGNED-PAYLOAD (PresignTarget, S3-style presigners) or the body's hash
// (botocore's generic SigV4QueryAuth). A request carrying both forms is refused.
// Never logs secrets or signatures, and error messages echo no signature.
StatusOr<VerifiedCaller> VerifyRequest(const SignableRequest& request, const SecretLookup& secrets,
                                       const VerifyOptions& options,
                                       std::chrono::system_clock::time_point now);

}  // namespace hpod::auth
