#include "hpod/cli/client.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <utility>

#include "hpod/base/base64.h"
#include "hpod/base/crypto.h"
#include "hpod/cli/params.h"

namespace hpod::cli {
namespace {

constexpr std::string_view kThrottlingCodes[] = {
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
};
constexpr std::string_view kTransientCodes[] = {
    "RequestTimeout",
    "RequestTimeoutException",
    "PriorRequestNotComplete",
};
constexpr double kMaxBackoffSeconds = 20.0;

bool Contains(const auto& list, std::string_view code) {
  return std::find(std::begin(list), std::end(list), code) != std::end(list);
}

bool IsTransientStatus(int status) {
  return status == 500 || status == 502 || status == 503 || status == 504;
}

// Python's http.client.responses, for bodies that carry no error code.
std::string ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Request Entity Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

struct ErrorInfo {
  std::string code;
  std::string message;
};

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// botocore's BaseJSONParser._do_error_parse (and its generic HTML/empty 5xx case).
ErrorInfo ParseError(const http::Response& response) {
  std::string_view body = TrimView(response.body);
  if (response.status >= 500 && (body.empty() || body.rfind("<html>", 0) == 0)) {
    return {std::to_string(response.status), ReasonPhrase(response.status)};
  }
  Json parsed = Json::object();
  if (!body.empty()) {
    parsed = Json::parse(response.body, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      parsed = Json::object({{"message", response.body}});
    }
  }
  ErrorInfo info;
  auto string_at = [&](const char* key) -> std::optional<std::string> {
    auto it = parsed.find(key);
    if (it == parsed.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  info.message = string_at("message").value_or(string_at("Message").value_or(""));
  info.code = string_at("__type").value_or(std::to_string(response.status));
  if (size_t colon = info.code.find(':'); colon != std::string::npos) info.code.resize(colon);
  if (size_t hash = info.code.rfind('#'); hash != std::string::npos) {
    info.code = info.code.substr(hash + 1);
  }
  return info;
}

// The canonical code of a service error: what the caller should do next.
StatusCode CodeFor(const ErrorInfo& e, int http_status) {
  if (Contains(kThrottlingCodes, e.code) || Contains(kTransientCodes, e.code) ||
      http_status >= 500) {
    return StatusCode::kUnavailable;
  }
  if (e.code == "ResourceNotFound") return StatusCode::kNotFound;
  if (e.code == "ResourceInUse") return StatusCode::kAlreadyExists;
  if (e.code == "ResourceLimitExceeded") return StatusCode::kResourceExhausted;
  if (e.code == "ValidationException") return StatusCode::kInvalidArgument;
  if (e.code == "AccessDeniedException") return StatusCode::kPermissionDenied;
  if (http_status == 401 || http_status == 403) return StatusCode::kUnauthenticated;
  return StatusCode::kFailedPrecondition;
}

// One line of Python's json.dumps() for a flat token dict: ", " and ": "
// separators and ASCII-only strings, so tokens are byte-identical to botocore's.
std::string PyJsonDumps(const Json& dict) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : dict.items()) {
    out += (first ? "" : ", ") + Json(k).dump(-1, ' ', true) + ": " + v.dump(-1, ' ', true);
    first = false;
  }
  return out + "}";
}

// botocore's tokens: standard base64 with padding, decoded like Python's
// b64decode, which discards characters outside the alphabet.
constexpr Base64Options kTokenBase64{
    .alphabet = Base64Alphabet::kStandard, .pad = true, .skip_unknown = true};

std::string EncodeToken(const Json& token) {
  return Base64Encode(PyJsonDumps(token), kTokenBase64);
}

}  // namespace

// --- transport ---------------------------------------------------------------

namespace {
// Thread contract: like http::Client, one thread at a time.
class HttpTransport final : public Transport {
 public:
  explicit HttpTransport(const http::ClientOptions& options) : client_(options) {}
  StatusOr<http::Response> Send(const std::string& url, const http::Request& request) override {
    return client_.Send(url, request);
  }

 private:
  http::Client client_;
};
}  // namespace

std::unique_ptr<Transport> NewHttpTransport(const http::ClientOptions& options) {
  return std::make_unique<HttpTransport>(options);
}

void RealSleeper::SleepFor(std::chrono::milliseconds duration) {
  std::this_thread::sleep_for(duration);
}

// --- ApiClient -----------------------------------------------------------------

ApiClient::ApiClient(ApiClientOptions options, Transport& transport, const Clock& clock,
                     Sleeper& sleeper)
    : options_(std::move(options)), transport_(transport), clock_(clock), sleeper_(sleeper) {
  url_ = options_.endpoint_url;
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  url_ += "/";
  if (!options_.random) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    options_.random = [engine] {
      return std::uniform_real_distribution<double>(0.0, 1.0)(*engine);
    };
  }
}

StatusOr<Json> ApiClient::Call(const api::Operation& op, const Json& params) {
  HPOD_ASSIGN_OR_RETURN(http::Url url, http::ParseUrl(url_));
  // As botocore: an idempotency token the caller left out is a fresh UUID, made
  // once, so this call's own retries below send the same one.
  Json filled = params;
  for (const api::Member& m : op.input->members) {
    if (m.idempotency_token && filled.is_object() && !filled.contains(m.name)) {
      filled[m.name] = NewUuid4();
    }
  }
  const std::string body = SerializeRequest(*op.input, filled).dump();
  const std::string target = "SageMaker." + op.name;
  for (int attempt = 1;; ++attempt) {
    http::Request request;
    request.method = "POST";
    request.target = url.target;
    request.body = body;
    request.headers = {{"Host", url.HostHeader()},
                       {"Content-Type", "application/x-amz-json-1.1"},
                       {"X-Amz-Target", target},
                       {"User-Agent", options_.user_agent}};
    if (options_.credentials.has_value()) {
      auth::SignableRequest signable{request.method, request.target, {}, request.body};
      for (const auto& h : request.headers) signable.headers.emplace_back(h.name, h.value);
      HPOD_RETURN_IF_ERROR(auth::SignRequest(signable, *options_.credentials, options_.region,
                                             "sagemaker", clock_.Now()));
      request.headers.clear();
      for (auto& [name, value] : signable.headers) request.headers.push_back({name, value});
    }
    TraceRequest(request, attempt);
    const bool can_retry = attempt < options_.max_attempts;
    auto backoff = [&] {
      double cap = std::min(std::pow(2.0, attempt - 1), kMaxBackoffSeconds);
      auto ms = static_cast<int64_t>(options_.random() * cap * 1000.0);
      if (options_.debug != nullptr) *options_.debug << "[debug] retrying in " << ms << " ms\n";
      sleeper_.SleepFor(std::chrono::milliseconds(ms));
    };

    StatusOr<http::Response> response = transport_.Send(url_, request);
    if (!response.ok()) {
      if (options_.debug != nullptr) {
        *options_.debug << "[debug] transport error: " << response.status().ToString() << "\n";
      }
      if (can_retry) {
        backoff();
        continue;
      }
      if (response.status().code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceededError("Read timeout on endpoint URL: \"" + url_ + "\"");
      }
      // A certificate hpodd's endpoint does not verify against the CA bundle is
      // said as the AWS CLI says it (the transport's message names the URL and
      // OpenSSL's reason): "Could not connect" would send users after the network.
      const std::string why(response.status().message());
      if (why.rfind("SSL validation failed", 0) == 0) return UnavailableError(why);
      return UnavailableError("Could not connect to the endpoint URL: \"" + url_ + "\"");
    }
    TraceResponse(*response);
    if (response->status >= 200 && response->status < 300) {
      Json parsed = Json::object();
      if (!TrimView(response->body).empty()) {
        parsed = Json::parse(response->body, nullptr, false);
        if (parsed.is_discarded()) {
          return InternalError("Unable to parse response (invalid JSON received), body: " +
                               response->body.substr(0, 200));
        }
      }
      return ParseResponse(*op.output, parsed);
    }
    ErrorInfo error = ParseError(*response);
    bool retryable = IsTransientStatus(response->status) ||
                     Contains(kThrottlingCodes, error.code) ||
                     Contains(kTransientCodes, error.code);
    if (retryable && can_retry) {
      backoff();
      continue;
    }
    return ServiceError(op, *response, retryable, attempt);
  }
}

Status ApiClient::ServiceError(const api::Operation& op, const http::Response& response,
                               bool retries_exhausted, int attempts) const {
  ErrorInfo error = ParseError(response);
  std::string retry_info;
  if (retries_exhausted) {
    retry_info = " (reached max retries: " + std::to_string(attempts - 1) + ")";
  }
  return Status(CodeFor(error, response.status),
                "An error occurred (" + error.code + ") when calling the " + op.name +
                    " operation" + retry_info + ": " + error.message)
      .WithAwsType(error.code);
}

void ApiClient::TraceRequest(const http::Request& request, int attempt) const {
  if (options_.debug == nullptr) return;
  std::ostream& d = *options_.debug;
  d << "[debug] " << request.method << " " << url_ << " (attempt " << attempt << " of "
    << options_.max_attempts << ")\n";
  for (const auto& h : request.headers) {
    std::string value = h.value;
    std::string lower = h.name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower == "authorization") {
      // Keep the key id and scope (useful when debugging), never the signature.
      if (size_t sig = value.find("Signature="); sig != std::string::npos) {
        value = value.substr(0, sig) + "Signature=<redacted>";
      }
    } else if (lower == "x-amz-security-token") {
      value = "<redacted>";
    }
    d << "[debug] > " << h.name << ": " << value << "\n";
  }
  d << "[debug] > " << request.body << "\n";
}

void ApiClient::TraceResponse(const http::Response& response) const {
  if (options_.debug == nullptr) return;
  std::ostream& d = *options_.debug;
  d << "[debug] < HTTP " << response.status << "\n";
  for (const auto& h : response.headers) d << "[debug] < " << h.name << ": " << h.value << "\n";
  d << "[debug] < " << response.body << "\n";
}

// --- pagination ----------------------------------------------------------------

namespace {

struct StartingToken {
  Json next_token;  // input token name -> value or null
  int64_t truncate = 0;
};

// botocore's PageIterator._parse_starting_token, including the pre-1.x
// "token___index" form and raw service tokens.
StatusOr<StartingToken> ParseStartingToken(const std::string& token, const api::Paginator& p) {
  if (StatusOr<std::string> decoded = Base64Decode(token, kTokenBase64); decoded.ok()) {
    Json dict = Json::parse(*decoded, nullptr, false);
    if (dict.is_object()) {
      StartingToken st;
      if (auto it = dict.find("boto_truncate_amount"); it != dict.end()) {
        if (!it->is_number_integer()) return InvalidArgumentError("Bad starting token: " + token);
        st.truncate = it->get<int64_t>();
        dict.erase(it);
      }
      dict.erase("boto_encoded_keys");
      st.next_token = std::move(dict);
      return st;
    }
  }
  StartingToken st;
  std::string service_token = token;
  if (size_t sep = token.rfind("___"); sep != std::string::npos) {
    std::string index = token.substr(sep + 3);
    bool digits = !index.empty() && std::all_of(index.begin(), index.end(), ::isdigit);
    // Only "a___b" with exactly one separator matches the one input token.
    if (digits && token.find("___") == sep) {
      service_token = token.substr(0, sep);
      st.truncate = std::stoll(index);
    }
  }
  if (service_token.find("___") != std::string::npos) {
    return InvalidArgumentError("Bad starting token: " + token);
  }
  st.next_token = Json::object(
      {{p.input_token, service_token == "None" ? Json(nullptr) : Json(service_token)}});
  return st;
}

void InjectToken(Json& params, const Json& next_token, const api::Paginator& p) {
  auto it = next_token.find(p.input_token);
  if (it != next_token.end() && it->is_string() && it->get<std::string>() != "None") {
    params[p.input_token] = *it;
  } else {
    params.erase(p.input_token);
  }
}

Json NextTokenOf(const Json& page, const api::Paginator& p) {
  auto it = page.find(p.output_token);
  // An empty token ends the listing, as botocore treats it.
  bool present = it != page.end() && it->is_string() && !it->get<std::string>().empty();
  return Json::object({{p.input_token, present ? *it : Json(nullptr)}});
}

Json BuildFullResult(const std::vector<Json>& pages, const api::Paginator& p,
                     const std::optional<std::string>& resume_token) {
  Json complete = Json::object();
  for (const Json& page : pages) {
    for (const std::string& key : p.result_keys) {
      auto value = page.find(key);
      if (value == page.end() || value->is_null()) continue;
      auto existing = complete.find(key);
      if (existing == complete.end() || existing->is_null()) {
        complete[key] = *value;
      } else if (value->is_array() && existing->is_array()) {
        for (const auto& e : *value) existing->push_back(e);
      } else if (value->is_number() && existing->is_number()) {
        *existing = existing->get<double>() + value->get<double>();
      } else if (value->is_string() && existing->is_string()) {
        *existing = existing->get<std::string>() + value->get<std::string>();
      }
    }
  }
  if (resume_token.has_value()) complete["NextToken"] = *resume_token;
  return complete;
}

}  // namespace

StatusOr<PaginatedResult> Paginate(ApiClient& client, const api::Operation& op, Json params,
                                   const PaginationOptions& options) {
  if (!op.paginator.has_value() || op.paginator->result_keys.empty()) {
    return InvalidArgumentError(op.name + " cannot be paginated");
  }
  const api::Paginator& p = *op.paginator;
  const std::string& primary = p.result_keys[0];
  PaginatedResult result;
  Json next_token = Json::object({{p.input_token, nullptr}});
  int64_t starting_truncation = 0;
  if (options.starting_token.has_value()) {
    HPOD_ASSIGN_OR_RETURN(StartingToken st, ParseStartingToken(*options.starting_token, p));
    next_token = st.next_token;
    starting_truncation = st.truncate;
    InjectToken(params, next_token, p);
  }
  if (options.page_size.has_value()) params[p.limit_key] = *options.page_size;

  int64_t total_items = 0;
  bool first_request = true;
  std::optional<Json> previous_next_token;
  while (true) {
    HPOD_ASSIGN_OR_RETURN(Json page, client.Call(op, params));
    if (first_request) {
      if (options.starting_token.has_value()) {
        // Resume inside the page the token was cut from.
        Json data = page.contains(primary) ? page[primary] : Json(nullptr);
        if (data.is_array()) {
          Json sliced = Json::array();
          for (size_t i = static_cast<size_t>(std::max<int64_t>(0, starting_truncation));
               i < data.size(); ++i) {
            sliced.push_back(data[i]);
          }
          page[primary] = sliced;
        } else {
          page[primary] = nullptr;
        }
        for (size_t k = 1; k < p.result_keys.size(); ++k) {
          auto it = page.find(p.result_keys[k]);
          if (it == page.end()) continue;
          if (it->is_array()) {
            *it = Json::array();
          } else if (it->is_string()) {
            *it = "";
          } else if (!it->is_number()) {
            *it = nullptr;
          }
        }
      }
      first_request = false;
    } else {
      starting_truncation = 0;
    }
    Json current =
        page.contains(primary) && page[primary].is_array() ? page[primary] : Json::array();
    auto n = static_cast<int64_t>(current.size());
    int64_t truncate_amount =
        options.max_items.has_value() ? total_items + n - *options.max_items : 0;
    if (truncate_amount > 0) {
      int64_t keep = n - truncate_amount;
      Json kept = Json::array();
      for (int64_t i = 0; i < keep; ++i) kept.push_back(current[static_cast<size_t>(i)]);
      page[primary] = kept;
      next_token["boto_truncate_amount"] = keep + starting_truncation;
      result.resume_token = EncodeToken(next_token);
      result.pages.push_back(std::move(page));
      break;
    }
    Json next = NextTokenOf(page, p);
    result.pages.push_back(std::move(page));
    total_items += n;
    next_token = next;
    if (next[p.input_token].is_null()) break;
    if (options.max_items.has_value() && total_items == *options.max_items) {
      result.resume_token = EncodeToken(next_token);
      break;
    }
    if (previous_next_token.has_value() && *previous_next_token == next_token) {
      return InternalError("Error during pagination: The same next token was received twice: " +
                           PyRepr(next_token));
    }
    InjectToken(params, next_token, p);
    previous_next_token = next_token;
  }
  result.merged = BuildFullResult(result.pages, p, result.resume_token);
  return result;
}

}  // namespace hpod::cli
