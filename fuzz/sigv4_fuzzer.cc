// libFuzzer target for SigV4 verification: hostile Authorization headers, dates,
// targets and bodies must only ever produce a Status, never a crash, hang or
// sanitizer report. Results are not checked.
//
// Input: one flags byte, then up to six '\n'-separated fields:
//   Authorization value, X-Amz-Date value, target, body, "name:value" extra
//   header, method.
// Flags: bit 0 send the Authorization header; bit 1 sign the request first (so
// verification reaches the canonicalization and compare); bit 2 presign the
// target first; bit 3 allow UNSIGNED-PAYLOAD; bit 4 leave the region open;
// bits 5-7 move "now" away from the request date.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/auth/canonical.h"
#include "hpod/auth/in_memory_secret_lookup.h"
#include "hpod/auth/sigv4.h"

namespace {

using hpod::auth::Credentials;
using hpod::auth::InMemorySecretLookup;
using hpod::auth::SignableRequest;
using hpod::auth::VerifyOptions;

constexpr int64_t kDefaultNow = 1440938160;  // 2015-08-30T12:36:00Z

const InMemorySecretLookup& Secrets() {
  static const auto* secrets = new InMemorySecretLookup(
      InMemorySecretLookup::SecretMap{{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}});
  return *secrets;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<std::string> fields;
  while (fields.size() < 5) {
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) break;
    fields.emplace_back(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
  }
  fields.emplace_back(rest);
  fields.resize(6);
  const std::string& authorization = fields[0];
  const std::string& amz_date = fields[1];

  SignableRequest request;
  request.method = fields[5].empty() ? "POST" : fields[5];
  request.target = fields[2].empty() ? "/" : fields[2];
  request.body = fields[3];
  request.headers.emplace_back("Host", "example.amazonaws.com");
  if (const size_t colon = fields[4].find(':'); colon != std::string::npos) {
    request.headers.emplace_back(fields[4].substr(0, colon), fields[4].substr(colon + 1));
  }

  // Dates parse up to year 9999, but system_clock counts nanoseconds and ends in
  // 2262: only dates it can hold become "now" (the library itself never converts
  // a parsed date back to a time_point).
  int64_t now = kDefaultNow;
  constexpr int64_t kYear2200 = 7258118400;
  if (auto parsed = hpod::auth::internal::ParseAmzDate(amz_date);
      parsed && *parsed >= 0 && *parsed < kYear2200) {
    now = *parsed;
  }
  const std::chrono::system_clock::time_point sign_time{std::chrono::seconds(now)};
  now += (static_cast<int64_t>(flags >> 5) - 4) * 300;  // -20 min .. +15 min
  const std::chrono::system_clock::time_point verify_time{std::chrono::seconds(now)};

  const Credentials credentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                (flags & 0x40) ? "session/token" : ""};
  if (flags & 0x02) {
    (void)hpod::auth::SignRequest(request, credentials, "us-east-1", "service", sign_time);
  } else if (!amz_date.empty()) {
    request.headers.emplace_back("X-Amz-Date", amz_date);
  }
  if (flags & 0x04) {
    auto target = hpod::auth::PresignTarget(request, credentials, "us-east-1", "service", sign_time,
                                            std::chrono::seconds(900));
    if (target.ok()) request.target = *target;
  }
  if (flags & 0x01) request.headers.emplace_back("Authorization", authorization);

  VerifyOptions options;
  options.service = "service";
  options.region = (flags & 0x10) ? "" : "us-east-1";
  options.allow_unsigned_payload = (flags & 0x08) != 0;
  (void)hpod::auth::VerifyRequest(request, Secrets(), options, verify_time);
  return 0;
}
