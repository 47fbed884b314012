// OpenSSL contexts for the server and the WebSocket client (asio::ssl::context
// configured through its native handle where asio has no call), the client's name
// check, and the peer certificate's identity. No Beast here.

#include "hpod/http/tls_context.h"

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>

namespace hpod::http::internal {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

// The session ID context OpenSSL requires on a server that verifies clients (without
// one, resuming a session fails the handshake).
constexpr unsigned char kSessionIdContext[] = "hpod";

// Reads `path` whole; kInvalidArgument naming `what` and the file otherwise.
StatusOr<std::string> ReadPem(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError("cannot read the TLS " + what + " file " + path + ": " +
                                std::strerror(errno));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return InvalidArgumentError("cannot read the TLS " + what + " file " + path);
  return text;
}

Status FileError(const std::string& what, const std::string& path,
                 const boost::system::error_code& ec) {
  std::string why = ec.message();
  if (&ec.category() == &asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == PEM_R_NO_START_LINE) {
    why = "no PEM " + what + " in it";  // OpenSSL says "no start line"
  }
  return InvalidArgumentError("TLS " + what + " file " + path + ": " + why);
}

Status LoadCertificateAndKey(ssl::context& context, const std::string& cert_file,
                             const std::string& key_file) {
  boost::system::error_code ec;
  HPOD_ASSIGN_OR_RETURN(std::string chain, ReadPem(cert_file, "certificate"));
  context.use_certificate_chain(asio::buffer(chain), ec);
  if (ec) return FileError("certificate", cert_file, ec);
  HPOD_ASSIGN_OR_RETURN(std::string key, ReadPem(key_file, "key"));
  context.use_private_key(asio::buffer(key), ssl::context::pem, ec);
  // OpenSSL checks the pair as it loads the key; the check below is for its other
  // paths (a key type it cannot compare there).
  bool mismatch =
      ec && &ec.category() == &asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
  if (ec && !mismatch) return FileError("key", key_file, ec);
  if (mismatch || SSL_CTX_check_private_key(context.native_handle()) != 1) {
    return InvalidArgumentError("TLS key file " + key_file + " does not match the certificate in " +
                                cert_file);
  }
  return OkStatus();
}

Status LoadCa(ssl::context& context, const std::string& ca_file) {
  HPOD_ASSIGN_OR_RETURN(std::string pem, ReadPem(ca_file, "CA"));
  boost::system::error_code ec;
  context.add_certificate_authority(asio::buffer(pem), ec);
  if (ec) return FileError("CA", ca_file, ec);
  return OkStatus();
}

// TLS 1.2 minimum; OpenSSL negotiates the highest version both ends speak.
Status SetCommonOptions(ssl::context& context) {
  SSL_CTX* ctx = context.native_handle();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return InternalError("cannot set the minimum TLS version");
  }
  // Renegotiation (TLS 1.2) is an attack surface nothing here needs.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  return OkStatus();
}

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

}  // namespace

StatusOr<std::shared_ptr<SslContext>> MakeServerTlsContext(const TlsServerOptions& options) {
  if (options.cert_file.empty() || options.key_file.empty()) {
    return InvalidArgumentError("TLS needs both a certificate file and a key file");
  }
  if (options.require_client_cert && options.client_ca_file.empty()) {
    return InvalidArgumentError("TLS require_client_cert needs a client CA file");
  }
  std::shared_ptr<ssl::context> context;
  try {
    // asio's constructor throws when OpenSSL cannot make a context (out of
    // memory); ReloadTls and Start must get a Status, never the exception.
    context = std::make_shared<ssl::context>(ssl::context::tls_server);
  } catch (const std::exception& e) {
    return InternalError(std::string("cannot create a TLS context: ") + e.what());
  }
  HPOD_RETURN_IF_ERROR(SetCommonOptions(*context));
  HPOD_RETURN_IF_ERROR(LoadCertificateAndKey(*context, options.cert_file, options.key_file));
  SSL_CTX* ctx = context->native_handle();
  if (!options.client_ca_file.empty()) {
    HPOD_RETURN_IF_ERROR(LoadCa(*context, options.client_ca_file));
    // Tells clients which CAs are accepted, so one holding several certificates
    // picks the right one.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
    int mode = SSL_VERIFY_PEER;
    if (options.require_client_cert) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, nullptr);
    SSL_CTX_set_session_id_context(ctx, kSessionIdContext, sizeof(kSessionIdContext) - 1);
  }
  return context;
}

StatusOr<std::shared_ptr<SslContext>> MakeClientTlsContext(const std::string& ca_file,
                                                           const std::string& cert_file,
                                                           const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgumentError("a TLS client certificate needs both a certificate and a key file");
  }
  std::shared_ptr<ssl::context> context;
  try {
    context = std::make_shared<ssl::context>(ssl::context::tls_client);
  } catch (const std::exception& e) {
    return InternalError(std::string("cannot create a TLS context: ") + e.what());
  }
  HPOD_RETURN_IF_ERROR(SetCommonOptions(*context));
  if (ca_file.empty()) {
    boost::system::error_code ec;
    context->set_default_verify_paths(ec);
    if (ec) return InternalError("cannot load the system's CA certificates: " + ec.message());
  } else {
    HPOD_RETURN_IF_ERROR(LoadCa(*context, ca_file));
  }
  if (!cert_file.empty())
    HPOD_RETURN_IF_ERROR(LoadCertificateAndKey(*context, cert_file, key_file));
  SSL_CTX_set_verify(context->native_handle(), SSL_VERIFY_PEER, nullptr);
  return context;
}

Status UseClientCertificate(SSL* ssl, const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() || key_file.empty()) {
    return InvalidArgumentError("a TLS client certificate needs both a certificate and a key file");
  }
  // OpenSSL's own file readers: the PEM stays on the connection's SSL only.
  auto failed = [](const std::string& what, const std::string& path) {
    // In asio's SSL category, as the context loaders' errors: the same words.
    boost::system::error_code ec(static_cast<int>(ERR_get_error()),
                                 asio::error::get_ssl_category());
    ERR_clear_error();
    return FileError(what, path, ec);
  };
  if (SSL_use_certificate_chain_file(ssl, cert_file.c_str()) != 1) {
    return failed("certificate", cert_file);
  }
  if (SSL_use_PrivateKey_file(ssl, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return failed("key", key_file);
  }
  if (SSL_check_private_key(ssl) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("TLS key file " + key_file + " does not match the certificate in " +
                                cert_file);
  }
  return OkStatus();
}

Status ConfigureClientTls(SSL* ssl, const std::string& server_name) {
  std::string name = server_name;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  if (name.empty()) return InvalidArgumentError("TLS needs a server name to verify");
  boost::system::error_code ec;
  asio::ip::make_address(name, ec);
  if (!ec) {
    // An IP literal: matched against the certificate's IP SANs, and no SNI.
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) != 1) {
      return InvalidArgumentError("cannot verify the TLS server as " + name);
    }
    return OkStatus();
  }
  if (SSL_set1_host(ssl, name.c_str()) != 1 || SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
    return InvalidArgumentError("cannot verify the TLS server as " + name);
  }
  return OkStatus();
}

PeerCertificateInfo PeerCertificate(SSL* ssl) {
  PeerCertificateInfo info;
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return info;
  if (X509_NAME* subject = X509_get_subject_name(cert)) {
    int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (at >= 0) {
      ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
      unsigned char* utf8 = nullptr;
      int n = ASN1_STRING_to_UTF8(&utf8, data);
      if (n >= 0) info.cn.assign(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
    }
  }
  if (BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
    std::string bytes(static_cast<size_t>(BN_num_bytes(serial)), '\0');
    BN_bn2bin(serial, reinterpret_cast<unsigned char*>(bytes.data()));
    info.serial_hex = bytes.empty()
                          ? "00"
                          : Hex(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    BN_free(serial);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &size) == 1) info.sha256_hex = Hex(digest, size);
  X509_free(cert);
  return info;
}

bool IsTlsError(const boost::system::error_code& ec) {
  return &ec.category() == &asio::error::get_ssl_category() ||
         &ec.category() == &ssl::error::get_stream_category();
}

std::string TlsFailure(SSL* ssl, const boost::system::error_code& ec) {
  std::string text = ec.message();
  if (ec == ssl::error::stream_truncated) text = "the peer closed the connection";
  long verify = ssl != nullptr ? SSL_get_verify_result(ssl) : X509_V_OK;
  if (verify != X509_V_OK) text += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  return text;
}

}  // namespace hpod::http::internal
