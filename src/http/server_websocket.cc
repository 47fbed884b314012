// The server side of WebSockets: the handle the application holds
// (ServerWebSocket) and the connection that serves it on an I/O strand, over the
// HTTP session's MaybeTlsStream (plain or TLS, one Beast instantiation for both).

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <spdlog/spdlog.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "hpod/http/server_internal.h"
#include "hpod/http/tls_stream.h"

namespace hpod::http::internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;

// What a connection keeps of its read buffer between messages.
constexpr size_t kKeptBufferBytes = 64 * 1024;

// RFC 6455 limits a close frame's payload to 125 bytes, two of which are the code.
constexpr size_t kMaxCloseReasonBytes = 123;
// Upper bound on the opening and closing handshakes, so that Shutdown and a
// vanished peer do not hold a connection for request_timeout.
constexpr std::chrono::milliseconds kMaxHandshake{5000};

void LogWarning(const std::string& message) { spdlog::warn("http server: websocket: " + message); }

// One accepted WebSocket: a read loop delivering on_message, and writes pumped from
// the handle's queue, one at a time.
//
// Thread contract: Wake/Kill/OnServerStopping/ForceClose may be called from any
// thread (they post to the strand); everything else runs on the strand.
class WebSocketConnection final : public Connection,
                                  public ServerWebSocket::Sink,
                                  public std::enable_shared_from_this<WebSocketConnection> {
 public:
  WebSocketConnection(ConnectionRegistry* server, std::shared_ptr<ServerWebSocket> handle,
                      WebSocketCallbacks callbacks, MaybeTlsStream stream)
      : server_(server),
        handle_(std::move(handle)),
        callbacks_(std::move(callbacks)),
        ws_(std::move(stream)) {}

  // On the strand.
  void Start(BeastRequest request) {
    std::optional<uint64_t> id = server_->Register(weak_from_this());
    if (!id) {
      beast::error_code ec;
      beast::get_lowest_layer(ws_).socket().close(ec);
      return Finish();
    }
    id_ = *id;
    const ServerOptions& options = server_->options();
    // The HTTP keep-alive expiry must not cut a WebSocket that is quiet for days;
    // the WebSocket has its own handshake timeout and the application heartbeats.
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout timeout{};
    timeout.handshake_timeout =
        std::min<std::chrono::steady_clock::duration>(options.request_timeout, kMaxHandshake);
    timeout.idle_timeout = websocket::stream_base::none();
    timeout.keep_alive_pings = false;
    ws_.set_option(timeout);
    ws_.set_option(websocket::stream_base::decorator(
        [headers = std::move(callbacks_.response_headers),
         subprotocol = std::move(callbacks_.subprotocol)](websocket::response_type& response) {
          for (const Header& header : headers) response.set(header.name, header.value);
          if (!subprotocol.empty()) {
            response.set(beast::http::field::sec_websocket_protocol, subprotocol);
          }
        }));
    ws_.read_message_max(options.body_limit_bytes);
    // One frame per message, written as the socket takes it. Beast's default cuts
    // a message into frames of its 4 KB write buffer, each its own sendmsg: a
    // node's 1 MB config at 10,000 nodes was 256 system calls, 2.5 million for a
    // cluster's join, and they kept the I/O threads from accepting the last agents.
    ws_.auto_fragment(false);
    request_ = std::move(request);
    busy_ = 1;  // the accept
    ws_.async_accept(request_,
                     [self = shared_from_this()](beast::error_code ec) { self->OnAccept(ec); });
  }

  void Wake() override {
    asio::post(ws_.get_executor(), [self = shared_from_this()] { self->Pump(); });
  }
  void Kill() override {
    asio::post(ws_.get_executor(), [self = shared_from_this()] { self->Teardown(); });
  }
  void OnServerStopping() override { handle_->Close("server shutting down"); }
  void ForceClose() override { Kill(); }

 private:
  using Step = void (WebSocketConnection::*)(beast::error_code, size_t);
  auto Bind(Step step) { return beast::bind_front_handler(step, shared_from_this()); }

  void OnAccept(beast::error_code ec) {
    --busy_;
    request_ = {};
    if (ec) {
      LogWarning("handshake with " + handle_->remote_address() + " failed: " + ec.message());
      return Teardown();
    }
    // A server stopping meanwhile has already asked the handle to close: the close
    // frame goes out with the first Pump.
    accepted_ = true;
    handle_->Attach(shared_from_this());
    Read();
    Pump();
  }

  // Reads a message a part at a time (Beast's read_some, as much as one read of
  // the socket brings), so that a large one shows progress (on_progress).
  void Read() {
    reading_ = true;
    ws_.async_read_some(buffer_, 0, Bind(&WebSocketConnection::OnRead));
  }

  void OnRead(beast::error_code ec, size_t) {
    reading_ = false;
    if (ec) return Teardown();  // closed by the peer (or by us), reset, or too large
    if (!ws_.is_message_done()) {
      if (callbacks_.on_progress) {
        try {
          callbacks_.on_progress();
        } catch (const std::exception& e) {
          LogWarning(std::string("on_progress threw: ") + e.what());
        }
      }
      if (!tearing_down_) Read();
      return;
    }
    WebSocketMessage message{beast::buffers_to_string(buffer_.data()), ws_.got_binary()};
    buffer_.consume(buffer_.size());
    // A large message (a controller's Slurm table at 10,000 nodes) must not stay
    // reserved by the connection for its lifetime.
    if (buffer_.capacity() > kKeptBufferBytes) buffer_.shrink_to_fit();
    if (callbacks_.on_message) {
      try {
        callbacks_.on_message(std::move(message));
      } catch (const std::exception& e) {
        LogWarning(std::string("on_message threw: ") + e.what());
      }
    }
    if (!tearing_down_) Read();
  }

  void Pump() {
    if (!accepted_ || tearing_down_ || writing_ || closing_) return;
    std::string reason;
    switch (handle_->TakeNext(&writing_message_, &reason)) {
      case ServerWebSocket::Next::kNothing:
        return;
      case ServerWebSocket::Next::kMessage:
        writing_ = true;
        ws_.binary(writing_message_.binary);
        ws_.async_write(asio::buffer(*writing_message_.data), Bind(&WebSocketConnection::OnWrite));
        return;
      case ServerWebSocket::Next::kClose:
        closing_ = true;
        ws_.async_close(websocket::close_reason(websocket::close_code::normal, reason),
                        [self = shared_from_this()](beast::error_code ec) { self->OnClose(ec); });
        return;
      case ServerWebSocket::Next::kKill:
        return Teardown();
    }
  }

  void OnWrite(beast::error_code ec, size_t) {
    writing_ = false;
    handle_->Written(writing_message_.data->size());
    writing_message_ = {};
    if (ec) return Teardown();
    Pump();
  }

  void OnClose(beast::error_code) {
    closing_ = false;
    // The close handshake is over (or failed): nothing more will be read or written.
    Teardown();
  }

  // Ends the connection: no more sends, the socket closes (which completes the
  // outstanding operations), and Finish runs once the last of them is back.
  void Teardown() {
    if (!tearing_down_) {
      tearing_down_ = true;
      handle_->Detach();
      beast::error_code ec;
      beast::get_lowest_layer(ws_).socket().close(ec);
    }
    if (busy_ == 0 && !reading_ && !writing_ && !closing_) Finish();
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    handle_->Detach();
    if (id_) server_->Unregister(*id_);
    if (callbacks_.on_close) {
      try {
        callbacks_.on_close();
      } catch (const std::exception& e) {
        LogWarning(std::string("on_close threw: ") + e.what());
      }
    }
    // Whatever the callbacks captured (often the handle) goes now, not when the
    // last completion handler releases this object.
    callbacks_ = {};
  }

  ConnectionRegistry* const server_;
  const std::shared_ptr<ServerWebSocket> handle_;
  WebSocketCallbacks callbacks_;
  websocket::stream<MaybeTlsStream> ws_;
  std::optional<uint64_t> id_;
  BeastRequest request_;  // kept until the accept completes
  beast::flat_buffer buffer_;
  ServerWebSocket::Outgoing writing_message_;
  int busy_ = 0;  // the accept in flight
  bool accepted_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool tearing_down_ = false;
  bool finished_ = false;
};

}  // namespace

bool ServerWebSocket::Send(std::string data, bool binary) {
  return SendShared(std::make_shared<const std::string>(std::move(data)), binary);
}

bool ServerWebSocket::SendShared(std::shared_ptr<const std::string> data, bool binary) {
  MutexLock lock(mu_);
  if (closed_) return false;
  // One message is always accepted into an empty queue, so a limit smaller than the
  // largest message does not make that message unsendable. A shared message counts
  // in full: it is this peer that does not read it.
  if (queued_bytes_ > 0 && queued_bytes_ + data->size() > send_queue_bytes_) {
    LogWarning("send queue to " + remote_address_ + " exceeds " +
               std::to_string(send_queue_bytes_) + " bytes; closing");
    closed_ = true;
    killed_ = true;
    queue_.clear();
    if (sink_ != nullptr) sink_->Kill();
    return false;
  }
  queued_bytes_ += data->size();
  queue_.push_back(Outgoing{std::move(data), binary});
  if (sink_ != nullptr && !wake_pending_) {
    wake_pending_ = true;
    sink_->Wake();
  }
  return true;
}

void ServerWebSocket::Close(std::string_view reason) {
  MutexLock lock(mu_);
  if (closed_) return;
  closed_ = true;
  close_requested_ = true;
  close_reason_ = std::string(reason.substr(0, kMaxCloseReasonBytes));
  if (sink_ != nullptr && !wake_pending_) {
    wake_pending_ = true;
    sink_->Wake();
  }
}

void ServerWebSocket::Attach(std::shared_ptr<Sink> sink) {
  MutexLock lock(mu_);
  if (detached_) return;
  sink_ = std::move(sink);
  // The connection pumps right after attaching, so nothing needs waking here.
  wake_pending_ = true;
}

void ServerWebSocket::Detach() {
  MutexLock lock(mu_);
  closed_ = true;
  detached_ = true;
  sink_.reset();
  queue_.clear();
  queued_bytes_ = 0;
}

ServerWebSocket::Next ServerWebSocket::TakeNext(Outgoing* message, std::string* close_reason) {
  MutexLock lock(mu_);
  wake_pending_ = false;
  if (killed_) return Next::kKill;
  if (!queue_.empty()) {
    *message = std::move(queue_.front());
    queue_.pop_front();
    return Next::kMessage;
  }
  if (close_requested_) {
    close_requested_ = false;
    *close_reason = close_reason_;
    return Next::kClose;
  }
  return Next::kNothing;
}

void ServerWebSocket::Written(size_t bytes) {
  MutexLock lock(mu_);
  queued_bytes_ -= std::min(bytes, queued_bytes_);
}

void StartWebSocket(ConnectionRegistry* server, std::shared_ptr<ServerWebSocket> handle,
                    WebSocketCallbacks callbacks, MaybeTlsStream stream, BeastRequest request) {
  auto connection = std::make_shared<WebSocketConnection>(server, std::move(handle),
                                                          std::move(callbacks), std::move(stream));
  connection->Start(std::move(request));
}

}  // namespace hpod::http::internal
