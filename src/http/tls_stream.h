#pragma once

// Private to hpod_http (included by server_session.cc, server_websocket.cc,
// websocket.cc and tls_stream.cc only): the one stream type every connection uses,
// plain or TLS.
//
// Beast's HTTP and WebSocket operations dominate hpod's build time, and each is
// compiled once per stream type. A TLS stream as a second type would compile the
// HTTP session, the server WebSocket and the client WebSocket twice, so the choice
// is made at run time instead: MaybeTlsStream forwards each read and write either to
// the plain basic_stream or to a TLS layer (OpenSSL, driven in tls_stream.cc) on
// that same basic_stream, whose expiry then still bounds every TLS read and write.
// The TLS layer buffers records only while they are in flight, so an idle
// connection holds no record buffers (tls_stream.cc says why).
//
// The TLS path is also compiled once: it takes one buffer and a type-erased
// completion handler (TlsHandler) and lives in tls_stream.cc, so that the many
// handler and buffer types of Beast's operations do not each instantiate the TLS
// operations (asio's SSL operations did, and that alone nearly doubled
// server_session.cc's compile time). The files including this header see no
// OpenSSL headers.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include "hpod/http/tls_context.h"

namespace hpod::http::internal {

using Protocol = boost::asio::generic::stream_protocol;
using Stream = boost::beast::basic_stream<Protocol>;

// A move-only completion handler `void(error_code, size_t)` with its type erased,
// keeping the original handler's associated executor (the connection's strand).
//
// Thread contract: a handler value; invoked once, by asio.
class TlsHandler {
 public:
  using executor_type = Stream::executor_type;

  template <class Handler>
  TlsHandler(Handler&& handler, const executor_type& fallback)
      : executor_(boost::asio::get_associated_executor(handler, fallback)),
        call_(std::make_unique<Call<std::decay_t<Handler>>>(std::forward<Handler>(handler))) {}
  TlsHandler(TlsHandler&&) noexcept = default;
  TlsHandler& operator=(TlsHandler&&) noexcept = default;

  executor_type get_executor() const noexcept { return executor_; }
  void operator()(boost::beast::error_code ec, size_t bytes) {
    // Released before the call: the handler may start the next operation.
    std::unique_ptr<CallBase> call = std::move(call_);
    call->Invoke(ec, bytes);
  }

 private:
  struct CallBase {
    virtual ~CallBase() = default;
    virtual void Invoke(boost::beast::error_code ec, size_t bytes) = 0;
  };
  template <class Handler>
  struct Call final : CallBase {
    explicit Call(Handler&& h) : handler(std::move(h)) {}
    explicit Call(const Handler& h) : handler(h) {}
    void Invoke(boost::beast::error_code ec, size_t bytes) override {
      std::move(handler)(ec, bytes);
    }
    Handler handler;
  };

  executor_type executor_;
  std::unique_ptr<CallBase> call_;
};

// A connection's stream: a Stream, with a TLS layer on it when the connection was
// created with a context (until DropTls). Movable (the layers live on the heap, so
// the TLS layer's reference to the Stream survives a move); a moved-from object may
// only be destroyed.
//
// Thread contract: not synchronized; used on its connection's strand (or I/O
// thread), like the Stream it wraps: every handler's associated executor is that
// one. At most one read and one write at a time.
class MaybeTlsStream {
 public:
  using executor_type = Stream::executor_type;
  using next_layer_type = Stream;

  // TLS when `context` is set: the caller then runs AsyncHandshake before any read
  // or write.
  MaybeTlsStream(Stream stream, std::shared_ptr<SslContext> context);
  MaybeTlsStream(MaybeTlsStream&&) noexcept;
  MaybeTlsStream& operator=(MaybeTlsStream&&) = delete;
  ~MaybeTlsStream();

  executor_type get_executor() noexcept { return stream_->get_executor(); }
  // The plain stream below the TLS layer (expires_after, socket, close); found by
  // beast::get_lowest_layer.
  Stream& next_layer() noexcept { return *stream_; }
  bool tls() const noexcept { return tls_ != nullptr; }
  // The OpenSSL connection (only when tls()): for the peer's certificate and the
  // client's name check.
  SSL* ssl_handle();
  // From now on reads and writes are plain: for answering a client that spoke plain
  // HTTP to a TLS listener before closing.
  void DropTls();

  // The TLS handshake (only when tls()), as a server or a client. `received` holds
  // bytes already read from the peer (a server's peek at the ClientHello); it must
  // stay valid until `handler(ec, bytes_used)` runs.
  template <class Handler>
  void AsyncHandshake(bool server, boost::asio::const_buffer received, Handler&& handler) {
    TlsHandshake(server, received, TlsHandler(std::forward<Handler>(handler), get_executor()));
  }

  // AsyncReadStream / AsyncWriteStream, for Beast.
  template <class MutableBufferSequence, class ReadHandler>
  void async_read_some(const MutableBufferSequence& buffers, ReadHandler&& handler) {
    if (tls_ == nullptr) {
      return stream_->async_read_some(buffers, std::forward<ReadHandler>(handler));
    }
    // As asio::ssl::stream: a TLS read fills the first non-empty buffer.
    boost::asio::mutable_buffer first;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      first = boost::asio::mutable_buffer(*it);
      if (first.size() > 0) break;
    }
    TlsReadSome(first, TlsHandler(std::forward<ReadHandler>(handler), get_executor()));
  }

  template <class ConstBufferSequence, class WriteHandler>
  void async_write_some(const ConstBufferSequence& buffers, WriteHandler&& handler) {
    if (tls_ == nullptr) {
      return stream_->async_write_some(buffers, std::forward<WriteHandler>(handler));
    }
    // As asio::ssl::stream: several buffers (an HTTP header and its body, a
    // WebSocket frame header and payload) are copied into one, so that they make one
    // TLS record, not one each. A write takes at most one record's worth.
    boost::asio::const_buffer first;
    size_t count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && count < 2; ++it) {
      boost::asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      if (count++ == 0) first = b;
    }
    // A local copy is enough: TlsWriteSome hands the plaintext to OpenSSL before it
    // returns, so no connection keeps a scratch buffer between writes.
    std::vector<unsigned char> joined;
    if (count > 1) {
      joined.resize(std::min(boost::asio::buffer_size(buffers), kMaxRecordBytes));
      size_t n = boost::asio::buffer_copy(boost::asio::buffer(joined), buffers);
      first = boost::asio::const_buffer(joined.data(), n);
    }
    TlsWriteSome(first, TlsHandler(std::forward<WriteHandler>(handler), get_executor()));
  }

  // Beast's WebSocket close (see async_teardown below): close_notify both ways.
  template <class Handler>
  void AsyncTlsShutdown(Handler&& handler) {
    executor_type executor = boost::asio::get_associated_executor(handler, get_executor());
    TlsShutdownAsync(
        TlsHandler([handler = std::forward<Handler>(handler)](
                       boost::beast::error_code ec, size_t) mutable { std::move(handler)(ec); },
                   executor));
  }
  // Its blocking form (teardown below).
  void TlsShutdown(boost::beast::error_code& ec);

 private:
  // The largest TLS record's payload (RFC 8446 section 5.1).
  static constexpr size_t kMaxRecordBytes = 16384;

  struct Tls;  // tls_stream.cc
  struct TlsDeleter {
    void operator()(Tls* tls) const;
  };

  void TlsReadSome(boost::asio::mutable_buffer buffer, TlsHandler handler);
  void TlsWriteSome(boost::asio::const_buffer buffer, TlsHandler handler);
  void TlsHandshake(bool server, boost::asio::const_buffer received, TlsHandler handler);
  void TlsShutdownAsync(TlsHandler handler);

  std::unique_ptr<Stream> stream_;            // on the heap: the TLS layer refers to it
  std::unique_ptr<Tls, TlsDeleter> tls_;      // declared after stream_: destroyed first
};

// Beast's WebSocket close customization points (found by argument-dependent lookup,
// as boost/beast/websocket/ssl.hpp does for asio::ssl::stream): TLS sends and awaits
// close_notify, plain shuts the socket down as for a basic_stream.
inline void teardown(boost::beast::role_type role, MaybeTlsStream& stream,
                     boost::beast::error_code& ec) {
  if (stream.tls()) {
    stream.TlsShutdown(ec);
  } else {
    boost::beast::teardown(role, stream.next_layer(), ec);
  }
}

template <class TeardownHandler>
void async_teardown(boost::beast::role_type role, MaybeTlsStream& stream,
                    TeardownHandler&& handler) {
  if (stream.tls()) {
    stream.AsyncTlsShutdown(std::forward<TeardownHandler>(handler));
  } else {
    boost::beast::async_teardown(role, stream.next_layer(), std::forward<TeardownHandler>(handler));
  }
}

}  // namespace hpod::http::internal
