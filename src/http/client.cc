#include "hpod/http/client.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpod::http {
namespace {

// curl_global_init is not thread-safe in every libcurl build; do it once per process.
void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  static_cast<std::string*>(user)->append(data, size * nmemb);
  return size * nmemb;
}

size_t OnHeader(char* data, size_t size, size_t nmemb, void* user) {
  auto* headers = static_cast<std::vector<Header>*>(user);
  std::string_view line(data, size * nmemb);
  if (line.substr(0, 5) == "HTTP/") {
    // A new status line: headers of interim (1xx) responses are not the final ones.
    headers->clear();
    return line.size();
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    headers->push_back(Header{std::string(Trim(line.substr(0, colon))),
                              std::string(Trim(line.substr(colon + 1)))});
  }
  return line.size();
}

// Called once a connection is established or reused, just before the request is
// sent: it tells a connect timeout from a read timeout, also on reused connections.
int OnConnected(void* user, char*, char*, int, int) {
  *static_cast<bool*>(user) = true;
  return CURL_PREREQFUNC_OK;
}

// Owns a curl_slist for the duration of one call.
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

bool Append(Slist& list, const std::string& line) {
  curl_slist* next = curl_slist_append(list.get(), line.c_str());
  if (next == nullptr) return false;
  list.release();
  list.reset(next);
  return true;
}

}  // namespace

// Thread contract: owned by one Client, hence used by one thread at a time.
struct Client::Impl {
  ClientOptions options;
  // Kept across calls: its connection cache is what gives keep-alive.
  CURL* easy = nullptr;

  ~Impl() {
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>()) {
  GlobalInitOnce();
  impl_->options = options;
  impl_->easy = curl_easy_init();
}

Client::~Client() = default;

StatusOr<Response> Client::Send(const std::string& url, const Request& request) {
  CURL* h = impl_->easy;
  if (h == nullptr) return InternalError("curl_easy_init failed");
  // Reset clears the previous call's options but keeps live connections.
  curl_easy_reset(h);

  Response response;
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  // No SIGALRM-based DNS timeouts: signals are unsafe in a multi-threaded process.
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(impl_->options.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(impl_->options.timeout.count()));
  if (!impl_->options.unix_socket_path.empty()) {
    // curl copies the string; reset above clears it again on the next call.
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, impl_->options.unix_socket_path.c_str());
  }
  // TLS (https:// only): verification stays on (curl's default); TLS 1.2 minimum.
  curl_easy_setopt(h, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  if (!impl_->options.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAINFO, impl_->options.ca_file.c_str());
  }
  if (!impl_->options.client_cert_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, impl_->options.client_cert_file.c_str());
  }
  if (!impl_->options.client_key_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLKEY, impl_->options.client_key_file.c_str());
  }
  if (!impl_->options.verify_server) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &response.headers);
  bool connected = false;
  curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, &OnConnected);
  curl_easy_setopt(h, CURLOPT_PREREQDATA, &connected);

  const std::string& method = request.method.empty() ? std::string("GET") : request.method;
  // A body is sent whenever there is one, and for methods whose requests normally
  // carry one (an empty POST still says Content-Length: 0).
  bool send_body = !request.body.empty() || !(method == "GET" || method == "HEAD" ||
                                              method == "DELETE" || method == "OPTIONS");
  if (method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (send_body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  }
  if (method != "GET" && method != "HEAD" && method != "POST") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  } else if (method == "GET" && send_body) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "GET");
  }

  // Headers go out as given. An empty "Name:" line removes a header curl would add
  // on its own: callers sign exactly what they set, so nothing may be added.
  Slist headers;
  bool ok = true;
  for (const Header& header : request.headers) {
    // "Name;" is curl's syntax for a header with an empty value.
    ok = ok && Append(headers,
                      header.value.empty() ? header.name + ";" : header.name + ": " + header.value);
  }
  ok = ok && Append(headers, "Expect:");
  if (FindHeader(request.headers, "Accept").empty()) ok = ok && Append(headers, "Accept:");
  if (send_body && FindHeader(request.headers, "Content-Type").empty()) {
    ok = ok && Append(headers, "Content-Type:");
  }
  if (!ok) return InternalError("curl_slist_append failed");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());

  CURLcode rc = curl_easy_perform(h);
  // The options point into this frame; clear them before it unwinds.
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  if (rc != CURLE_OK) {
    spdlog::debug("http client: {} {}: {} ({})", method, url, curl_easy_strerror(rc), error);
    std::string detail = error[0] != '\0' ? error : curl_easy_strerror(rc);
    switch (rc) {
      case CURLE_PEER_FAILED_VERIFICATION:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_SSL_CIPHER:
      case CURLE_SSL_ISSUER_ERROR:
      case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      case CURLE_SSL_INVALIDCERTSTATUS:
        // The AWS CLI's wording (botocore's SSLError), with OpenSSL's reason.
        return UnavailableError("SSL validation failed for " + url + " " + detail);
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CACERT_BADFILE:
        return InvalidArgumentError("cannot use the TLS files for " + url + ": " + detail);
      case CURLE_OPERATION_TIMEDOUT:
        // Same wording as the AWS CLI, which distinguishes the two phases.
        return DeadlineExceededError(std::string(connected ? "Read" : "Connect") +
                                     " timeout on endpoint URL: \"" + url + "\"");
      case CURLE_GOT_NOTHING:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_PARTIAL_FILE:
        // TLS 1.3 clients learn that the server refused their certificate (or the
        // lack of one) only from an alert on their first read.
        if (detail.find("alert") != std::string::npos && url.rfind("https:", 0) == 0) {
          return UnavailableError("SSL validation failed for " + url + " " + detail);
        }
        if (connected) {
          // botocore's ConnectionClosedError; still worth a retry.
          return UnavailableError(
              "Connection was closed before we received a valid response from endpoint URL: \"" +
              url + "\".");
        }
        return UnavailableError("Could not connect to the endpoint URL: \"" + url + "\"");
      case CURLE_URL_MALFORMAT:
      case CURLE_UNSUPPORTED_PROTOCOL:
        return InvalidArgumentError("Invalid endpoint: " + url);
      case CURLE_OUT_OF_MEMORY:
        return ResourceExhaustedError("out of memory sending to \"" + url + "\"");
      default:
        return UnavailableError("Could not connect to the endpoint URL: \"" + url + "\"");
    }
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace hpod::http
