#pragma once

// An HTTP/1.1 server for hpodd (Boost.Beast/Asio behind a pimpl, so only server.cc
// includes Boost). It holds thousands of keep-alive connections on a few threads,
// enforces header/body size limits and per-request time limits, and shuts down
// gracefully: Shutdown() stops accepting, lets in-flight requests finish (up to a
// grace period), then closes every connection.
//
// Thread contract: Start/port/Shutdown may be called from any thread; the handler
// is invoked concurrently from the server's handler threads and must be thread-safe.
//
// Scheduling: the I/O threads only read, parse and write. Each complete request goes
// to one FIFO queue served by the handler threads, so requests are handled in the
// order they arrived, whichever connection they came on (a connection has at most
// one request queued or running, so the queue never holds more than
// max_connections entries). Under overload a request that waited too long is
// answered 503 instead of run (ServerOptions::max_queue_wait).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hpod/base/status.h"
#include "hpod/http/message.h"
#include "hpod/http/websocket.h"

namespace hpod::http {

using Handler = std::function<Response(const Request&)>;

// TLS on a listener (issue 25: every non-loopback listener serves TLS only). With
// `enabled`, the listener speaks nothing but TLS: a plain-HTTP request gets a 400
// ("This port speaks HTTPS (TLS) only; use https://") and is closed. TLS 1.2 is the
// minimum, 1.3 is chosen whenever the client speaks it, and the cipher suites are
// OpenSSL's defaults (AEAD with forward secrecy on Debian's OpenSSL 3). The files are
// read by Server::Start and again by Server::ReloadTls, never in between.
struct TlsServerOptions {
  bool enabled = false;
  // PEM: the server's certificate, followed by any intermediates.
  std::string cert_file;
  // PEM: its private key (must match cert_file).
  std::string key_file;
  // PEM CA certificates. When set, the server asks each client for a certificate and
  // verifies one that is sent against these CAs (a client whose certificate does not
  // verify is refused); the verified certificate reaches the handlers
  // (Request::peer_cert_*).
  std::string client_ca_file;
  // Mutual TLS: also refuse a client that sends no certificate. Needs client_ca_file.
  bool require_client_cert = false;
};

struct ServerOptions {
  // Address to listen on. hpodd defaults to loopback: exposing the API is a choice.
  std::string address = "127.0.0.1";
  // 0 picks a free port (see Server::port()).
  uint16_t port = 0;
  // When set, the server listens on this pathname Unix-domain socket instead of
  // `address`/`port` (which are then ignored): a stale socket file there is removed
  // first, the new one gets mode 0660 and is removed again by Shutdown, port() is 0
  // and Request::remote_address is "unix". hpodd's agent listener uses it
  // (`<data_dir>/agent.sock`, reachable from every node namespace because the
  // filesystem is shared).
  std::string unix_path;
  // I/O threads (accept, read, parse, write).
  int threads = 2;
  // Threads that run the handler, taking requests in arrival order; 0 means as many
  // as `threads`.
  int handler_threads = 0;
  // Requests with a larger body get 413; larger headers get 431. Also the largest
  // WebSocket message accepted (a larger one closes the WebSocket).
  size_t body_limit_bytes = 8 * 1024 * 1024;
  size_t header_limit_bytes = 64 * 1024;
  // A request must arrive completely within this time once its first byte is read.
  std::chrono::milliseconds request_timeout{30000};
  // An idle keep-alive connection is closed after this long.
  std::chrono::milliseconds idle_timeout{300000};
  // Connections beyond this are accepted and closed immediately. WebSockets count.
  size_t max_connections = 20000;
  // A WebSocket whose unsent messages would exceed this (a peer that does not read)
  // is closed (WebSocket::Send returns false). A single message into an empty queue
  // is always taken.
  size_t websocket_send_queue_bytes = 8 * 1024 * 1024;
  // TLS for this listener (TCP or Unix); off by default (see TlsServerOptions).
  TlsServerOptions tls;
  // Load shedding: a request (upgrades included) that waited longer than this in the
  // handler queue is answered 503 ServiceUnavailable with `Retry-After: 1` instead of
  // reaching the handler. Its client has most likely given up already (an agent
  // waits 5 s for its channel), and running the handler for it would only make the
  // requests behind it wait too: a join storm of thousands of agents then never
  // drains, every request served after its client left. Shedding costs no handler
  // work, so the queue drains and the requests served are fresh. 0: never shed.
  std::chrono::milliseconds max_queue_wait{0};
  // listen(2)'s backlog: connections the kernel completes before the server accepts
  // them. 0: the system's maximum (SOMAXCONN). A smaller backlog bounds how long a
  // connection can wait unseen before max_queue_wait starts counting: beyond it, a
  // client's connect fails at once (Unix: EAGAIN; TCP: no SYN-ACK, so it retries) and
  // backs off, instead of waiting out its own timeout in a queue nobody drains fast
  // enough.
  int listen_backlog = 0;
};

class Server {
 public:
  // Binds, listens and starts the I/O threads. Fails with kUnavailable when the
  // address cannot be bound (message names the address and the OS error), and with
  // kInvalidArgument when `address` is neither an IP literal nor "localhost" (no
  // name lookup happens here), `threads` < 1 or `handler_threads` < 0. With TLS
  // enabled, also with kInvalidArgument naming the file when a certificate, key or CA
  // file cannot be read or parsed or the key does not match the certificate, and
  // when require_client_cert is set without client_ca_file.
  // Upgrade requests then reach `handler` like any other request.
  static StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options, Handler handler);
  // Also serves WebSockets: an upgrade request (RFC 6455) goes to `upgrade_handler`
  // on the handler threads, in the same FIFO as the requests; see websocket.h.
  // WebSockets are exempt from idle_timeout (they stay open for days; the
  // application's heartbeats detect a dead peer).
  static StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options, Handler handler,
                                                 UpgradeHandler upgrade_handler);

  // Shutdown(0) if not done yet. Must not run inside the handler (or on an I/O thread).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port (useful with port 0); 0 for a Unix-socket listener.
  uint16_t port() const;
  // Number of open connections (for metrics and tests).
  size_t open_connections() const;
  // Connections accepted since Start, including those closed at once because of
  // max_connections (for metrics, and for tests that check keep-alive reuse).
  uint64_t accepted_connections() const;
  // Requests answered 503 by load shedding (ServerOptions::max_queue_wait) since Start.
  uint64_t shed_requests() const;
  // How late the I/O threads run what is ready to run, over the last 5 to 10 s
  // (a probe timer every 250 ms, and how late its handler ran; a probe overdue
  // now counts as late as it is). A peer whose bytes wait this long for a read
  // is not silent: the server is behind. Thread-safe.
  std::chrono::milliseconds IoLag() const;

  // Re-reads options.tls's cert_file, key_file and client_ca_file (certificate
  // rotation, a new agents' CA) for connections accepted from now on; connections
  // already open keep what they negotiated. On an error (as for Start) the previous
  // files stay in use. kFailedPrecondition when TLS is not enabled. Thread-safe.
  Status ReloadTls();

  // Stops accepting, waits up to `grace` for in-flight requests (queued ones
  // included), closes all connections and joins the I/O and handler threads.
  // Open WebSockets get a close handshake at once (not a wait for the grace period);
  // each WebSocket's on_close has run when Shutdown returns.
  // Idempotent. Called from inside the handler it only starts the shutdown (stops
  // accepting, closes idle connections) and returns; a later Shutdown or the
  // destructor, from another thread, waits and joins.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpod::http
