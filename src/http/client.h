#pragma once

// The one HTTP client of hpod (libcurl), used by the CLI, the agent and tests.
// A Client keeps its connection alive between calls (one curl easy handle).
//
// Thread contract: a Client is not thread-safe; use one per thread.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/http/message.h"

namespace hpod::http {

// The strings' `{}` keep callers that initialize only the leading fields
// (`ClientOptions{connect, timeout}`) free of -Wmissing-field-initializers.
struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // Whole-request limit.
  std::chrono::milliseconds timeout{60000};
  // Connect through this Unix-domain socket instead of TCP; the URL's host is then
  // only used for the Host header (hpodd's agent listener, `<data_dir>/agent.sock`).
  std::string unix_socket_path{};
  // https:// only (ignored for http://). The server's certificate is verified against
  // `ca_file` (PEM CA certificates; empty: the system's CA store) and must name the
  // URL's host (an IP literal against its IP SANs). TLS 1.2 minimum.
  std::string ca_file{};
  // Mutual TLS: the client's certificate and key (PEM), presented when the server
  // asks; both or neither.
  std::string client_cert_file{};
  std::string client_key_file{};
  // false: the server's certificate is not checked at all. Only for fetching a
  // document whose bytes the caller authenticates itself (hpod-agent join fetches
  // hpodd's CA and trusts it only if its hash is the join token's pin).
  bool verify_server = true;
};

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` to `url` (scheme://host:port + request.target is NOT used:
  // the full URL is `url`). The request's headers are sent as given (callers add
  // Host-dependent signing themselves). Any HTTP status is a successful Send; a
  // transport failure returns kUnavailable with a message like the AWS CLI's:
  // `Could not connect to the endpoint URL: "http://127.0.0.1:1/"`, and a timeout
  // returns kDeadlineExceeded. A TLS failure (the server's certificate does not
  // verify or name the host, the handshake or a client certificate is refused) is
  // kUnavailable too, with the AWS CLI's `SSL validation failed for <url>` and
  // OpenSSL's reason; an unreadable client certificate or key is kInvalidArgument.
  StatusOr<Response> Send(const std::string& url, const Request& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "http://host:port/path?q" into its parts; fails on anything but http/https.
struct Url {
  std::string scheme;  // "http" | "https"
  std::string host;    // "127.0.0.1", "[::1]", "example.com"
  int port = 0;        // explicit or the scheme's default
  std::string target;  // "/path?q" ("/" when empty)
  // "host" or "host:port" as the Host header must carry it (default port omitted).
  std::string HostHeader() const;
};
StatusOr<Url> ParseUrl(std::string_view url);

}  // namespace hpod::http
