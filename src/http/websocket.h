#pragma once

// WebSockets (RFC 6455) for hpod: the server side plugs into http::Server (an
// upgrade request is authorised by an UpgradeHandler run on the handler pool, then
// the connection becomes a WebSocket served by the I/O threads), and a client used
// by the agent (its control channel and shell sessions) and the CLI
// (`hpod start-session`). Boost stays inside websocket.cc / server.cc.
//
// Both ends answer pings, send no unsolicited pings (hpod's own heartbeats keep
// connections alive) and limit one message to `max_message_bytes`.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/http/message.h"

namespace hpod::http {

struct WebSocketMessage {
  std::string data;
  bool binary = false;
};

// The server's view of one accepted WebSocket connection.
//
// Thread contract: Send and Close are thread-safe and never block (they queue onto
// the connection's strand); they may be called from inside the callbacks.
class WebSocket {
 public:
  virtual ~WebSocket() = default;
  // Queues a message. Returns false when the connection is closed or closing. When
  // more than ServerOptions::websocket_send_queue_bytes are queued and unsent (a
  // peer that does not read), the connection is closed instead.
  virtual bool Send(std::string data, bool binary) = 0;
  // Send without a copy: `data` is shared with whoever else sends it (hpodd sends
  // one config, a megabyte at 10,000 nodes, to every node of a group) and is kept
  // until written. The default copies it (for other implementations).
  virtual bool SendShared(std::shared_ptr<const std::string> data, bool binary) {
    return Send(*data, binary);
  }
  // Starts a close handshake with status 1000 and `reason` (≤ 123 bytes); idempotent.
  virtual void Close(std::string_view reason) = 0;
  // "127.0.0.1:53412" or "unix" (for Unix-socket listeners).
  virtual const std::string& remote_address() const = 0;
};

// What an UpgradeHandler returns to accept a WebSocket.
struct WebSocketCallbacks {
  // Called once per received message, in order, on the connection's strand (one
  // call at a time per connection). Must not block for long: hand heavy work to
  // another thread.
  std::function<void(WebSocketMessage message)> on_message;
  // Called, if set, on the connection's strand each time part of a message is
  // read and the rest is still to come (a message larger than one read: many
  // calls for a megabyte). The peer is sending; a busy server may take seconds
  // to read a large message, and this tells it so before on_message.
  std::function<void()> on_progress;
  // Called exactly once when the connection is gone (peer close, error, timeout,
  // server shutdown), after the last on_message.
  std::function<void()> on_close;
  // Extra headers for the 101 response.
  std::vector<Header> response_headers;
  // The subprotocol the server selects, sent as the 101 response's
  // Sec-WebSocket-Protocol; empty: none. It must be one the client offered
  // (HeaderList(request.headers, "Sec-WebSocket-Protocol")): a client fails a
  // handshake that selects anything else (RFC 6455 section 4.1), so the server
  // answers such an acceptance with a 500 instead. Browsers also fail a handshake
  // whose offer got no selection, so a handler accepting an offer selects one.
  std::string subprotocol;
};

// Decides on a WebSocket upgrade request. Return a Response to refuse (its status
// must not be 101; it is sent as a normal HTTP response), or callbacks to accept.
// `socket` is the connection that will exist if accepted: the handler may keep it
// (to Send later); it delivers nothing before the handler returns. Runs on the
// handler pool, so it may block briefly (store reads).
using UpgradeResult = std::variant<Response, WebSocketCallbacks>;
using UpgradeHandler =
    std::function<UpgradeResult(const Request& request, std::shared_ptr<WebSocket> socket)>;

// The strings' `{}`: see ClientOptions.
struct WebSocketClientOptions {
  std::chrono::milliseconds connect_timeout{5000};  // TCP/Unix connect + handshake
  // How long Send waits for its message to be written; past it the connection is
  // dropped (a peer that stopped reading) and Send returns kDeadlineExceeded.
  std::chrono::milliseconds send_timeout{30000};
  size_t max_message_bytes = 16 * 1024 * 1024;
  // Connect through this Unix-domain socket instead of TCP; the URL's host is then
  // only used for the Host header (and, with TLS, as the name to verify).
  std::string unix_socket_path{};
  // TLS (wss:// and https:// URLs; ignored for ws:// and http://). The server's
  // certificate is verified against `ca_file` (PEM CA certificates; empty: the
  // system's default CA paths) and must name `tls_server_name`, by default the URL's
  // host: an IP literal is matched against the certificate's IP SANs, a DNS name
  // against its DNS SANs (and sent as SNI). TLS 1.2 minimum.
  std::string ca_file{};
  std::string tls_server_name{};
  // Mutual TLS: the client's certificate and key (PEM), both or neither.
  std::string client_cert_file{};
  std::string client_key_file{};
};

// A client WebSocket connection with its own I/O thread.
//
// Thread contract: Send and Close are thread-safe; Receive must be called from one
// thread at a time. Send may run concurrently with Receive.
class WebSocketClient {
 public:
  // Connects to `url` ("ws://host:port/path?q" or "http://…", same thing; TLS with
  // "wss://…" or "https://…") with the extra request `headers` (e.g. Authorization).
  // Fails with kUnavailable when the endpoint cannot be reached or the TLS handshake
  // fails (one line saying why: "TLS handshake with 10.0.0.1:8451 failed: certificate
  // verify failed (self-signed certificate in certificate chain)"), with
  // kInvalidArgument when a TLS file cannot be read, kDeadlineExceeded on timeout
  // (the TLS handshake included), and with
  // kUnauthenticated / kPermissionDenied / kNotFound / kInvalidArgument when the
  // server refuses the upgrade with 401/403/404/400 (message = response body).
  // Subprotocols offered in a Sec-WebSocket-Protocol header are checked as a
  // browser checks them: the handshake fails (kUnavailable) unless the server
  // selects exactly one of them, and also when it selects one that was not offered.
  static StatusOr<std::unique_ptr<WebSocketClient>> Connect(const std::string& url,
                                                            const std::vector<Header>& headers,
                                                            WebSocketClientOptions options = {});
  ~WebSocketClient();  // closes (without waiting for the peer) and joins
  WebSocketClient(const WebSocketClient&) = delete;
  WebSocketClient& operator=(const WebSocketClient&) = delete;

  // Sends one message and waits until it is written to the socket; kUnavailable when
  // the connection is gone, kDeadlineExceeded (and the connection is dropped) when
  // the write takes longer than send_timeout.
  Status Send(std::string_view data, bool binary);
  // Waits up to `timeout` for the next message: kDeadlineExceeded when none came,
  // kUnavailable when the connection closed (message says how: peer close reason or
  // error). Messages received before the close are delivered first.
  StatusOr<WebSocketMessage> Receive(std::chrono::milliseconds timeout);
  // Close handshake (status 1000), waits up to 1 s for it; idempotent.
  void Close(std::string_view reason = "");
  // The subprotocol the server selected in its 101 response; empty when none.
  const std::string& subprotocol() const;

 private:
  struct Impl;
  explicit WebSocketClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpod::http
