#pragma once

// The pieces of an AWS SigV4 signature that do not involve secrets: URI encoding,
// the canonical request, the string to sign, and the ISO-8601 basic timestamps.
// Internal to src/auth (sigv4.cc, tests, fuzzer); other folders use sigv4.h.
//
// The rules follow the SigV4 specification for non-S3 services, as botocore
// implements them (the reference client hpod must interoperate with):
//   - the path is taken as on the wire, dot segments and empty segments removed,
//     then URI-encoded once more (so "%3A" on the wire becomes "%253A");
//   - each query parameter is percent-decoded and re-encoded strictly, then the
//     pairs are sorted by key and value ('+' is a literal plus, not a space);
//   - header names are lowercased, values trimmed with inner whitespace runs
//     collapsed, repeated headers joined with ',' in the order received.
//
// Thread contract: pure functions; safe to call from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpod::auth::internal {

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view kTerminator = "aws4_request";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Percent-encodes every byte except the unreserved set A-Z a-z 0-9 - _ . ~ (and
// '/' when `keep_slash`), with uppercase hex digits.
std::string UriEncode(std::string_view text, bool keep_slash);

// Decodes %XX escapes; a '%' not followed by two hex digits stays literal.
std::string PercentDecode(std::string_view text);

// ASCII lowercase.
std::string ToLower(std::string_view text);

// Trims whitespace and collapses inner whitespace runs to one space.
std::string TrimAll(std::string_view value);

// Splits a request target into its path and query ("" when there is no '?').
std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target);

// The canonical URI of a raw (wire) path: "/" for an empty path.
std::string CanonicalPath(std::string_view raw_path);

// One decoded query parameter.
struct QueryParam {
  std::string key;
  std::string value;
};

// Decodes a raw query string into its parameters, in order; empty pieces
// ("a=1&&b=2") are skipped and a piece without '=' has an empty value.
std::vector<QueryParam> ParseQuery(std::string_view raw_query);

// The canonical query string of `params`, leaving out parameters named
// `exclude_key` (presigned requests leave out X-Amz-Signature).
std::string CanonicalQuery(const std::vector<QueryParam>& params,
                           std::string_view exclude_key = {});

// The values of every header named `lowercase_name` (case-insensitively), in
// order received.
std::vector<std::string_view> HeaderValues(const HeaderList& headers,
                                           std::string_view lowercase_name);

// "name:value\n" for each of `signed_names` (lowercase, in the order given),
// values trimmed and repeated headers joined with ','. A signed header absent from
// the request gets an empty value, so the signature will not match.
std::string CanonicalHeaders(const HeaderList& headers,
                             const std::vector<std::string>& signed_names);

// Joins names with ';'.
std::string JoinSignedHeaders(const std::vector<std::string>& signed_names);

// The full canonical request.
std::string CanonicalRequest(std::string_view method, std::string_view canonical_path,
                             std::string_view canonical_query, const HeaderList& headers,
                             const std::vector<std::string>& signed_names,
                             std::string_view payload_hash);

// "yyyymmdd/region/service/aws4_request".
std::string CredentialScope(std::string_view date, std::string_view region,
                            std::string_view service);

// "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex sha256 of canonical request>".
std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request);

// The raw 32-byte signing key: HMAC chain over date, region, service, aws4_request.
std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service);

// Lowercase hex HMAC of `string_to_sign` under the derived key.
std::string Signature(std::string_view secret, std::string_view date, std::string_view region,
                      std::string_view service, std::string_view string_to_sign);

// Seconds since the Unix epoch as "yyyymmddThhmmssZ". Works for any int64 (years
// outside 0..9999 print with more digits and never parse back).
std::string FormatAmzDate(int64_t epoch_seconds);

// Parses exactly "yyyymmddThhmmssZ" (a valid calendar date and time of day).
std::optional<int64_t> ParseAmzDate(std::string_view text);

}  // namespace hpod::auth::internal
