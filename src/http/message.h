#pragma once

// HTTP messages as plain values, shared by the server, the client and their users.
// Nothing here includes Boost or libcurl, so the rest of the tree compiles fast.
//
// Thread contract: plain values; not synchronized.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpod::http {

struct Header {
  std::string name;  // as sent or received (case preserved)
  std::string value;
};

// Case-insensitive lookup of the first header named `name`; empty when absent.
std::string_view FindHeader(const std::vector<Header>& headers, std::string_view name);
// The elements of a list-valued header (RFC 9110 section 5.6.1: "a, b" and repeated
// headers are the same list): every header named `name` (case-insensitive) split at
// commas, each element trimmed of spaces and tabs, empty elements dropped, in order.
// E.g. the subprotocols a WebSocket client offers in Sec-WebSocket-Protocol.
std::vector<std::string> HeaderList(const std::vector<Header>& headers, std::string_view name);

struct Request {
  std::string method;  // "POST"
  std::string target;  // raw request-target as received: "/path?query"
  std::vector<Header> headers;
  std::string body;
  std::string remote_address;  // "127.0.0.1:53412"; empty for client-side requests
  // Server side: whether the request came over TLS (ServerOptions::tls), and the
  // client certificate verified against TlsServerOptions::client_ca_file; the three
  // are empty when the client sent none (or the connection is plain).
  bool tls = false;
  std::string peer_cert_cn;          // the subject's first commonName
  std::string peer_cert_serial_hex;  // lowercase hex, an even number of digits
  std::string peer_cert_sha256_hex;  // SHA-256 of the DER certificate, lowercase hex

  std::string_view HeaderValue(std::string_view name) const { return FindHeader(headers, name); }
  // The part of `target` before '?', and the part after it ("" when none).
  std::string_view Path() const;
  std::string_view Query() const;
};

struct Response {
  int status = 200;
  std::vector<Header> headers;
  std::string body;

  std::string_view HeaderValue(std::string_view name) const { return FindHeader(headers, name); }
};

}  // namespace hpod::http
