// WebSocketClient: Boost.Beast's websocket::stream over a generic (TCP or Unix)
// socket, with TLS for wss:// (MaybeTlsStream, the server's stream type, so Beast's
// WebSocket is compiled once for both), driven by one I/O thread per client. The
// connect runs on the caller's thread (it drives the io_context itself, up to
// connect_timeout); the I/O thread starts only once the handshake is done.

#include "hpod/http/websocket.h"

#include <sys/un.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "hpod/base/thread_annotations.h"
#include "hpod/http/client.h"
#include "hpod/http/tls_context.h"
#include "hpod/http/tls_stream.h"
#include "hpod/http/websocket_internal.h"

namespace hpod::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;

namespace internal {

std::string HttpUrl(const std::string& url) {
  if (url.starts_with("ws://")) return "http://" + url.substr(5);
  if (url.starts_with("wss://")) return "https://" + url.substr(6);
  return url;
}

// A refused handshake becomes the status the caller acts on (see websocket.h).
Status RefusalStatus(const websocket::response_type& response, const std::string& url) {
  int status = static_cast<int>(response.result_int());
  std::string body = response.body();
  std::string message = !body.empty() ? body
                                      : "WebSocket upgrade to \"" + url + "\" refused with HTTP " +
                                            std::to_string(status);
  switch (status) {
    case 400:
      return InvalidArgumentError(message);
    case 401:
      return UnauthenticatedError(message);
    case 403:
      return PermissionDeniedError(message);
    case 404:
      return NotFoundError(message);
    default:
      return UnavailableError(body.empty()
                                  ? message
                                  : "WebSocket upgrade to \"" + url + "\" refused with HTTP " +
                                        std::to_string(status) + ": " + body);
  }
}

Status HandshakeFailure(const beast::error_code& ec, const websocket::response_type& response,
                        const std::string& url, const std::string& peer, SSL* ssl) {
  // Only a response that is not 101 is a refusal: a failed read leaves `response`
  // at its default (200), which must not read as "refused with HTTP 200".
  if (ec == websocket::error::upgrade_declined) return RefusalStatus(response, url);
  if (ssl != nullptr && IsTlsError(ec)) {
    // TLS 1.3: a server refusing the client's certificate (or its absence) says
    // so with an alert after the client's side of the handshake is done.
    return UnavailableError("TLS connection with " + peer + " failed: " + TlsFailure(ssl, ec));
  }
  return UnavailableError("WebSocket handshake with \"" + url + "\" failed: " + ec.message());
}

}  // namespace internal

namespace {

using internal::HttpUrl;

using Protocol = asio::generic::stream_protocol;
using tcp = asio::ip::tcp;

// RFC 6455 limits a close frame's payload to 125 bytes, two of which are the code.
constexpr size_t kMaxCloseReasonBytes = 123;
// How long Close waits for the peer's side of the close handshake.
constexpr std::chrono::milliseconds kCloseWait{1000};

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Checks the server's subprotocol selection as a browser does (see websocket.h),
// and stores it in `*selected`.
Status CheckSubprotocol(const std::vector<Header>& request_headers,
                        const websocket::response_type& response, const std::string& url,
                        std::string* selected) {
  std::vector<std::string> offered = HeaderList(request_headers, "Sec-WebSocket-Protocol");
  auto it = response.find(beast::http::field::sec_websocket_protocol);
  *selected = it == response.end() ? "" : std::string(it->value());
  if (offered.empty() && selected->empty()) return OkStatus();
  for (const std::string& p : offered) {
    if (p == *selected) return OkStatus();
  }
  return UnavailableError(
      "WebSocket handshake with \"" + url + "\" failed: " +
      (selected->empty()
           ? "the server selected none of the offered subprotocols"
           : "the server selected subprotocol '" + *selected + "', which was not offered"));
}

}  // namespace

// Thread contract: see WebSocketClient. Members marked "I/O thread" are touched by
// the I/O thread only (or by Connect before that thread exists).
struct WebSocketClient::Impl {
  struct PendingWrite {
    std::string data;
    bool binary = false;
    std::shared_ptr<std::promise<Status>> done;
  };

  // TLS when `tls_context` is set.
  Impl(WebSocketClientOptions options_in, std::shared_ptr<internal::SslContext> tls_context)
      : options(std::move(options_in)),
        work(ioc.get_executor()),
        ws(internal::Stream(ioc), std::move(tls_context)) {}

  ~Impl() {
    // Closing the socket completes every outstanding operation; with the work guard
    // gone, run() then returns.
    asio::post(ioc, [this] { Shutdown("the client was destroyed"); });
    work.reset();
    if (thread.joinable()) thread.join();
  }

  Status Connect(const std::string& url, const std::vector<Header>& headers);

  // I/O thread.
  void Read() {
    ws.async_read(buffer, [this](beast::error_code ec, size_t) { OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec) {
      std::string why;
      if (ec == websocket::error::closed) {
        const websocket::close_reason& reason = ws.reason();
        why = close_started ? "the connection was closed" : "the connection was closed by the peer";
        why += " (code " + std::to_string(reason.code);
        if (!reason.reason.empty()) why += ": " + std::string(reason.reason.c_str());
        why += ")";
      } else {
        why = "the connection was lost: " + ec.message();
      }
      return Shutdown(why);
    }
    WebSocketMessage message{beast::buffers_to_string(buffer.data()), ws.got_binary()};
    buffer.consume(buffer.size());
    {
      MutexLock lock(mu);
      inbox.push_back(std::move(message));
    }
    cv.notify_all();
    Read();
  }

  // I/O thread.
  void Pump() {
    if (writing || writes.empty() || io_closed) return;
    writing = true;
    PendingWrite& next = writes.front();
    ws.binary(next.binary);
    ws.async_write(asio::buffer(next.data), [this](beast::error_code ec, size_t) {
      writing = false;
      PendingWrite done = std::move(writes.front());
      writes.pop_front();
      if (ec) {
        done.done->set_value(UnavailableError("WebSocket send failed: " + ec.message()));
        return Shutdown("the connection was lost: " + ec.message());
      }
      done.done->set_value(OkStatus());
      Pump();
    });
  }

  // I/O thread. Ends the connection (idempotent): the socket closes, queued writes
  // fail, and Receive reports `why` once the inbox is drained.
  void Shutdown(const std::string& why) {
    if (io_closed) return;
    io_closed = true;
    beast::error_code ec;
    beast::get_lowest_layer(ws).socket().close(ec);
    // The write in flight (if any) fails through its own completion.
    for (size_t i = writing ? 1 : 0; i < writes.size(); ++i) {
      writes[i].done->set_value(UnavailableError("WebSocket closed: " + why));
    }
    if (writing) {
      writes.resize(1);
    } else {
      writes.clear();
    }
    {
      MutexLock lock(mu);
      closed = true;
      close_message = why;
    }
    cv.notify_all();
  }

  const WebSocketClientOptions options;
  // Declared before the stream, which must be destroyed first.
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  websocket::stream<internal::MaybeTlsStream> ws;  // I/O thread
  beast::flat_buffer buffer;                       // I/O thread
  std::deque<PendingWrite> writes;                 // I/O thread
  bool writing = false;                            // I/O thread
  bool close_started = false;                      // I/O thread
  bool io_closed = false;                          // I/O thread
  std::thread thread;
  std::string subprotocol;  // set by Connect, read-only afterwards

  Mutex mu;
  std::condition_variable cv;
  std::deque<WebSocketMessage> inbox GUARDED_BY(mu);
  bool closed GUARDED_BY(mu) = false;
  std::string close_message GUARDED_BY(mu);
};

Status WebSocketClient::Impl::Connect(const std::string& url, const std::vector<Header>& headers) {
  // ws:// is http:// for the handshake, wss:// is https://.
  HPOD_ASSIGN_OR_RETURN(Url parsed, ParseUrl(HttpUrl(url)));
  internal::MaybeTlsStream& transport = ws.next_layer();
  // "10.0.0.1:8451", "[::1]:8451", "hpodd.example:443": where the TLS messages say
  // the failure was.
  const std::string peer = parsed.host + ":" + std::to_string(parsed.port);
  if (transport.tls()) {
    std::string name = options.tls_server_name.empty() ? parsed.host : options.tls_server_name;
    HPOD_RETURN_IF_ERROR(internal::ConfigureClientTls(transport.ssl_handle(), name));
  }

  std::optional<Protocol::endpoint> endpoint;
  std::string host = parsed.host;
  if (!options.unix_socket_path.empty()) {
    if (options.unix_socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
      return InvalidArgumentError("Unix socket path too long: " + options.unix_socket_path);
    }
    endpoint = asio::local::stream_protocol::endpoint(options.unix_socket_path);
  } else {
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    beast::error_code ec;
    asio::ip::address address =
        asio::ip::make_address(host == "localhost" ? std::string("127.0.0.1") : host, ec);
    if (!ec) endpoint = tcp::endpoint(address, static_cast<uint16_t>(parsed.port));
  }

  // Every step completes through `finish`; the caller's thread runs the io_context
  // until then or until the deadline.
  bool done = false;
  Status result = OkStatus();
  auto finish = [&](Status status) {
    result = std::move(status);
    done = true;
  };
  const std::string unreachable = "Could not connect to the endpoint URL: \"" + url + "\"";
  websocket::response_type response;
  auto& lowest = beast::get_lowest_layer(ws);
  ws.set_option(websocket::stream_base::decorator([&headers](websocket::request_type& request) {
    for (const Header& header : headers) request.set(header.name, header.value);
  }));
  auto handshake = [&] {
    ws.async_handshake(response, parsed.HostHeader(), parsed.target, [&](beast::error_code ec) {
      if (!ec) return finish(CheckSubprotocol(headers, response, url, &subprotocol));
      finish(internal::HandshakeFailure(ec, response, url, peer,
                                        transport.tls() ? transport.ssl_handle() : nullptr));
    });
  };
  auto tls_handshake = [&] {
    transport.AsyncHandshake(
        /*server=*/false, asio::const_buffer(), [&](beast::error_code ec, size_t) {
          if (!ec) return handshake();
          finish(UnavailableError("TLS handshake with " + peer +
                                  " failed: " + internal::TlsFailure(transport.ssl_handle(), ec)));
        });
  };
  auto connect = [&](const Protocol::endpoint& to) {
    lowest.async_connect(to, [&](beast::error_code ec) {
      if (ec) return finish(UnavailableError(unreachable));
      if (transport.tls()) return tls_handshake();
      handshake();
    });
  };
  tcp::resolver resolver(ioc);
  if (endpoint) {
    connect(*endpoint);
  } else {
    // A name: the resolver's own thread does the lookup, bounded by the deadline.
    resolver.async_resolve(host, std::to_string(parsed.port),
                           [&](beast::error_code ec, tcp::resolver::results_type results) {
                             if (ec || results.empty())
                               return finish(UnavailableError(unreachable));
                             connect(results.begin()->endpoint());
                           });
  }
  auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  while (!done && std::chrono::steady_clock::now() < deadline) ioc.run_one_until(deadline);
  if (!done) {
    resolver.cancel();
    beast::error_code ignored;
    lowest.socket().close(ignored);
    while (!done) ioc.run_one();  // the aborted operation completes
    return DeadlineExceededError("Connect timeout on endpoint URL: \"" + url + "\"");
  }
  if (!result.ok()) return result;

  websocket::stream_base::timeout timeout{};
  timeout.handshake_timeout = options.connect_timeout;  // bounds the close handshake
  timeout.idle_timeout = websocket::stream_base::none();
  timeout.keep_alive_pings = false;
  ws.set_option(timeout);
  ws.read_message_max(options.max_message_bytes);
  Read();
  thread = std::thread([this] { ioc.run(); });
  return OkStatus();
}

WebSocketClient::WebSocketClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebSocketClient::~WebSocketClient() = default;

StatusOr<std::unique_ptr<WebSocketClient>> WebSocketClient::Connect(
    const std::string& url, const std::vector<Header>& headers, WebSocketClientOptions options) {
  try {
    std::shared_ptr<internal::SslContext> tls_context;
    if (StartsWith(HttpUrl(url), "https://")) {
      HPOD_ASSIGN_OR_RETURN(
          tls_context, internal::MakeClientTlsContext(options.ca_file, options.client_cert_file,
                                                      options.client_key_file));
    }
    auto impl = std::make_unique<Impl>(std::move(options), std::move(tls_context));
    HPOD_RETURN_IF_ERROR(impl->Connect(url, headers));
    return std::unique_ptr<WebSocketClient>(new WebSocketClient(std::move(impl)));
  } catch (const std::exception& e) {
    // Asio reports resource exhaustion (threads, descriptors, memory) by throwing.
    return InternalError(std::string("cannot open a WebSocket to \"") + url + "\": " + e.what());
  }
}

Status WebSocketClient::Send(std::string_view data, bool binary) {
  Impl& impl = *impl_;
  {
    MutexLock lock(impl.mu);
    if (impl.closed) return UnavailableError("WebSocket closed: " + impl.close_message);
  }
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  asio::post(impl.ioc, [&impl, data = std::string(data), binary, done]() mutable {
    if (impl.io_closed || impl.close_started) {
      done->set_value(UnavailableError("WebSocket closed"));
      return;
    }
    impl.writes.push_back(Impl::PendingWrite{std::move(data), binary, std::move(done)});
    impl.Pump();
  });
  if (result.wait_for(impl.options.send_timeout) != std::future_status::ready) {
    // A write cannot be abandoned on its own: the connection goes.
    asio::post(impl.ioc, [&impl] { impl.Shutdown("a send timed out"); });
    return DeadlineExceededError("WebSocket send timed out after " +
                                 std::to_string(impl.options.send_timeout.count()) + " ms");
  }
  return result.get();
}

StatusOr<WebSocketMessage> WebSocketClient::Receive(std::chrono::milliseconds timeout) {
  Impl& impl = *impl_;
  MutexLock lock(impl.mu);
  lock.WaitFor(impl.cv, timeout,
               [&]() REQUIRES(impl.mu) { return !impl.inbox.empty() || impl.closed; });
  if (!impl.inbox.empty()) {
    WebSocketMessage message = std::move(impl.inbox.front());
    impl.inbox.pop_front();
    return message;
  }
  if (impl.closed) return UnavailableError("WebSocket closed: " + impl.close_message);
  return DeadlineExceededError("no WebSocket message within " + std::to_string(timeout.count()) +
                               " ms");
}

const std::string& WebSocketClient::subprotocol() const { return impl_->subprotocol; }

void WebSocketClient::Close(std::string_view reason) {
  Impl& impl = *impl_;
  {
    MutexLock lock(impl.mu);
    if (impl.closed) return;
  }
  asio::post(impl.ioc, [&impl, reason = std::string(reason.substr(0, kMaxCloseReasonBytes))] {
    if (impl.io_closed || impl.close_started) return;
    impl.close_started = true;
    impl.ws.async_close(websocket::close_reason(websocket::close_code::normal, reason),
                        [&impl](beast::error_code ec) {
                          impl.Shutdown(ec ? "the close handshake failed: " + ec.message()
                                           : "the connection was closed");
                        });
  });
  MutexLock lock(impl.mu);
  auto peer_closed = [&]() REQUIRES(impl.mu) { return impl.closed; };
  if (lock.WaitFor(impl.cv, kCloseWait, peer_closed)) return;
  lock.Unlock();
  // The peer did not answer in time: drop the connection.
  asio::post(impl.ioc, [&impl] { impl.Shutdown("the close handshake timed out"); });
  lock.Lock();
  lock.WaitFor(impl.cv, kCloseWait, peer_closed);
}

}  // namespace hpod::http
