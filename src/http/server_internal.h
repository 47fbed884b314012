#pragma once

// Private to hpod_http (included by server*.cc only; it pulls in Boost, which no
// public header may). What the server core (listener, handler queue, shutdown) in
// server.cc, the HTTP sessions in server_session.cc, the listening sockets in
// server_listen.cc and the WebSocket connections in server_websocket.cc share.
//
// Every connection uses one stream type, MaybeTlsStream (tls_stream.h), over asio's
// generic stream protocol: TCP and Unix-domain listeners, plain and TLS, share all
// of the session code, and Beast is instantiated once, not once per protocol or per
// TLS choice. Only server_session.cc and server_websocket.cc include tls_stream.h.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <sys/types.h>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "hpod/base/thread_annotations.h"
#include "hpod/http/server.h"
#include "hpod/http/tls_context.h"
#include "hpod/http/websocket.h"

namespace hpod::http::internal {

using Protocol = boost::asio::generic::stream_protocol;
class MaybeTlsStream;  // tls_stream.h
using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;

using Acceptor = boost::asio::basic_socket_acceptor<Protocol>;

// "127.0.0.1:53412", "[::1]:80", or "unix" for a Unix-domain peer.
std::string FormatEndpoint(const Protocol::endpoint& endpoint);

// Opens, binds and listens `acceptor` on an IP literal (or "localhost") and port;
// returns the bound port. `backlog`: listen(2)'s. Errors as documented for Server::Start.
StatusOr<uint16_t> ListenTcp(const std::string& address, uint16_t port, int backlog,
                             Acceptor& acceptor);
// Same on a pathname Unix socket: removes a stale socket file first (anything else
// at `path` is an error), sets mode 0660, returns the socket file's inode.
StatusOr<ino_t> ListenUnix(const std::string& path, int backlog, Acceptor& acceptor);
// Removes the socket file at `path` if it is still the one with `inode`.
void RemoveUnixSocket(const std::string& path, ino_t inode);

// One open connection as the server's shutdown sees it.
//
// Thread contract: both methods may be called from any thread (they post to the
// connection's strand).
class Connection {
 public:
  virtual ~Connection() = default;
  // HTTP: idle connections close now, busy ones after their request. WebSocket: the
  // close handshake starts.
  virtual void OnServerStopping() = 0;
  // Closes the socket now.
  virtual void ForceClose() = 0;
};

// The server as its connections see it.
//
// Thread contract: every method is safe from any thread.
class ConnectionRegistry {
 public:
  virtual ~ConnectionRegistry() = default;
  virtual const ServerOptions& options() const = 0;
  virtual bool stopping() const = 0;
  // Counts `connection` as open (open_connections, Shutdown's wait). Returns its id,
  // or nothing once the server is stopping (the caller then closes it).
  virtual std::optional<uint64_t> Register(std::weak_ptr<Connection> connection) = 0;
  virtual void Unregister(uint64_t id) = 0;
};

class HttpSession;

// The server as its HTTP sessions see it (ServerCore in server.cc).
//
// Thread contract: every method is safe from any thread.
class SessionHost : public ConnectionRegistry {
 public:
  // Whether upgrade requests go to an UpgradeHandler (else to the handler).
  virtual bool accepts_upgrades() const = 0;
  // Runs the handler; a throwing handler becomes a 500 InternalFailure.
  virtual Response Invoke(const Request& request) noexcept = 0;
  // Runs the upgrade handler; a throwing one refuses with a 500 InternalFailure.
  virtual UpgradeResult InvokeUpgrade(const Request& request,
                                      std::shared_ptr<WebSocket> socket) noexcept = 0;
  // Queues a session whose request is complete; a handler thread calls its Handle().
  // False once the handler threads are stopping (the session should close).
  virtual bool Enqueue(std::shared_ptr<HttpSession> session) = 0;
};

// One accepted HTTP connection (server_session.cc): reads requests, queues itself on
// the host for each, writes the responses, until the peer leaves, a limit is hit or
// the server stops; an accepted upgrade hands its stream to StartWebSocket.
//
// Thread contract: Start, OnServerStopping and ForceClose may be called from any
// thread (they post to the session's strand); Handle is called by one handler thread
// per queued request.
class HttpSession : public Connection {
 public:
  // A session for an accepted `socket`, registered in `host` under `id`; it
  // unregisters itself when destroyed. `host` must outlive it. With `tls_context`
  // the connection speaks TLS only (the handshake runs first, on the session's
  // strand, under the request timeout).
  static std::shared_ptr<HttpSession> Create(SessionHost* host, uint64_t id,
                                             Protocol::socket socket,
                                             std::shared_ptr<SslContext> tls_context);
  // Starts the TLS handshake, if any, then waits for the first request.
  virtual void Start() = 0;
  // On a handler thread: runs the (upgrade) handler on the queued request and posts
  // the response, or the handover, back to the strand.
  virtual void Handle() = 0;
  // On a handler thread: answers the queued request (an upgrade too) with `response`
  // without running any handler (load shedding, ServerOptions::max_queue_wait).
  virtual void Shed(Response response) = 0;
};

// The 500 answered for a throwing handler or an unusable response (AWS JSON shape).
Response InternalFailure();
// The 503 a shed request gets (AWS JSON shape, Retry-After: 1); `waited_ms` is how
// long it waited in the handler queue.
Response Overloaded(int64_t waited_ms);

// The server side of one WebSocket as the application holds it: the send queue and
// the closed state live here, apart from the Beast stream, so that a handle the
// application keeps after the server is gone touches nothing of the io_context.
//
// Thread contract: the WebSocket methods are thread-safe and never block; the
// connection-side methods are called from the connection's strand.
class ServerWebSocket final : public WebSocket {
 public:
  // What the handle needs from the connection serving it.
  //
  // Thread contract: both methods may be called from any thread and never block.
  class Sink {
   public:
    virtual ~Sink() = default;
    // Something was queued (a message or a close request): post a pump.
    virtual void Wake() = 0;
    // The send queue overflowed: drop the connection.
    virtual void Kill() = 0;
  };

  ServerWebSocket(std::string remote_address, size_t send_queue_bytes)
      : remote_address_(std::move(remote_address)), send_queue_bytes_(send_queue_bytes) {}

  bool Send(std::string data, bool binary) override;
  bool SendShared(std::shared_ptr<const std::string> data, bool binary) override;
  void Close(std::string_view reason) override;
  const std::string& remote_address() const override { return remote_address_; }

  // Connection side. Attach once the handshake is done: queued work is woken then.
  void Attach(std::shared_ptr<Sink> sink);
  // The connection is gone (or never came to be): Send fails from now on and the
  // handle drops its reference to the connection.
  void Detach();

  // A queued message: its bytes may be shared with other connections' queues.
  struct Outgoing {
    std::shared_ptr<const std::string> data;
    bool binary = false;
  };
  enum class Next { kNothing, kMessage, kClose, kKill };
  // The next thing the connection should do: write `*message`, send a close frame
  // with `*close_reason`, or drop the connection (overflow before Attach).
  Next TakeNext(Outgoing* message, std::string* close_reason);
  // A message of `bytes` taken by TakeNext has been written (or failed).
  void Written(size_t bytes);

 private:
  const std::string remote_address_;
  const size_t send_queue_bytes_;

  Mutex mu_;
  std::shared_ptr<Sink> sink_ GUARDED_BY(mu_);  // null before Attach and after Detach
  std::deque<Outgoing> queue_ GUARDED_BY(mu_);
  size_t queued_bytes_ GUARDED_BY(mu_) = 0;  // includes the one being written
  bool closed_ GUARDED_BY(mu_) = false;      // Send refuses
  bool close_requested_ GUARDED_BY(mu_) = false;
  std::string close_reason_ GUARDED_BY(mu_);
  bool killed_ GUARDED_BY(mu_) = false;
  bool detached_ GUARDED_BY(mu_) = false;
  bool wake_pending_ GUARDED_BY(mu_) = false;
};

// Called on the HTTP session's strand once the UpgradeHandler accepted: takes over
// `stream`, answers 101 to `request` and serves the WebSocket until it closes, then
// calls callbacks.on_close (exactly once, also when the handshake fails or the
// server is stopping).
void StartWebSocket(ConnectionRegistry* server, std::shared_ptr<ServerWebSocket> handle,
                    WebSocketCallbacks callbacks, MaybeTlsStream stream, BeastRequest request);

}  // namespace hpod::http::internal
