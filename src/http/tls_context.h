#pragma once

// Private to hpod_http (included by server*.cc, websocket*.cc and tls_context.cc
// only): the OpenSSL contexts of the server and the WebSocket client, the
// per-connection name check of the client, and what a finished handshake
// established. No Beast here, so tls_context.cc compiles quickly; the connection's
// stream itself is in tls_stream.h.

#include <memory>
#include <string>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <openssl/types.h>

#include <boost/system/error_code.hpp>

#include "hpod/base/status.h"
#include "hpod/http/server.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace hpod::http::internal {

using SslContext = boost::asio::ssl::context;

// A server context from `options` (cert_file, key_file and client_ca_file read now;
// the files are not looked at again). TLS 1.2 is the minimum and the highest version
// both ends speak is chosen (1.3 with any current client); the cipher suites are
// OpenSSL's defaults, which Debian's OpenSSL 3 keeps to AEAD suites with forward
// secrecy at security level 2. Fails with kInvalidArgument naming the file when a
// file cannot be read or parsed, or when the key does not match the certificate.
StatusOr<std::shared_ptr<SslContext>> MakeServerTlsContext(const TlsServerOptions& options);

// A client context that verifies the server against `ca_file` (PEM), or against the
// system's default CA paths when it is empty, and presents `cert_file`/`key_file`
// when both are set (one without the other is kInvalidArgument). TLS 1.2 minimum.
StatusOr<std::shared_ptr<SslContext>> MakeClientTlsContext(const std::string& ca_file,
                                                           const std::string& cert_file,
                                                           const std::string& key_file);

// Before the client's handshake on `ssl`: presents `cert_file` (PEM, the
// certificate and any intermediates) with the key in `key_file` (the same file may
// hold both) on this connection only, so that many connections with a certificate
// each (the node simulator's agents) share one context. kInvalidArgument naming
// the file when it cannot be read or the key does not match.
Status UseClientCertificate(SSL* ssl, const std::string& cert_file, const std::string& key_file);

// Before the client's handshake on `ssl`: the server's certificate must name
// `server_name`: an IP literal ("10.0.0.1", "::1" or "[::1]") is checked against the
// IP SANs, anything else against the DNS SANs and sent as SNI (RFC 6066 forbids IP
// literals there).
Status ConfigureClientTls(SSL* ssl, const std::string& server_name);

// The peer's certificate after a successful handshake (verified when the context
// asked for verification); all empty when the peer sent none.
struct PeerCertificateInfo {
  std::string cn;          // the subject's first commonName
  std::string serial_hex;  // lowercase hex, an even number of digits ("01", "3f2a…")
  std::string sha256_hex;  // SHA-256 of the DER encoding, 64 lowercase hex digits
};
PeerCertificateInfo PeerCertificate(SSL* ssl);

// Whether `ec` is an error of the TLS layer (OpenSSL's, or asio::ssl's own).
bool IsTlsError(const boost::system::error_code& ec);

// One line saying why a handshake on `ssl` failed with `ec`, e.g. "certificate
// verify failed (self-signed certificate in certificate chain)".
std::string TlsFailure(SSL* ssl, const boost::system::error_code& ec);

}  // namespace hpod::http::internal
