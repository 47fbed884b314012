// Many client WebSockets on one io_context (websocket_swarm.h).

#include "hpod/http/websocket_swarm.h"

#include <sys/un.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <deque>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "hpod/http/client.h"
#include "hpod/http/tls_context.h"
#include "hpod/http/tls_stream.h"
#include "hpod/http/websocket_internal.h"

namespace hpod::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using Protocol = asio::generic::stream_protocol;
using internal::MaybeTlsStream;

// What a connection keeps of its read buffer between messages.
constexpr size_t kKeptBufferBytes = 64 * 1024;

}  // namespace

// Every member but `count` and `next_id` is touched on the I/O thread only; the
// public methods post to it.
struct WebSocketSwarm::Impl {
  struct Conn {
    // TLS when `tls` is set (a wss:// URL).
    Conn(asio::io_context& ioc, std::shared_ptr<internal::SslContext> tls)
        : ws(MaybeTlsStream(internal::Stream(ioc), std::move(tls))) {}
    websocket::stream<MaybeTlsStream> ws;
    beast::flat_buffer buffer;
    websocket::response_type response;
    std::deque<std::pair<std::string, std::function<void()>>> outbox;  // message, on_written
    bool open = false;
    bool writing = false;
    bool gone = false;  // dropped or closed: no more callbacks
    Callbacks callbacks;
  };

  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{
      asio::make_work_guard(ioc)};
  std::thread thread;
  std::unordered_map<Id, std::shared_ptr<Conn>> conns;
  std::atomic<Id> next_id{1};
  std::atomic<size_t> count{0};
  // One client context per CA, shared by every wss:// connection that verifies
  // against it, and keyed by the CA file's bytes: simulated nodes each keep hpodd's
  // CA on a disk of their own, and each connection presents its own certificate
  // (internal::UseClientCertificate), so 10,000 agents load one context, not 10,000.
  std::unordered_map<std::string, std::shared_ptr<internal::SslContext>> contexts;

  StatusOr<std::shared_ptr<internal::SslContext>> Context(const std::string& ca_file) {
    std::string key;  // "": the system's CAs
    if (!ca_file.empty()) {
      std::ifstream in(ca_file, std::ios::binary);
      // An unreadable file: the context's own reader says why.
      if (!in) return internal::MakeClientTlsContext(ca_file, "", "");
      key = "pem:" + std::string(std::istreambuf_iterator<char>(in), {});
    }
    auto it = contexts.find(key);
    if (it != contexts.end()) return it->second;
    HPOD_ASSIGN_OR_RETURN(auto context, internal::MakeClientTlsContext(ca_file, "", ""));
    contexts.emplace(std::move(key), context);
    return context;
  }

  void Forget(Id id) {
    if (conns.erase(id) > 0) count--;
  }

  // Ends the connection once (closed, forgotten); true the first time, when the
  // caller then makes its one callback.
  bool End(Id id, const std::shared_ptr<Conn>& c) {
    if (c->gone) return false;
    c->gone = true;
    Forget(id);
    beast::error_code ignored;
    beast::get_lowest_layer(c->ws).socket().close(ignored);
    return true;
  }

  void Fail(Id id, const std::shared_ptr<Conn>& c, Status status) {
    if (End(id, c) && c->callbacks.on_open) c->callbacks.on_open(std::move(status));
  }

  void Closed(Id id, const std::shared_ptr<Conn>& c, std::string reason) {
    if (End(id, c) && c->callbacks.on_close) c->callbacks.on_close(std::move(reason));
  }

  void Start(Id id, std::shared_ptr<Conn> c, std::string url, std::vector<Header> headers,
             WebSocketClientOptions options) {
    auto parsed = ParseUrl(internal::HttpUrl(url));
    if (!parsed.ok()) return Fail(id, c, parsed.status());
    Protocol::endpoint endpoint;
    if (!options.unix_socket_path.empty()) {
      if (options.unix_socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
        return Fail(id, c,
                    InvalidArgumentError("Unix socket path too long: " + options.unix_socket_path));
      }
      endpoint = asio::local::stream_protocol::endpoint(options.unix_socket_path);
    } else {
      beast::error_code ec;
      auto address = asio::ip::make_address(
          parsed->host == "localhost" ? std::string("127.0.0.1") : parsed->host, ec);
      if (ec) return Fail(id, c, InvalidArgumentError("not an IP address: " + parsed->host));
      endpoint = asio::ip::tcp::endpoint(address, static_cast<uint16_t>(parsed->port));
    }
    MaybeTlsStream& transport = c->ws.next_layer();
    if (transport.tls()) {
      std::string name = options.tls_server_name.empty() ? parsed->host : options.tls_server_name;
      Status s = internal::ConfigureClientTls(transport.ssl_handle(), name);
      if (s.ok() && (!options.client_cert_file.empty() || !options.client_key_file.empty())) {
        s = internal::UseClientCertificate(transport.ssl_handle(), options.client_cert_file,
                                           options.client_key_file);
      }
      if (!s.ok()) return Fail(id, c, s);
    }
    c->ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& r) {
      for (const Header& h : headers) r.set(h.name, h.value);
    }));
    c->ws.read_message_max(options.max_message_bytes);
    auto& lowest = beast::get_lowest_layer(c->ws);
    lowest.expires_after(options.connect_timeout);
    Target to{parsed->HostHeader(), parsed->target, url,
              parsed->host + ":" + std::to_string(parsed->port), options.connect_timeout};
    lowest.async_connect(endpoint, [this, id, c, to = std::move(to)](beast::error_code ec) {
      if (c->gone) return;
      if (ec) {
        return Fail(id, c,
                    UnavailableError("Could not connect to the endpoint URL: \"" + to.url + "\""));
      }
      MaybeTlsStream& transport = c->ws.next_layer();
      if (!transport.tls()) return Handshake(id, c, to);
      // The connect timeout still runs: it bounds the TLS handshake too.
      transport.AsyncHandshake(
          /*server=*/false, asio::const_buffer(), [this, id, c, to](beast::error_code ec, size_t) {
            if (c->gone) return;
            if (ec) {
              return Fail(
                  id, c,
                  UnavailableError("TLS handshake with " + to.peer + " failed: " +
                                   internal::TlsFailure(c->ws.next_layer().ssl_handle(), ec)));
            }
            Handshake(id, c, to);
          });
    });
  }

  // Where a connection goes, for its handshakes and their messages.
  struct Target {
    std::string host, target, url;
    std::string peer;  // "127.0.0.1:8451": where a TLS message says it failed
    std::chrono::milliseconds timeout;
  };

  // The WebSocket handshake, on a connected (and, for wss://, TLS) stream.
  void Handshake(Id id, const std::shared_ptr<Conn>& c, const Target& to) {
    // The WebSocket's own timeout bounds the handshake from here on.
    beast::get_lowest_layer(c->ws).expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = to.timeout;
    t.idle_timeout = websocket::stream_base::none();
    t.keep_alive_pings = false;
    c->ws.set_option(t);
    c->ws.async_handshake(c->response, to.host, to.target, [this, id, c, to](beast::error_code ec) {
      if (c->gone) return;
      if (ec) {
        MaybeTlsStream& transport = c->ws.next_layer();
        return Fail(id, c,
                    internal::HandshakeFailure(ec, c->response, to.url, to.peer,
                                               transport.tls() ? transport.ssl_handle() : nullptr));
      }
      c->open = true;
      c->ws.text(true);
      if (c->callbacks.on_open) c->callbacks.on_open(OkStatus());
      if (c->gone) return;  // on_open dropped it
      Read(id, c);
      Write(id, c);
    });
  }

  void Read(Id id, std::shared_ptr<Conn> c) {
    c->ws.async_read(c->buffer, [this, id, c](beast::error_code ec, size_t) {
      if (c->gone) return;
      if (ec) {
        std::string reason =
            ec == websocket::error::closed
                ? "closed by the peer: " +
                      std::string(c->ws.reason().reason.data(), c->ws.reason().reason.size())
                : ec.message();
        return Closed(id, c, std::move(reason));
      }
      WebSocketMessage m{beast::buffers_to_string(c->buffer.data()), c->ws.got_binary()};
      c->buffer.consume(c->buffer.size());
      // One large message (a 1 MB config at 10,000 nodes) must not stay reserved
      // by every connection: 10,000 of them held 10 GB.
      if (c->buffer.capacity() > kKeptBufferBytes) c->buffer.shrink_to_fit();
      if (c->callbacks.on_message) c->callbacks.on_message(std::move(m));
      if (!c->gone) Read(id, c);
    });
  }

  void Write(Id id, std::shared_ptr<Conn> c) {
    if (c->writing || c->outbox.empty() || !c->open || c->gone) return;
    c->writing = true;
    c->ws.async_write(asio::buffer(c->outbox.front().first),
                      [this, id, c](beast::error_code ec, size_t) {
                        c->writing = false;
                        if (c->gone) return;
                        if (ec) return Closed(id, c, "write failed: " + ec.message());
                        std::function<void()> written = std::move(c->outbox.front().second);
                        c->outbox.pop_front();
                        if (written) written();
                        if (!c->gone) Write(id, c);
                      });
  }
};

WebSocketSwarm::WebSocketSwarm() : impl_(std::make_unique<Impl>()) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

WebSocketSwarm::~WebSocketSwarm() {
  asio::post(impl_->ioc, [impl = impl_.get()] {
    for (auto& [id, c] : impl->conns) {
      c->gone = true;
      beast::error_code ignored;
      beast::get_lowest_layer(c->ws).socket().close(ignored);
    }
    impl->conns.clear();
    impl->count = 0;
  });
  impl_->work.reset();
  // Pending timers would keep run() going; stop once the closes above ran.
  asio::post(impl_->ioc, [impl = impl_.get()] { impl->ioc.stop(); });
  if (impl_->thread.joinable()) impl_->thread.join();
}

WebSocketSwarm::Id WebSocketSwarm::Open(const std::string& url, const std::vector<Header>& headers,
                                        const WebSocketClientOptions& options,
                                        Callbacks callbacks) {
  Id id = impl_->next_id++;
  impl_->count++;
  asio::post(impl_->ioc, [impl = impl_.get(), id, url, headers, options,
                          callbacks = std::move(callbacks)]() mutable {
    std::shared_ptr<internal::SslContext> tls;
    Status tls_status = OkStatus();
    if (internal::HttpUrl(url).rfind("https://", 0) == 0) {
      auto context = impl->Context(options.ca_file);
      if (context.ok()) {
        tls = *std::move(context);
      } else {
        tls_status = context.status();
      }
    }
    auto c = std::make_shared<Impl::Conn>(impl->ioc, std::move(tls));
    c->callbacks = std::move(callbacks);
    impl->conns.emplace(id, c);
    if (!tls_status.ok()) return impl->Fail(id, c, tls_status);
    impl->Start(id, c, url, headers, options);
  });
  return id;
}

void WebSocketSwarm::Send(Id id, std::string data, std::function<void()> on_written) {
  asio::post(impl_->ioc, [impl = impl_.get(), id, data = std::move(data),
                          on_written = std::move(on_written)]() mutable {
    auto it = impl->conns.find(id);
    if (it == impl->conns.end()) return;
    it->second->outbox.emplace_back(std::move(data), std::move(on_written));
    impl->Write(id, it->second);
  });
}

void WebSocketSwarm::Drop(Id id) {
  asio::post(impl_->ioc, [impl = impl_.get(), id] {
    auto it = impl->conns.find(id);
    if (it != impl->conns.end()) impl->End(id, it->second);  // no callback after Drop
  });
}

void WebSocketSwarm::Post(std::function<void()> fn) { asio::post(impl_->ioc, std::move(fn)); }

void WebSocketSwarm::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(impl_->ioc, delay);
  timer->async_wait([timer, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

size_t WebSocketSwarm::size() const { return impl_->count; }

}  // namespace hpod::http
