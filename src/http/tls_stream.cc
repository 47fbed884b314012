// The TLS half of MaybeTlsStream (tls_stream.h): OpenSSL driven directly over the
// connection's basic_stream, compiled once here for the one buffer type and the one
// (type-erased) handler type each operation takes.
//
// Why not asio::ssl::stream: it keeps two 17 KiB record buffers and a 17 KiB BIO
// pair each way for the connection's whole life, about 68 KiB per end. hpodd holds
// one mostly idle connection per node agent, and at 10,000 nodes that was more
// than half of its memory. Here ciphertext is held only while it is in flight:
//  - OpenSSL reads and writes through a BIO of our own that takes from `in`
//    (ciphertext received, not yet taken by OpenSSL) and appends to `out` (made,
//    not yet sent). Both are freed once empty.
//  - A read receives into the caller's own buffer (Beast's read buffer) and copies
//    what came to `in`, so an idle connection, whose read waits for the next frame,
//    holds no receive buffer. While a transfer streams in (the last receive filled
//    its buffer), a caller's buffer smaller than a record gives way to a
//    record-sized chunk, freed when the stream pauses.
//  - SSL_MODE_RELEASE_BUFFERS lets OpenSSL free its own record buffers between
//    records.
// The errors are asio::ssl's (OpenSSL's in asio's SSL category, stream_truncated
// for an end without close_notify, eof after one), so IsTlsError and TlsFailure
// read them as before.

#include "hpod/http/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

namespace hpod::http::internal {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::beast::error_code;

// A whole record with its header and the most a cipher adds (RFC 8446 5.2).
constexpr size_t kRecordBytes = 5 + 16384 + 256;

enum class OpKind { kHandshake, kRead, kWrite, kShutdown };

// What an operation needs after one OpenSSL call.
enum class Want { kDone, kInput };

// One asynchronous operation in flight, owned by the chain of handlers that carry
// it (a std::unique_ptr moved from step to step).
struct Op {
  Op(OpKind k, TlsHandler h) : kind(k), handler(std::move(h)) {}
  OpKind kind;
  asio::mutable_buffer read_buffer;  // kRead
  asio::const_buffer write_buffer;   // kWrite
  size_t handshake_bytes = 0;        // kHandshake: the bytes it was given
  TlsHandler handler;
  // An asynchronous step has run, so the handler may be called directly; before
  // one, it is posted (asio's rule: never complete inside the initiating call).
  bool async = false;
};

}  // namespace

// One TLS connection's OpenSSL state and its ciphertext in flight.
//
// Thread contract: that of MaybeTlsStream (its connection's strand). At most one
// operation receives at a time (a handshake, a read or a shutdown), and any number
// may wait for `out` to be sent, which one socket write at a time does.
struct MaybeTlsStream::Tls {
  Tls(Stream& s, std::shared_ptr<SslContext> c);
  ~Tls() { SSL_free(ssl_); }
  Tls(const Tls&) = delete;
  Tls& operator=(const Tls&) = delete;

  SSL* ssl() const { return ssl_; }
  // Ciphertext already read from the peer (a server's peek at the ClientHello).
  void Give(asio::const_buffer received) {
    const auto* data = static_cast<const unsigned char*>(received.data());
    in_.insert(in_.end(), data, data + received.size());
  }
  // Runs `op`'s first OpenSSL call now (a write's plaintext is taken before this
  // returns); the handler runs later, never inside this call.
  void Start(std::unique_ptr<Op> op) { Drive(std::move(op)); }
  // The blocking shutdown (no asynchronous operation may be in flight).
  void Shutdown(error_code& ec);

 private:
  static BIO_METHOD* Method();
  static int BioRead(BIO* bio, char* data, int size);
  static int BioWrite(BIO* bio, const char* data, int size);
  static long BioCtrl(BIO* bio, int cmd, long num, void* ptr);  // NOLINT(runtime/int): OpenSSL's

  // One OpenSSL call for `kind`; `ec` and `bytes` are its result when kDone.
  Want Perform(OpKind kind, asio::mutable_buffer read_buffer, asio::const_buffer write_buffer,
               error_code& ec, size_t& bytes);
  // Perform, then send what it made (if anything) before going on.
  void Drive(std::unique_ptr<Op> op);
  void Continue(std::unique_ptr<Op> op, Want want, error_code ec, size_t bytes);
  void Receive(std::unique_ptr<Op> op);
  void Received(const unsigned char* data, size_t bytes, size_t space, bool chunk);
  void FreeChunk() { chunk_.reset(); }
  void Complete(std::unique_ptr<Op> op, error_code ec, size_t bytes);
  void StartSend(const TlsHandler::executor_type& executor);
  // The end of the peer's stream is clean only after its close_notify.
  error_code MapEnd(error_code ec) const;

  Stream& stream_;
  std::shared_ptr<SslContext> context_;  // the SSL object holds its SSL_CTX too
  SSL* ssl_ = nullptr;                   // owns the BIO
  std::vector<unsigned char> in_;        // received, not yet taken: [in_pos_, size)
  size_t in_pos_ = 0;
  std::vector<unsigned char> out_;      // made by OpenSSL, not yet being sent
  // The socket write in flight; empty when none is (a send is never empty).
  std::vector<unsigned char> sending_;
  std::unique_ptr<unsigned char[]> chunk_;  // receive space (kRecordBytes) while streaming
  bool streaming_ = false;                // the last receive filled its buffer: more is coming
  error_code write_error_;                // sticky: once a send failed, the connection is done
  std::vector<TlsHandler> send_waiters_;  // ops whose output is in out_/sending_
};

void MaybeTlsStream::TlsDeleter::operator()(Tls* tls) const { delete tls; }

MaybeTlsStream::Tls::Tls(Stream& s, std::shared_ptr<SslContext> c)
    : stream_(s), context_(std::move(c)) {
  BIO_METHOD* method = Method();  // may throw: before anything is owned
  ssl_ = SSL_new(context_->native_handle());
  BIO* bio = ssl_ != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::bad_alloc();  // as asio::ssl::stream and every allocation here
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one reference, owned by the SSL object
  // AUTO_RETRY (OpenSSL's default, stated): a read asks for more ciphertext only
  // once it took all there was.
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                         SSL_MODE_RELEASE_BUFFERS | SSL_MODE_AUTO_RETRY);
}

BIO_METHOD* MaybeTlsStream::Tls::Method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "hpod tls records");
    if (m == nullptr) throw std::bad_alloc();
    BIO_meth_set_read(m, &BioRead);
    BIO_meth_set_write(m, &BioWrite);
    BIO_meth_set_ctrl(m, &BioCtrl);
    BIO_meth_set_create(m, [](BIO* bio) {
      BIO_set_init(bio, 1);
      return 1;
    });
    return m;
  }();
  return method;
}

int MaybeTlsStream::Tls::BioRead(BIO* bio, char* data, int size) {
  Tls& t = *static_cast<Tls*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  size_t available = t.in_.size() - t.in_pos_;
  if (available == 0) {
    BIO_set_retry_read(bio);  // OpenSSL answers WANT_READ; the op receives more
    return -1;
  }
  size_t n = std::min(available, static_cast<size_t>(std::max(size, 0)));
  std::memcpy(data, t.in_.data() + t.in_pos_, n);
  t.in_pos_ += n;
  if (t.in_pos_ == t.in_.size()) {
    std::vector<unsigned char>().swap(t.in_);
    t.in_pos_ = 0;
  }
  return static_cast<int>(n);
}

int MaybeTlsStream::Tls::BioWrite(BIO* bio, const char* data, int size) {
  Tls& t = *static_cast<Tls*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  // Never refused: the op that made it sends it before it reads or completes.
  t.out_.insert(t.out_.end(), data, data + std::max(size, 0));
  return size;
}

long MaybeTlsStream::Tls::BioCtrl(BIO* bio, int cmd, long, void*) {  // NOLINT(runtime/int)
  Tls& t = *static_cast<Tls*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // sent by the op that made it
    case BIO_CTRL_PENDING:
      return static_cast<long>(t.in_.size() - t.in_pos_);  // NOLINT(runtime/int)
    case BIO_CTRL_WPENDING:
      return static_cast<long>(t.out_.size());  // NOLINT(runtime/int)
    default:
      return 0;
  }
}

Want MaybeTlsStream::Tls::Perform(OpKind kind, asio::mutable_buffer read_buffer,
                                  asio::const_buffer write_buffer, error_code& ec, size_t& bytes) {
  ec = {};
  bytes = 0;
  ERR_clear_error();
  int result = 0;
  switch (kind) {
    case OpKind::kHandshake:
      result = SSL_do_handshake(ssl_);
      break;
    case OpKind::kRead:
      if (read_buffer.size() == 0) return Want::kDone;  // as asio: nothing to read into
      result = SSL_read(ssl_, read_buffer.data(),
                        static_cast<int>(std::min<size_t>(read_buffer.size(), INT_MAX)));
      break;
    case OpKind::kWrite:
      if (write_buffer.size() == 0) return Want::kDone;
      // One record per write, as asio::ssl::stream: Beast's write loop sends the rest.
      result = SSL_write(ssl_, write_buffer.data(),
                         static_cast<int>(std::min(write_buffer.size(), kMaxRecordBytes)));
      break;
    case OpKind::kShutdown:
      result = SSL_shutdown(ssl_);
      if (result == 0) result = SSL_shutdown(ssl_);  // ours sent: await the peer's
      break;
  }
  const int ssl_error = SSL_get_error(ssl_, result);
  const unsigned long sys_error = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's
  switch (ssl_error) {
    case SSL_ERROR_NONE:
      if (kind == OpKind::kRead || kind == OpKind::kWrite) bytes = static_cast<size_t>(result);
      return Want::kDone;
    case SSL_ERROR_WANT_READ:
      // Only a renegotiation (off in every context) makes a write read.
      if (kind == OpKind::kWrite) break;
      return Want::kInput;
    case SSL_ERROR_ZERO_RETURN:
      ec = asio::error::eof;  // the peer's close_notify
      return Want::kDone;
    case SSL_ERROR_SSL:
    case SSL_ERROR_SYSCALL:
      if (sys_error != 0) {
        ec = error_code(static_cast<int>(sys_error), asio::error::get_ssl_category());
      } else {
        ec = ssl_error == SSL_ERROR_SYSCALL ? ssl::error::unspecified_system_error
                                            : ssl::error::unexpected_result;
      }
      return Want::kDone;
    default:  // WANT_WRITE cannot happen: BioWrite never refuses
      break;
  }
  ec = ssl::error::unexpected_result;
  return Want::kDone;
}

void MaybeTlsStream::Tls::Drive(std::unique_ptr<Op> op) {
  error_code ec;
  size_t bytes = 0;
  const size_t made_before = out_.size();
  Want want = Perform(op->kind, op->read_buffer, op->write_buffer, ec, bytes);
  if (op->kind == OpKind::kHandshake && !ec && want == Want::kDone) bytes = op->handshake_bytes;
  if (out_.size() == made_before) return Continue(std::move(op), want, ec, bytes);
  // OpenSSL made records (a handshake flight, the data written, an alert): they
  // go out before this op receives or completes.
  // When both OpenSSL and the socket failed, OpenSSL's error says more (a
  // certificate that did not verify, not the broken pipe of its alert), as asio's.
  if (write_error_) {
    std::vector<unsigned char>().swap(out_);  // never sent
    return Complete(std::move(op), ec ? ec : write_error_, 0);
  }
  op->async = true;
  TlsHandler::executor_type executor = op->handler.get_executor();
  send_waiters_.emplace_back(
      [this, op = std::move(op), want, ec, bytes](error_code sent, size_t) mutable {
        if (sent) return Complete(std::move(op), ec ? ec : sent, 0);
        Continue(std::move(op), want, ec, bytes);
      },
      executor);
  if (sending_.empty()) StartSend(executor);
}

void MaybeTlsStream::Tls::StartSend(const TlsHandler::executor_type& executor) {
  sending_.swap(out_);  // out_ takes sending_'s (freed) storage
  asio::async_write(stream_, asio::buffer(sending_),
                    asio::bind_executor(executor, [this, executor](error_code ec, size_t) {
                      std::vector<unsigned char>().swap(sending_);
                      if (ec) {
                        write_error_ = ec;
                        std::vector<unsigned char>().swap(out_);  // never sent
                      }
                      if (!ec && !out_.empty()) return StartSend(executor);
                      std::vector<TlsHandler> waiters;
                      waiters.swap(send_waiters_);
                      for (TlsHandler& waiter : waiters) waiter(ec, 0);
                    }));
}

void MaybeTlsStream::Tls::Continue(std::unique_ptr<Op> op, Want want, error_code ec, size_t bytes) {
  if (want == Want::kDone) return Complete(std::move(op), ec, bytes);
  // OpenSSL asks for more once it took all of in_ (SSL_MODE_AUTO_RETRY); were
  // anything left, it goes to OpenSSL before the op waits on the socket.
  if (in_pos_ < in_.size()) return Drive(std::move(op));
  Receive(std::move(op));
}

void MaybeTlsStream::Tls::Receive(std::unique_ptr<Op> op) {
  if (streaming_) {
    // A burst that ended exactly at a buffer's end: nothing waits, so an idle
    // read keeps no chunk.
    error_code ignored;
    if (stream_.socket().available(ignored) == 0) {
      streaming_ = false;
      FreeChunk();
    }
  }
  // The caller's buffer when there is one and, while streaming, it holds a record.
  const bool chunk = op->kind != OpKind::kRead || op->read_buffer.size() == 0 ||
                     (streaming_ && op->read_buffer.size() < kRecordBytes);
  if (chunk && chunk_ == nullptr) chunk_.reset(new unsigned char[kRecordBytes]);  // not zeroed
  asio::mutable_buffer space = chunk ? asio::buffer(chunk_.get(), kRecordBytes) : op->read_buffer;
  op->async = true;
  TlsHandler::executor_type executor = op->handler.get_executor();
  stream_.async_read_some(
      space, asio::bind_executor(executor, [this, op = std::move(op), space, chunk](
                                               error_code ec, size_t n) mutable {
        Received(static_cast<const unsigned char*>(space.data()), n, space.size(), chunk);
        if (ec) return Complete(std::move(op), MapEnd(ec), 0);
        Drive(std::move(op));
      }));
}

void MaybeTlsStream::Tls::Received(const unsigned char* data, size_t bytes, size_t space,
                                   bool chunk) {
  in_.insert(in_.end(), data, data + bytes);
  streaming_ = bytes == space;
  if (chunk && !streaming_) FreeChunk();  // it paused
}

void MaybeTlsStream::Tls::Complete(std::unique_ptr<Op> op, error_code ec, size_t bytes) {
  TlsHandler handler = std::move(op->handler);
  const bool async = op->async;
  op.reset();
  if (async) return handler(ec, bytes);
  TlsHandler::executor_type executor = handler.get_executor();
  asio::post(executor, [handler = std::move(handler), ec, bytes]() mutable { handler(ec, bytes); });
}

error_code MaybeTlsStream::Tls::MapEnd(error_code ec) const {
  if (ec != asio::error::eof) return ec;
  if ((SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) != 0) return ec;
  return ssl::error::stream_truncated;
}

void MaybeTlsStream::Tls::Shutdown(error_code& ec) {
  for (;;) {
    size_t bytes = 0;
    Want want = Perform(OpKind::kShutdown, {}, {}, ec, bytes);
    if (!out_.empty()) {
      error_code sent;
      asio::write(stream_, asio::buffer(out_), sent);
      std::vector<unsigned char>().swap(out_);
      if (sent) {
        ec = sent;
        return;
      }
    }
    if (want == Want::kDone) return;
    chunk_.reset(new unsigned char[kRecordBytes]);
    error_code received;
    size_t n = stream_.read_some(asio::buffer(chunk_.get(), kRecordBytes), received);
    in_.insert(in_.end(), chunk_.get(), chunk_.get() + n);
    FreeChunk();
    if (received) {
      ec = MapEnd(received);
      return;
    }
  }
}

MaybeTlsStream::MaybeTlsStream(Stream stream, std::shared_ptr<SslContext> context)
    : stream_(std::make_unique<Stream>(std::move(stream))) {
  if (context != nullptr) tls_.reset(new Tls(*stream_, std::move(context)));
}

MaybeTlsStream::MaybeTlsStream(MaybeTlsStream&&) noexcept = default;
MaybeTlsStream::~MaybeTlsStream() = default;

SSL* MaybeTlsStream::ssl_handle() { return tls_->ssl(); }

void MaybeTlsStream::DropTls() { tls_.reset(); }

void MaybeTlsStream::TlsReadSome(boost::asio::mutable_buffer buffer, TlsHandler handler) {
  auto op = std::make_unique<Op>(OpKind::kRead, std::move(handler));
  op->read_buffer = buffer;
  tls_->Start(std::move(op));
}

void MaybeTlsStream::TlsWriteSome(boost::asio::const_buffer buffer, TlsHandler handler) {
  // Start's first Perform copies the plaintext into OpenSSL's records before it
  // returns (a write never asks for input), so `buffer` need not outlive this call.
  auto op = std::make_unique<Op>(OpKind::kWrite, std::move(handler));
  op->write_buffer = buffer;
  tls_->Start(std::move(op));
}

void MaybeTlsStream::TlsHandshake(bool server, boost::asio::const_buffer received,
                                  TlsHandler handler) {
  auto op = std::make_unique<Op>(OpKind::kHandshake, std::move(handler));
  op->handshake_bytes = received.size();
  tls_->Give(received);
  if (server) {
    SSL_set_accept_state(tls_->ssl());
  } else {
    SSL_set_connect_state(tls_->ssl());
  }
  tls_->Start(std::move(op));
}

void MaybeTlsStream::TlsShutdownAsync(TlsHandler handler) {
  tls_->Start(std::make_unique<Op>(OpKind::kShutdown, std::move(handler)));
}

void MaybeTlsStream::TlsShutdown(boost::beast::error_code& ec) { tls_->Shutdown(ec); }

}  // namespace hpod::http::internal
