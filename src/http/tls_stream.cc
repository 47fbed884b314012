// The TLS half of MaybeTlsStream (tls_stream.h): asio::ssl::stream over the
// connection's basic_stream, compiled once here for the one buffer type and the one
// (type-erased) handler type each operation takes.

#include "hpod/http/tls_stream.h"

#include <memory>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

namespace hpod::http::internal {

namespace ssl = boost::asio::ssl;

struct MaybeTlsStream::Tls {
  Tls(Stream& stream, std::shared_ptr<SslContext> c)
      : context(std::move(c)), layer(stream, *context) {}
  // Kept for the connection's lifetime (the SSL object also holds its SSL_CTX).
  std::shared_ptr<SslContext> context;
  ssl::stream<Stream&> layer;
};

void MaybeTlsStream::TlsDeleter::operator()(Tls* tls) const { delete tls; }

MaybeTlsStream::MaybeTlsStream(Stream stream, std::shared_ptr<SslContext> context)
    : stream_(std::make_unique<Stream>(std::move(stream))) {
  if (context != nullptr) tls_.reset(new Tls(*stream_, std::move(context)));
}

MaybeTlsStream::MaybeTlsStream(MaybeTlsStream&&) noexcept = default;
MaybeTlsStream::~MaybeTlsStream() = default;

SSL* MaybeTlsStream::ssl_handle() { return tls_->layer.native_handle(); }

void MaybeTlsStream::DropTls() { tls_.reset(); }

void MaybeTlsStream::TlsReadSome(boost::asio::mutable_buffer buffer, TlsHandler handler) {
  tls_->layer.async_read_some(buffer, std::move(handler));
}

void MaybeTlsStream::TlsWriteSome(boost::asio::const_buffer buffer, TlsHandler handler) {
  if (write_scratch_.capacity() == 0) {
    tls_->layer.async_write_some(buffer, std::move(handler));
    return;
  }
  // The scratch (a record's worth, 16 KiB) is not kept between writes: a server
  // holds thousands of mostly idle connections (one per node agent).
  TlsHandler::executor_type executor = handler.get_executor();
  tls_->layer.async_write_some(buffer, TlsHandler(
                                           [this, handler = std::move(handler)](
                                               boost::beast::error_code ec, size_t bytes) mutable {
                                             std::vector<unsigned char>().swap(write_scratch_);
                                             handler(ec, bytes);
                                           },
                                           executor));
}

void MaybeTlsStream::TlsHandshake(bool server, boost::asio::const_buffer received,
                                  TlsHandler handler) {
  tls_->layer.async_handshake(server ? ssl::stream_base::server : ssl::stream_base::client,
                              received, std::move(handler));
}

void MaybeTlsStream::TlsShutdownAsync(TlsHandler handler) {
  // Completes on the original handler's executor, as the other operations do.
  TlsHandler::executor_type executor = handler.get_executor();
  tls_->layer.async_shutdown(boost::asio::bind_executor(
      executor,
      [handler = std::move(handler)](boost::beast::error_code ec) mutable { handler(ec, 0); }));
}

void MaybeTlsStream::TlsShutdown(boost::beast::error_code& ec) { tls_->layer.shutdown(ec); }

}  // namespace hpod::http::internal
