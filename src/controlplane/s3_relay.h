#pragma once

// The S3 relay for local nodes. A node's network reaches only its own cluster
// bridge (no default route, by design), so an S3 endpoint on the host's loopback
// or beyond is out of reach for the agent fetching lifecycle scripts. hpodd
// listens on a Unix socket next to the agents' socket and forwards each HTTP
// request, unchanged (Host and SigV4 headers included), to the one configured S3
// endpoint, and the response back. It relays nothing else: there is no general
// egress from nodes.
//
// Thread contract: Start/Shutdown from one thread; requests are served on the
// server's handler threads (one HTTP client per thread).

#include <memory>
#include <string>

#include "hpod/base/status.h"
#include "hpod/http/server.h"

namespace hpod::controlplane {

class S3Relay {
 public:
  // `endpoint` is "http://host:port"; requests arrive on `socket_path`.
  static StatusOr<std::unique_ptr<S3Relay>> Start(const std::string& socket_path,
                                                  const std::string& endpoint);
  void Shutdown();

 private:
  S3Relay() = default;
  std::string endpoint_;
  std::unique_ptr<http::Server> server_;
};

}  // namespace hpod::controlplane
