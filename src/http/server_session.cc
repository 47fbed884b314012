// The HTTP side of one accepted connection (internal::HttpSession): the idle wait,
// header and body reads under the size and time limits, the hand-off to the
// handler queue, the response write, keep-alive and the lingering close. The
// listener, the handler threads and shutdown are in server.cc; a WebSocket the
// session hands its stream to is in server_websocket.cc. On a TLS listener the
// session first checks that the client speaks TLS at all, then runs the handshake.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "hpod/http/server_internal.h"
#include "hpod/http/tls_context.h"
#include "hpod/http/tls_stream.h"
#include "hpod/http/websocket.h"

namespace hpod::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

using internal::BeastRequest;
using internal::FormatEndpoint;
using internal::MaybeTlsStream;
using internal::Protocol;
using internal::Stream;

// How many bytes the idle wait reads at once; the rest of a request follows through
// the parser.
constexpr size_t kFirstReadBytes = 4096;
// A connection's read buffer is released back to this size between requests, so a
// large body does not stay pinned by an idle keep-alive connection.
constexpr size_t kIdleBufferBytes = 64 * 1024;
// Upper bound on the lingering close (draining what the peer still sends after our
// final response, so that our response is not lost to a TCP reset).
constexpr std::chrono::milliseconds kMaxLinger{5000};
// Every TLS connection starts with a handshake record (RFC 8446 section 5.1).
constexpr unsigned char kTlsHandshakeRecord = 0x16;
// What a plain-HTTP client gets from a TLS listener (as nginx answers it).
constexpr std::string_view kTlsOnly = "This port speaks HTTPS (TLS) only; use https://";

// A plain string rather than spdlog's format strings: each formatted call
// instantiates fmt's machinery, a noticeable part of this file's build time.
void LogError(const std::string& message) { spdlog::error("http server: " + message); }
void LogDebug(const std::string& message) { spdlog::debug("http server: " + message); }

bool HasLineBreakOrNul(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// One accepted connection: reads requests, calls the handler, writes responses,
// until the peer leaves, a limit is hit, or the server stops. An accepted WebSocket
// upgrade hands the stream over to a WebSocket connection (server_websocket.cc) and
// the session ends.
//
// Thread contract: Start/OnServerStopping/ForceClose may be called from any thread
// (they post to the session's strand); Handle runs on a handler thread while the
// session is kHandling (nothing on the strand touches request_ then); everything else
// runs on that strand.
class Session final : public internal::HttpSession, public std::enable_shared_from_this<Session> {
 public:
  Session(internal::SessionHost* server, uint64_t id, Protocol::socket socket,
          std::shared_ptr<internal::SslContext> tls_context)
      : server_(server), id_(id), stream_(Stream(std::move(socket)), std::move(tls_context)) {
    beast::error_code ec;
    Protocol::endpoint remote = stream_.next_layer().socket().remote_endpoint(ec);
    if (!ec) remote_address_ = FormatEndpoint(remote);
  }
  ~Session() override { server_->Unregister(id_); }

  void Start() override {
    asio::dispatch(executor_, [self = shared_from_this()] {
      if (self->stream_.tls()) return self->ReadClientHello();
      self->WaitForRequest();
    });
  }
  // Idle connections close now; one in the middle of a request finishes it first.
  // The executor is copied first: after a handover stream_ is empty.
  void OnServerStopping() override {
    asio::post(executor_, [self = shared_from_this()] {
      if (self->state_ == State::kIdle) self->Close();
    });
  }
  void ForceClose() override {
    asio::post(executor_, [self = shared_from_this()] { self->Close(); });
  }

  // On a handler thread: runs the handler on the queued request and posts the
  // response back to the strand.
  void Handle() override {
    if (upgrade_request_) return HandleUpgrade();
    Response response = server_->Invoke(request_);
    asio::post(executor_, [self = shared_from_this(), response = std::move(response)]() mutable {
      self->Respond(std::move(response));
    });
  }
  void Shed(Response response) override {
    upgrade_request_.reset();  // answered as an ordinary response, like a refusal
    asio::post(executor_, [self = shared_from_this(), response = std::move(response)]() mutable {
      self->Respond(std::move(response));
    });
  }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kClosing, kClosed, kHandedOver };

  // On a handler thread: the UpgradeHandler decides; a refusal is written as an
  // ordinary response, an acceptance hands the stream over on the strand.
  void HandleUpgrade() {
    auto socket = std::make_shared<internal::ServerWebSocket>(
        remote_address_, server_->options().websocket_send_queue_bytes);
    UpgradeResult result = server_->InvokeUpgrade(request_, socket);
    if (auto* callbacks = std::get_if<WebSocketCallbacks>(&result)) {
      if (SubprotocolOffered(callbacks->subprotocol)) {
        asio::post(executor_, [self = shared_from_this(), socket = std::move(socket),
                               callbacks = std::move(*callbacks)]() mutable {
          self->BecomeWebSocket(std::move(socket), std::move(callbacks));
        });
        return;
      }
      // A handler defect: the client would fail this handshake (websocket.h). The
      // connection never comes to be, so its on_close runs now, as for any other.
      LogError("upgrade handler selected subprotocol '" + callbacks->subprotocol +
               "', which the client did not offer, on " + request_.target);
      socket->Detach();
      if (callbacks->on_close) {
        try {
          callbacks->on_close();
        } catch (const std::exception& e) {
          LogError(std::string("on_close threw: ") + e.what());
        }
      }
      result = internal::InternalFailure();
    }
    socket->Detach();
    upgrade_request_.reset();
    Response response = std::move(std::get<Response>(result));
    if (response.status == 101) {
      LogError("upgrade handler refused with status 101 on " + request_.target);
      response = internal::InternalFailure();
    }
    asio::post(executor_, [self = shared_from_this(), response = std::move(response)]() mutable {
      self->Respond(std::move(response));
    });
  }

  bool SubprotocolOffered(const std::string& selected) const {
    if (selected.empty()) return true;
    std::vector<std::string> offered = HeaderList(request_.headers, "Sec-WebSocket-Protocol");
    return std::find(offered.begin(), offered.end(), selected) != offered.end();
  }

  void BecomeWebSocket(std::shared_ptr<internal::ServerWebSocket> socket,
                       WebSocketCallbacks callbacks) {
    // StartWebSocket also refuses while stopping, and calls on_close either way.
    state_ = State::kHandedOver;
    request_ = Request();
    BeastRequest request = std::move(*upgrade_request_);
    upgrade_request_.reset();
    internal::StartWebSocket(server_, std::move(socket), std::move(callbacks), std::move(stream_),
                             std::move(request));
  }

  // Every completion handler has this one type, so each Beast operation is
  // instantiated once rather than once per call site (Beast dominates build time).
  using Step = void (Session::*)(beast::error_code, size_t);
  auto Bind(Step step) { return beast::bind_front_handler(step, shared_from_this()); }

  // TLS: the first bytes decide. A handshake record goes to the handshake (which
  // reuses them); anything else is a plain-HTTP client, told so in plain HTTP. Both
  // run under the request timeout, like a request.
  void ReadClientHello() {
    state_ = State::kIdle;  // no request yet: a stopping server closes it
    stream_.next_layer().expires_after(server_->options().request_timeout);
    stream_.next_layer().async_read_some(buffer_.prepare(kFirstReadBytes),
                                         Bind(&Session::OnClientHello));
  }

  void OnClientHello(beast::error_code ec, size_t n) {
    if (ec) return Close();
    buffer_.commit(n);
    if (static_cast<const unsigned char*>(buffer_.data().data())[0] != kTlsHandshakeRecord) {
      LogDebug("plain HTTP from " + remote_address_ + " on a TLS listener");
      stream_.DropTls();
      return ReplyAndClose(bhttp::status::bad_request, kTlsOnly);
    }
    stream_.AsyncHandshake(/*server=*/true, buffer_.data(), Bind(&Session::OnHandshake));
  }

  void OnHandshake(beast::error_code ec, size_t) {
    if (ec) {
      // Scanners and wrongly configured clients are routine here, not server errors.
      LogDebug("TLS handshake with " + remote_address_ +
               " failed: " + internal::TlsFailure(stream_.ssl_handle(), ec));
      return Close();
    }
    buffer_.consume(buffer_.size());  // the handshake took them
    tls_peer_ = internal::PeerCertificate(stream_.ssl_handle());
    WaitForRequest();
  }

  // Between requests the idle timeout applies; the request timeout starts with the
  // first byte of the next request.
  void WaitForRequest() {
    if (server_->stopping()) return CloseGracefully();
    state_ = State::kIdle;
    if (buffer_.size() > 0) return ReadHeader();  // a pipelined request is already here
    if (buffer_.capacity() > kIdleBufferBytes) buffer_.shrink_to_fit();
    stream_.next_layer().expires_after(server_->options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), Bind(&Session::OnFirstBytes));
  }

  void OnFirstBytes(beast::error_code ec, size_t n) {
    if (ec) return Close();  // the peer left, idle timeout, or stopping
    buffer_.commit(n);
    ReadHeader();
  }

  void ReadHeader() {
    state_ = State::kReading;
    const ServerOptions& options = server_->options();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(options.header_limit_bytes, std::numeric_limits<uint32_t>::max())));
    parser_->body_limit(static_cast<uint64_t>(options.body_limit_bytes));
    // Not renewed below: the whole request (header, 100-continue, body) shares it.
    stream_.next_layer().expires_after(options.request_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_, Bind(&Session::OnHeader));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    if (header.version() >= 11 && beast::iequals(header[bhttp::field::expect], "100-continue")) {
      // Clients that ask (curl for large bodies, the AWS SDKs for uploads) would
      // otherwise wait a second or more before sending the body.
      continue_.emplace(bhttp::status::continue_, 11);
      bhttp::async_write(stream_, *continue_, Bind(&Session::OnContinueWritten));
      return;
    }
    ReadBody();
  }

  void OnContinueWritten(beast::error_code ec, size_t) {
    continue_.reset();
    if (ec) return Close();
    ReadBody();
  }

  void ReadBody() { bhttp::async_read(stream_, buffer_, *parser_, Bind(&Session::OnRequest)); }

  void OnReadError(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      return ReplyAndClose(bhttp::status::payload_too_large, "Payload Too Large");
    }
    if (ec == bhttp::error::header_limit) {
      return ReplyAndClose(bhttp::status::request_header_fields_too_large,
                           "Request Header Fields Too Large");
    }
    // end_of_stream and partial_message mean the peer left: nobody to answer.
    if (&ec.category() == &bhttp::make_error_code(bhttp::error::bad_target).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      return ReplyAndClose(bhttp::status::bad_request, "Bad Request");
    }
    Close();  // timeout (tcp_stream already closed the socket), reset, or stopping
  }

  void OnRequest(beast::error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    state_ = State::kHandling;
    bhttp::request<bhttp::string_body>& message = parser_->get();
    bool keep_alive = message.keep_alive();
    bool head = message.method() == bhttp::verb::head;
    unsigned version = message.version();

    request_ = Request();
    request_.method = std::string(message.method_string());
    request_.target = std::string(message.target());
    request_.headers.reserve(std::distance(message.begin(), message.end()));
    for (const auto& field : message) {
      request_.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
    request_.body = std::move(message.body());
    request_.remote_address = remote_address_;
    request_.tls = stream_.tls();
    request_.peer_cert_cn = tls_peer_.cn;
    request_.peer_cert_serial_hex = tls_peer_.serial_hex;
    request_.peer_cert_sha256_hex = tls_peer_.sha256_hex;
    request_version_ = version;
    request_keep_alive_ = keep_alive;
    request_head_ = head;
    // Kept whole: the WebSocket handshake answers it.
    if (server_->accepts_upgrades() && beast::websocket::is_upgrade(message)) {
      upgrade_request_.emplace(parser_->release());
    }
    parser_.reset();

    // Handle() runs on a handler thread and posts Respond() back to this strand.
    if (!server_->Enqueue(shared_from_this())) Close();  // the server is going away
  }

  void Respond(Response response) {
    try {
      BuildResponse(std::move(response), request_version_, request_keep_alive_, request_head_);
    } catch (const std::exception& e) {
      // Beast rejects some combinations (a body on a 204, an oversized field).
      LogError("bad response to " + request_.method + " " + request_.target + ": " + e.what());
      BuildResponse(internal::InternalFailure(), request_version_, request_keep_alive_,
                    request_head_);
    }
    request_ = Request();  // a large body is not kept by an idle connection
    Write();
  }

  void BuildResponse(Response response, unsigned version, bool keep_alive, bool head) {
    if (response.status < 100 || response.status > 999) {
      LogError("handler returned status " + std::to_string(response.status));
      response = internal::InternalFailure();
    }
    response_.emplace();
    response_->version(version);
    response_->result(static_cast<unsigned>(response.status));
    if (bhttp::int_to_status(response.status) == bhttp::status::unknown) {
      response_->reason("Unknown");  // Beast's default is "<unknown-status>"
    }
    for (const Header& header : response.headers) {
      // The server owns framing; a CR/LF would let a header value split the response.
      if (beast::iequals(header.name, "Content-Length") ||
          beast::iequals(header.name, "Transfer-Encoding") || HasLineBreakOrNul(header.name) ||
          HasLineBreakOrNul(header.value)) {
        continue;
      }
      if (beast::iequals(header.name, "Connection")) {
        if (beast::iequals(header.value, "close")) keep_alive = false;
        continue;
      }
      response_->insert(header.name, header.value);
    }
    keep_alive_ = keep_alive && !server_->stopping();
    response_->keep_alive(keep_alive_);
    response_->body() = std::move(response.body);
    response_->prepare_payload();
    // HEAD: Content-Length describes the body a GET would get; none is sent.
    if (head) response_->body().clear();
  }

  void ReplyAndClose(bhttp::status status, std::string_view text) {
    response_.emplace(status, 11);
    response_->set(bhttp::field::content_type, "text/plain");
    response_->body() = std::string(text);
    keep_alive_ = false;
    response_->keep_alive(false);
    response_->prepare_payload();
    Write();
  }

  void Write() {
    state_ = State::kWriting;
    // A peer that stops reading must not hold the connection forever.
    stream_.next_layer().expires_after(server_->options().request_timeout);
    bhttp::async_write(stream_, *response_, Bind(&Session::OnWrite));
  }

  void OnWrite(beast::error_code ec, size_t) {
    response_.reset();
    if (ec) return Close();
    if (!keep_alive_) return CloseGracefully();
    WaitForRequest();
  }

  // Half-closes and discards what the peer still sends (the rest of a rejected body)
  // until it closes too, so the final response is not destroyed by a TCP reset. On
  // TLS no close_notify is sent: HTTP/1.1 frames every response, so a client needs
  // none (RFC 9112 section 9.8), and what is drained need not be decrypted.
  void CloseGracefully() {
    state_ = State::kClosing;
    beast::error_code ec;
    stream_.next_layer().socket().shutdown(asio::socket_base::shutdown_send, ec);
    if (ec) return Close();
    buffer_.clear();
    stream_.next_layer().expires_after(std::min(server_->options().request_timeout, kMaxLinger));
    Drain();
  }

  void Drain() {
    stream_.next_layer().async_read_some(buffer_.prepare(kFirstReadBytes),
                                         Bind(&Session::OnDrained));
  }

  void OnDrained(beast::error_code ec, size_t) {
    if (ec) return Close();
    Drain();
  }

  void Close() {
    if (state_ == State::kHandedOver) return;  // stream_ is empty
    state_ = State::kClosed;
    stream_.next_layer().close();
  }

  internal::SessionHost* const server_;
  const uint64_t id_;
  MaybeTlsStream stream_;
  const MaybeTlsStream::executor_type executor_ = stream_.get_executor();
  std::string remote_address_;
  internal::PeerCertificateInfo tls_peer_;  // set by the TLS handshake
  State state_ = State::kIdle;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<bhttp::response<bhttp::string_body>> response_;
  bool keep_alive_ = false;
  // The request being handled (from OnRequest to Respond).
  Request request_;
  unsigned request_version_ = 11;
  bool request_keep_alive_ = false;
  bool request_head_ = false;
  // Set while an upgrade request is handled (from OnRequest to the handover).
  std::optional<BeastRequest> upgrade_request_;
};

}  // namespace

std::shared_ptr<internal::HttpSession> internal::HttpSession::Create(
    SessionHost* host, uint64_t id, Protocol::socket socket,
    std::shared_ptr<SslContext> tls_context) {
  return std::make_shared<Session>(host, id, std::move(socket), std::move(tls_context));
}

}  // namespace hpod::http
