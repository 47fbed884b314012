#pragma once

// Many client WebSockets on one I/O thread. WebSocketClient gives each
// connection a thread of its own, which is right for an agent (one channel) and
// wrong for the node simulator (tests/support/nodesim), whose thousands of agents
// must cost hpodd, not the simulator, the machine's cores. The framing, masking
// and handshake are Boost.Beast's, as WebSocketClient's are, so hpodd sees exactly
// the frames a real agent sends: ws:// over TCP or a Unix socket, and wss:// (TLS,
// the options' ca_file, tls_server_name and, for mutual TLS, a client certificate
// of each connection's own, as WebSocketClientOptions say) over TCP.
//
// Thread contract: every method is thread-safe. Callbacks and After/Post functions
// run on the swarm's one I/O thread, one at a time, and may call any method.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/http/message.h"
#include "hpod/http/websocket.h"

namespace hpod::http {

class WebSocketSwarm {
 public:
  using Id = uint64_t;
  struct Callbacks {
    // The handshake's outcome; after a failure nothing else is called for the Id
    // (kUnauthenticated/kNotFound/... for a refused upgrade, as
    // WebSocketClient::Connect says).
    std::function<void(Status)> on_open;
    // Each message, in order.
    std::function<void(WebSocketMessage)> on_message;
    // Once, when an opened connection is gone (peer close, error); not after Drop.
    std::function<void(std::string reason)> on_close;
  };

  WebSocketSwarm();
  ~WebSocketSwarm();  // drops every connection and joins the I/O thread
  WebSocketSwarm(const WebSocketSwarm&) = delete;
  WebSocketSwarm& operator=(const WebSocketSwarm&) = delete;

  // Starts connecting `url` ("ws://host:port/path", or through
  // options.unix_socket_path; "wss://" for TLS) with the extra request `headers`;
  // returns at once. A TLS failure reaches on_open as WebSocketClient::Connect
  // reports it (kUnavailable, one line: "TLS handshake with HOST:PORT failed: …";
  // kInvalidArgument for an unreadable CA or certificate file).
  Id Open(const std::string& url, const std::vector<Header>& headers,
          const WebSocketClientOptions& options, Callbacks callbacks);
  // Queues a text message; dropped when the connection is not open. `on_written`,
  // if set, runs on the I/O thread once the message is in the socket (its write
  // completed): when it really left, which a busy I/O thread may make much later
  // than the call (the node simulator times its heartbeats by it).
  void Send(Id id, std::string data, std::function<void()> on_written = {});
  // Closes the socket without a close handshake (the peer sees the connection
  // drop, as when a machine dies); no callback follows. Unknown ids are ignored.
  void Drop(Id id);
  // Runs `fn` on the I/O thread, now or after `delay`.
  void Post(std::function<void()> fn);
  void After(std::chrono::milliseconds delay, std::function<void()> fn);
  // Connections open or opening.
  size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpod::http
