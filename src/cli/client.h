#pragma once

// Calling the SageMaker API the way the AWS CLI (botocore) does: one POST per call
// with the JSON 1.1 protocol headers, SigV4-signed, retried in botocore's
// "standard" mode, errors parsed into the CLI's one-line message; and the CLI's
// pagination (auto-follow NextToken, --max-items / --starting-token tokens).
//
//   Transport   request -> response; the seam tests replace (HttpTransport is the
//               libcurl one).
//   ApiClient   signing, retries, error parsing, --debug traces.
//   Paginate    botocore's PageIterator + build_full_result.
//
// Thread contract: an ApiClient is not thread-safe (it drives one Transport);
// Transport implementations need not be either.

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "hpod/api/model.h"
#include "hpod/auth/sigv4.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/http/client.h"
#include "hpod/http/message.h"

namespace hpod::cli {

using Json = nlohmann::ordered_json;

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends one request to `url` and returns whatever HTTP response came back. A
  // failure to connect is kUnavailable, a timeout kDeadlineExceeded.
  virtual StatusOr<http::Response> Send(const std::string& url, const http::Request& request) = 0;
};

// The real transport over hpod::http::Client.
std::unique_ptr<Transport> NewHttpTransport(const http::ClientOptions& options);

// Waiting between retries and polls, as a seam so tests never sleep.
class Sleeper {
 public:
  virtual ~Sleeper() = default;
  virtual void SleepFor(std::chrono::milliseconds duration) = 0;
};
// std::this_thread::sleep_for. Thread-safe.
class RealSleeper final : public Sleeper {
 public:
  void SleepFor(std::chrono::milliseconds duration) override;
};

struct ApiClientOptions {
  // Requests go to `endpoint_url` with "/" appended to its path.
  std::string endpoint_url = "http://127.0.0.1:8450";
  // Credential scope region.
  std::string region = "us-east-1";
  // nullopt sends unsigned requests (--no-sign-request).
  std::optional<auth::Credentials> credentials;
  // Total tries of one call (AWS_MAX_ATTEMPTS); 1 disables retries.
  int max_attempts = 3;
  std::string user_agent = "hpod-cli";
  // When set (--debug), each request and response is traced here, with the
  // signature and session token redacted.
  std::ostream* debug = nullptr;
  // Uniform [0, 1) source for the backoff jitter; unset uses a seeded mt19937.
  std::function<double()> random;
};

class ApiClient {
 public:
  // `transport`, `clock` and `sleeper` must outlive the client.
  ApiClient(ApiClientOptions options, Transport& transport, const Clock& clock, Sleeper& sleeper);

  // Sends `params` (already validated against op.input) and returns the response
  // shaped by ParseResponse. Failures:
  //   service error  message "An error occurred (Code) when calling the Op operation: msg"
  //                  (with " (reached max retries: N)" after exhausted retries),
  //                  aws_type() = Code, code() derived from it (ResourceNotFound ->
  //                  kNotFound, throttling and 5xx -> kUnavailable, ...);
  //   no connection  kUnavailable, `Could not connect to the endpoint URL: "<url>"`;
  //   timeout        kDeadlineExceeded, `Read timeout on endpoint URL: "<url>"`;
  //   bad response   kInternal, "Unable to parse response ...".
  // Retries (with jittered exponential backoff, at most 20 s) cover 500/502/503/504,
  // throttling error codes, and transport failures.
  StatusOr<Json> Call(const api::Operation& op, const Json& params);

  // The URL requests are sent to.
  const std::string& url() const { return url_; }

 private:
  Status ServiceError(const api::Operation& op, const http::Response& response,
                      bool retries_exhausted, int attempts) const;
  void TraceRequest(const http::Request& request, int attempt) const;
  void TraceResponse(const http::Response& response) const;

  ApiClientOptions options_;
  Transport& transport_;
  const Clock& clock_;
  Sleeper& sleeper_;
  std::string url_;
};

struct PaginationOptions {
  std::optional<int64_t> max_items;           // --max-items
  std::optional<std::string> starting_token;  // --starting-token
  std::optional<int64_t> page_size;           // --page-size (the limit key per call)
};

struct PaginatedResult {
  std::vector<Json> pages;                  // as received (shaped), the last truncated
  Json merged;                              // build_full_result(), resume token included
  std::optional<std::string> resume_token;  // base64 {"NextToken": ...}; set with --max-items
};

// Calls `op` (which must have a paginator) until the service stops returning a
// token or --max-items is reached, exactly as botocore's PageIterator does:
// --starting-token is a token this function returned (or a raw service token),
// truncating mid-page records "boto_truncate_amount" in the resume token, a
// repeated token fails with kInternal "The same next token was received twice: ...".
StatusOr<PaginatedResult> Paginate(ApiClient& client, const api::Operation& op, Json params,
                                   const PaginationOptions& options);

}  // namespace hpod::cli
