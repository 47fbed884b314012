#include "hpod/auth/sigv4.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>

#include "hpod/auth/canonical.h"
#include "hpod/auth/signing_key_cache.h"
#include "hpod/base/crypto.h"

namespace hpod::auth {
namespace {

using internal::HeaderList;
using internal::QueryParam;

constexpr std::string_view kMissingToken = "MissingAuthenticationTokenException";
constexpr std::string_view kIncomplete = "IncompleteSignatureException";
constexpr std::string_view kInvalid = "InvalidSignatureException";
constexpr std::string_view kUnrecognized = "UnrecognizedClientException";

constexpr std::string_view kMismatchMessage =
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details.";

// Longest credential we echo in messages or accept at all: real ones are ~80 bytes.
constexpr size_t kMaxCredentialSize = 512;

Status AuthError(std::string_view type, std::string message) {
  return UnauthenticatedError(std::move(message)).WithAwsType(std::string(type));
}

// Headers botocore leaves out of the signature: proxies may add, drop or rewrite
// them. "authorization" is the signature itself.
bool IsUnsignable(std::string_view lowercase_name) {
  static constexpr std::array<std::string_view, 12> kNames = {"authorization",
                                                              "connection",
                                                              "expect",
                                                              "keep-alive",
                                                              "proxy-authenticate",
                                                              "proxy-authorization",
                                                              "te",
                                                              "trailer",
                                                              "transfer-encoding",
                                                              "upgrade",
                                                              "user-agent",
                                                              "x-amzn-trace-id"};
  return std::find(kNames.begin(), kNames.end(), lowercase_name) != kNames.end();
}

int64_t EpochSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsHex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

bool IsPrintableNoSpace(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// "15 min." as AWS writes the allowed skew.
std::string DescribeSkew(int64_t seconds) {
  if (seconds % 60 == 0) return std::to_string(seconds / 60) + " min.";
  return std::to_string(seconds) + " sec.";
}

Status ValidateScopeInputs(const Credentials& credentials, std::string_view region,
                           std::string_view service) {
  auto bad = [](std::string_view s) { return s.empty() || s.find('/') != std::string_view::npos; };
  if (bad(credentials.access_key_id)) {
    return InvalidArgumentError("access key id must be non-empty and contain no '/'");
  }
  if (credentials.secret_access_key.empty()) {
    return InvalidArgumentError("secret access key must be non-empty");
  }
  if (bad(region)) return InvalidArgumentError("region must be non-empty and contain no '/'");
  if (bad(service)) return InvalidArgumentError("service must be non-empty and contain no '/'");
  return OkStatus();
}

bool HasHeader(const HeaderList& headers, std::string_view lowercase_name) {
  return !internal::HeaderValues(headers, lowercase_name).empty();
}

void RemoveHeader(HeaderList& headers, std::string_view lowercase_name) {
  std::erase_if(headers,
                [&](const auto& h) { return internal::ToLower(h.first) == lowercase_name; });
}

// What the Authorization header or the presigned query claims.
struct Claim {
  bool presigned = false;
  std::string access_key_id;
  std::string scope_date;
  std::string region;
  std::string service;
  std::string terminator;
  std::vector<std::string> signed_names;
  std::string signature;
  std::string amz_date;
  int64_t request_time = 0;
  int64_t expires = 0;  // presigned only
  std::string session_token;
};

Status ParseCredential(std::string_view credential, Claim& claim) {
  if (credential.size() > kMaxCredentialSize || !IsPrintableNoSpace(credential)) {
    return AuthError(kIncomplete, "Credential contains invalid characters or is too long.");
  }
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = credential.find('/', start);
    parts.push_back(credential.substr(start, slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 5 || parts[0].empty()) {
    return AuthError(kIncomplete,
                     "Credential must have exactly 5 slash-delimited elements, e.g. "
                     "keyid/date/region/service/term, got " +
                         std::to_string(parts.size()) + ".");
  }
  claim.access_key_id = parts[0];
  claim.scope_date = parts[1];
  claim.region = parts[2];
  claim.service = parts[3];
  claim.terminator = parts[4];
  return OkStatus();
}

Status ParseSignedHeaders(std::string_view list, Claim& claim) {
  if (!IsPrintableNoSpace(list)) {
    return AuthError(kIncomplete, "SignedHeaders must be a ';'-separated list of header names.");
  }
  size_t start = 0;
  while (true) {
    const size_t semi = list.find(';', start);
    std::string_view name = list.substr(start, semi - start);
    if (name.empty()) {
      return AuthError(kIncomplete, "SignedHeaders must be a ';'-separated list of header names.");
    }
    claim.signed_names.push_back(internal::ToLower(name));
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  if (std::find(claim.signed_names.begin(), claim.signed_names.end(), "host") ==
      claim.signed_names.end()) {
    return AuthError(kIncomplete,
                     "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");
  }
  return OkStatus();
}

Status ParseAmzDate(std::string_view text, Claim& claim) {
  std::optional<int64_t> t = internal::ParseAmzDate(text);
  if (!t) {
    return AuthError(kIncomplete,
                     "X-Amz-Date must be in the ISO-8601 basic format yyyyMMdd'T'HHmmss'Z'.");
  }
  claim.amz_date = text;
  claim.request_time = *t;
  return OkStatus();
}

// Parses "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." (parts
// in any order, optional spaces around commas) plus the X-Amz-Date header.
StatusOr<Claim> ParseHeaderForm(std::string_view authorization, const HeaderList& headers) {
  authorization = TrimSpaces(authorization);
  const size_t space = authorization.find(' ');
  std::string_view algorithm = authorization.substr(0, space);
  if (algorithm != internal::kAlgorithm) {
    return AuthError(kIncomplete,
                     "Unsupported Authorization algorithm; only AWS4-HMAC-SHA256 is accepted.");
  }
  std::string_view rest =
      space == std::string_view::npos ? std::string_view() : authorization.substr(space + 1);

  std::optional<std::string_view> credential, signed_headers, signature;
  for (size_t start = 0; !TrimSpaces(rest).empty();) {
    const size_t comma = rest.find(',', start);
    std::string_view piece = TrimSpaces(rest.substr(start, comma - start));
    const size_t eq = piece.find('=');
    if (eq == std::string_view::npos) {
      return AuthError(kIncomplete,
                       "Authorization header parameters must be key=value pairs separated by "
                       "commas.");
    }
    std::string_view key = TrimSpaces(piece.substr(0, eq));
    std::string_view value = TrimSpaces(piece.substr(eq + 1));
    std::optional<std::string_view>* slot = key == "Credential"      ? &credential
                                            : key == "SignedHeaders" ? &signed_headers
                                            : key == "Signature"     ? &signature
                                                                     : nullptr;
    if (slot == nullptr) {
      return AuthError(kIncomplete,
                       "Authorization header parameters must be Credential, SignedHeaders and "
                       "Signature.");
    }
    if (slot->has_value()) {
      return AuthError(kIncomplete,
                       "Authorization header repeats the '" + std::string(key) + "' parameter.");
    }
    *slot = value;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }

  const std::vector<std::string_view> dates = internal::HeaderValues(headers, "x-amz-date");
  std::string missing;
  if (!credential) missing += "Authorization header requires 'Credential' parameter. ";
  if (!signature) missing += "Authorization header requires 'Signature' parameter. ";
  if (!signed_headers) missing += "Authorization header requires 'SignedHeaders' parameter. ";
  if (dates.empty()) {
    missing +=
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' "
        "header. ";
  }
  if (!missing.empty()) {
    missing.pop_back();
    return AuthError(kIncomplete, std::move(missing));
  }
  if (dates.size() > 1) return AuthError(kIncomplete, "X-Amz-Date header must appear once.");

  Claim claim;
  HPOD_RETURN_IF_ERROR(ParseCredential(*credential, claim));
  HPOD_RETURN_IF_ERROR(ParseSignedHeaders(*signed_headers, claim));
  HPOD_RETURN_IF_ERROR(ParseAmzDate(TrimSpaces(dates.front()), claim));
  claim.signature = *signature;

  const std::vector<std::string_view> tokens =
      internal::HeaderValues(headers, "x-amz-security-token");
  if (tokens.size() > 1) {
    return AuthError(kIncomplete, "X-Amz-Security-Token header must appear once.");
  }
  if (!tokens.empty()) {
    // An unsigned token could be swapped by anyone on the path.
    if (std::find(claim.signed_names.begin(), claim.signed_names.end(), "x-amz-security-token") ==
        claim.signed_names.end()) {
      return AuthError(kIncomplete,
                       "'X-Amz-Security-Token' must be a 'SignedHeader' in the AWS "
                       "Authorization.");
    }
    claim.session_token = internal::TrimAll(tokens.front());
  }
  return claim;
}

// Parses the X-Amz-* query parameters of a presigned request.
StatusOr<Claim> ParsePresignedForm(const std::vector<QueryParam>& params) {
  static constexpr std::array<std::string_view, 7> kKeys = {
      "X-Amz-Algorithm",     "X-Amz-Credential", "X-Amz-Date",          "X-Amz-Expires",
      "X-Amz-SignedHeaders", "X-Amz-Signature",  "X-Amz-Security-Token"};
  std::array<const std::string*, kKeys.size()> found{};
  for (const QueryParam& p : params) {
    for (size_t i = 0; i < kKeys.size(); ++i) {
      if (p.key != kKeys[i]) continue;
      if (found[i] != nullptr) {
        return AuthError(kIncomplete,
                         "Query parameter '" + std::string(kKeys[i]) + "' must appear once.");
      }
      found[i] = &p.value;
    }
  }
  for (size_t i = 0; i < 6; ++i) {
    if (found[i] == nullptr) {
      return AuthError(kIncomplete, "AWS query-string parameters must include '" +
                                        std::string(kKeys[i]) +
                                        "'. Re-examine the query-string parameters.");
    }
  }
  if (*found[0] != internal::kAlgorithm) {
    return AuthError(kIncomplete,
                     "Unsupported X-Amz-Algorithm; only AWS4-HMAC-SHA256 is accepted.");
  }
  Claim claim;
  claim.presigned = true;
  HPOD_RETURN_IF_ERROR(ParseCredential(*found[1], claim));
  HPOD_RETURN_IF_ERROR(ParseAmzDate(*found[2], claim));

  const std::string& expires = *found[3];
  // Seven digits hold the one-week maximum; more could only overflow.
  if (expires.empty() || expires.size() > 7 ||
      !std::all_of(expires.begin(), expires.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return AuthError(kIncomplete, "X-Amz-Expires must be a whole number of seconds.");
  }
  std::from_chars(expires.data(), expires.data() + expires.size(), claim.expires);
  if (claim.expires < 1) {
    return AuthError(kIncomplete, "X-Amz-Expires must be at least 1 second.");
  }
  if (claim.expires > kMaxPresignedExpiry.count()) {
    return AuthError(kIncomplete,
                     "X-Amz-Expires must be less than a week (in seconds) that is 604800.");
  }
  HPOD_RETURN_IF_ERROR(ParseSignedHeaders(*found[4], claim));
  claim.signature = *found[5];
  if (found[6] != nullptr) claim.session_token = *found[6];
  return claim;
}

// Checks the credential scope against the request date and the options.
Status CheckScope(const Claim& claim, const VerifyOptions& options) {
  const std::string_view request_day = std::string_view(claim.amz_date).substr(0, 8);
  if (claim.scope_date != request_day) {
    return AuthError(kInvalid,
                     "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
                     "date from HTTP: '" +
                         claim.scope_date + "' != '" + std::string(request_day) + "', from '" +
                         claim.amz_date + "'.");
  }
  if (claim.terminator != internal::kTerminator) {
    return AuthError(kInvalid,
                     "Credential should be scoped with a valid terminator: 'aws4_request', not '" +
                         claim.terminator + "'.");
  }
  if (claim.service != options.service) {
    return AuthError(kInvalid,
                     "Credential should be scoped to correct service: '" + options.service + "'.");
  }
  if (claim.region.empty() || (!options.region.empty() && claim.region != options.region)) {
    return AuthError(kInvalid, "Credential should be scoped to a valid region.");
  }
  return OkStatus();
}

Status CheckTime(const Claim& claim, const VerifyOptions& options, int64_t now) {
  // Clamped so that a careless option cannot overflow the arithmetic below.
  constexpr int64_t kMaxSkew = 366 * 86400;
  const int64_t skew = std::clamp<int64_t>(options.max_skew.count(), 0, kMaxSkew);
  const std::string now_text = internal::FormatAmzDate(now);
  if (claim.request_time > now + skew) {
    return AuthError(kInvalid, "Signature not yet current: " + claim.amz_date +
                                   " is still later than " + internal::FormatAmzDate(now + skew) +
                                   " (" + now_text + " + " + DescribeSkew(skew) + ")");
  }
  if (claim.presigned) {
    const int64_t valid_until = claim.request_time + claim.expires;
    if (now > valid_until) {
      return AuthError(kInvalid, "Signature expired: " + internal::FormatAmzDate(valid_until) +
                                     " (X-Amz-Date + X-Amz-Expires) is now earlier than " +
                                     now_text);
    }
  } else if (claim.request_time < now - skew) {
    return AuthError(kInvalid, "Signature expired: " + claim.amz_date + " is now earlier than " +
                                   internal::FormatAmzDate(now - skew) + " (" + now_text + " - " +
                                   DescribeSkew(skew) + ")");
  }
  return OkStatus();
}

// The payload hashes the signature may cover, most likely first.
StatusOr<std::vector<std::string>> PayloadHashes(const SignableRequest& request, const Claim& claim,
                                                 const VerifyOptions& options) {
  const std::string body_hash = HexEncode(Sha256(request.body));
  const std::vector<std::string_view> declared =
      internal::HeaderValues(request.headers, "x-amz-content-sha256");
  if (declared.size() > 1) {
    return AuthError(kIncomplete, "x-amz-content-sha256 header must appear once.");
  }
  if (declared.empty()) {
    if (claim.presigned) {
      return std::vector<std::string>{std::string(internal::kUnsignedPayload), body_hash};
    }
    return std::vector<std::string>{body_hash};
  }
  // botocore signs the header's value verbatim, so the canonical request does too.
  const std::string value(declared.front());
  if (value == internal::kUnsignedPayload) {
    if (!claim.presigned && !options.allow_unsigned_payload) {
      return AuthError(kInvalid,
                       "UNSIGNED-PAYLOAD is not accepted by this service; sign the body.");
    }
    return std::vector<std::string>{value};
  }
  if (!IsHex64(value)) {
    return AuthError(kInvalid,
                     "x-amz-content-sha256 must be UNSIGNED-PAYLOAD or the hex SHA-256 of the "
                     "body.");
  }
  if (internal::ToLower(value) != body_hash) {
    return AuthError(kInvalid,
                     "The provided 'x-amz-content-sha256' header does not match what was "
                     "computed.");
  }
  return std::vector<std::string>{value};
}

}  // namespace

Status SignRequest(SignableRequest& request, const Credentials& credentials,
                   std::string_view region, std::string_view service,
                   std::chrono::system_clock::time_point now) {
  HPOD_RETURN_IF_ERROR(ValidateScopeInputs(credentials, region, service));
  if (!HasHeader(request.headers, "host")) {
    return InvalidArgumentError("a request to sign needs a host header");
  }
  const std::string amz_date = internal::FormatAmzDate(EpochSeconds(now));
  const std::string date = amz_date.substr(0, 8);

  RemoveHeader(request.headers, "authorization");
  RemoveHeader(request.headers, "x-amz-date");
  RemoveHeader(request.headers, "x-amz-security-token");
  request.headers.emplace_back("X-Amz-Date", amz_date);
  if (!credentials.session_token.empty()) {
    request.headers.emplace_back("X-Amz-Security-Token", credentials.session_token);
  }

  std::vector<std::string> signed_names;
  for (const auto& [name, value] : request.headers) {
    std::string lower = internal::ToLower(name);
    if (!IsUnsignable(lower)) signed_names.push_back(std::move(lower));
  }
  std::sort(signed_names.begin(), signed_names.end());
  signed_names.erase(std::unique(signed_names.begin(), signed_names.end()), signed_names.end());

  const std::vector<std::string_view> declared =
      internal::HeaderValues(request.headers, "x-amz-content-sha256");
  const std::string payload_hash =
      declared.empty() ? HexEncode(Sha256(request.body)) : std::string(declared.front());

  const auto [path, query] = internal::SplitTarget(request.target);
  // S3 is the exception to SigV4's path rules: its canonical URI is the path
  // encoded once and not normalized (object keys may hold "//" or "..").
  const std::string canonical_path =
      service == "s3" ? internal::UriEncode(internal::PercentDecode(path), /*keep_slash=*/true)
                      : internal::CanonicalPath(path);
  const std::string canonical =
      internal::CanonicalRequest(request.method, canonical_path,
                                 internal::CanonicalQuery(internal::ParseQuery(query)),
                                 request.headers, signed_names, payload_hash);
  const std::string scope = internal::CredentialScope(date, region, service);
  const std::string signature =
      internal::Signature(credentials.secret_access_key, date, region, service,
                          internal::StringToSign(amz_date, scope, canonical));

  std::string authorization(internal::kAlgorithm);
  authorization.append(" Credential=").append(credentials.access_key_id).append("/").append(scope);
  authorization.append(", SignedHeaders=").append(internal::JoinSignedHeaders(signed_names));
  authorization.append(", Signature=").append(signature);
  request.headers.emplace_back("Authorization", std::move(authorization));
  return OkStatus();
}

StatusOr<std::string> PresignTarget(const SignableRequest& request, const Credentials& credentials,
                                    std::string_view region, std::string_view service,
                                    std::chrono::system_clock::time_point now,
                                    std::chrono::seconds expires) {
  HPOD_RETURN_IF_ERROR(ValidateScopeInputs(credentials, region, service));
  if (expires.count() < 1 || expires > kMaxPresignedExpiry) {
    return InvalidArgumentError("presigned expiry must be between 1 s and 604800 s");
  }
  if (!HasHeader(request.headers, "host")) {
    return InvalidArgumentError("a request to presign needs a host header");
  }
  const auto [path, query] = internal::SplitTarget(request.target);
  std::vector<QueryParam> params = internal::ParseQuery(query);
  for (const QueryParam& p : params) {
    if (p.key.starts_with("X-Amz-")) {
      return InvalidArgumentError("target already carries X-Amz-* query parameters");
    }
  }

  const std::string amz_date = internal::FormatAmzDate(EpochSeconds(now));
  const std::string date = amz_date.substr(0, 8);
  const std::string scope = internal::CredentialScope(date, region, service);
  std::vector<QueryParam> auth = {
      {"X-Amz-Algorithm", std::string(internal::kAlgorithm)},
      {"X-Amz-Credential", credentials.access_key_id + "/" + scope},
      {"X-Amz-Date", amz_date},
      {"X-Amz-Expires", std::to_string(expires.count())},
      {"X-Amz-SignedHeaders", "host"},
  };
  if (!credentials.session_token.empty()) {
    auth.push_back({"X-Amz-Security-Token", credentials.session_token});
  }
  params.insert(params.end(), auth.begin(), auth.end());

  const std::string canonical = internal::CanonicalRequest(
      request.method, internal::CanonicalPath(path), internal::CanonicalQuery(params),
      request.headers, {"host"}, internal::kUnsignedPayload);
  const std::string signature =
      internal::Signature(credentials.secret_access_key, date, region, service,
                          internal::StringToSign(amz_date, scope, canonical));

  std::string out = request.target;
  if (request.target.find('?') == std::string::npos) {
    out.push_back('?');
  } else if (!out.ends_with('?') && !out.ends_with('&')) {
    out.push_back('&');
  }
  for (const QueryParam& p : auth) {
    out.append(p.key).append("=").append(internal::UriEncode(p.value, false)).append("&");
  }
  out.append("X-Amz-Signature=").append(signature);
  return out;
}

StatusOr<VerifiedCaller> VerifyRequest(const SignableRequest& request, const SecretLookup& secrets,
                                       const VerifyOptions& options,
                                       std::chrono::system_clock::time_point now) {
  const auto [path, query] = internal::SplitTarget(request.target);
  const std::vector<QueryParam> params = internal::ParseQuery(query);
  const bool presigned = std::any_of(params.begin(), params.end(), [](const QueryParam& p) {
    return p.key == "X-Amz-Algorithm" || p.key == "X-Amz-Credential" || p.key == "X-Amz-Signature";
  });
  std::vector<std::string_view> authorizations =
      internal::HeaderValues(request.headers, "authorization");
  // An empty Authorization header is as good as none.
  std::erase_if(authorizations, [](std::string_view v) { return TrimSpaces(v).empty(); });

  if (authorizations.empty() && !presigned) {
    return AuthError(kMissingToken, "Missing Authentication Token");
  }
  if (!authorizations.empty() && presigned) {
    return AuthError(kIncomplete,
                     "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter "
                     "or the Authorization header should be specified.");
  }
  if (authorizations.size() > 1) {
    return AuthError(kIncomplete, "Authorization header must appear once.");
  }

  StatusOr<Claim> parsed = presigned ? ParsePresignedForm(params)
                                     : ParseHeaderForm(authorizations.front(), request.headers);
  if (!parsed.ok()) return parsed.status();
  const Claim& claim = *parsed;

  HPOD_RETURN_IF_ERROR(CheckScope(claim, options));
  HPOD_RETURN_IF_ERROR(CheckTime(claim, options, EpochSeconds(now)));
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> payload_hashes,
                        PayloadHashes(request, claim, options));

  StatusOr<std::string> secret = secrets.SecretFor(claim.access_key_id);
  if (!secret.ok()) {
    if (secret.status().code() == StatusCode::kNotFound) {
      return AuthError(kUnrecognized, "The security token included in the request is invalid.");
    }
    return secret.status().Annotate("looking up the request's access key");
  }

  const std::string canonical_path = internal::CanonicalPath(path);
  const std::string canonical_query =
      internal::CanonicalQuery(params, presigned ? "X-Amz-Signature" : "");
  const std::string scope =
      internal::CredentialScope(claim.scope_date, claim.region, claim.service);
  const std::string signing_key =
      options.signing_keys != nullptr
          ? options.signing_keys->Get(*secret, claim.scope_date, claim.region, claim.service)
          : internal::SigningKey(*secret, claim.scope_date, claim.region, claim.service);
  bool match = false;
  bool body_covered = false;
  for (const std::string& payload_hash : payload_hashes) {
    const std::string canonical =
        internal::CanonicalRequest(request.method, canonical_path, canonical_query, request.headers,
                                   claim.signed_names, payload_hash);
    const std::string expected = HexEncode(
        HmacSha256(signing_key, internal::StringToSign(claim.amz_date, scope, canonical)));
    // Every candidate is computed and compared, so timing does not reveal which
    // (if any) matched.
    const bool this_one = ConstantTimeEquals(expected, claim.signature);
    match = this_one || match;
    body_covered = body_covered || (this_one && payload_hash != internal::kUnsignedPayload);
  }
  if (!match) return AuthError(kInvalid, std::string(kMismatchMessage));
  return VerifiedCaller{claim.access_key_id, claim.region, claim.session_token, body_covered};
}

std::string UriEncode(std::string_view text, bool keep_slash) {
  return internal::UriEncode(text, keep_slash);
}

}  // namespace hpod::auth
