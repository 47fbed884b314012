#pragma once

// The channels of hosts that joined a pool and serve no node yet (spare hosts):
// `GET /agent/v1/host` on the agents' network listener, authenticated by the
// host's client certificate (join_service.h). hpodd keeps only whether each is
// connected — what "a machine id already joined and live" means for a spare
// host — closes it when the host is revoked, and answers its
// renew_certificate frames (PROTOCOL.md) as a node's channel does. Other frames
// are dropped; assigning a spare host to a node is the pool provider's business
// (the next issue).
//
// Thread contract: thread-safe; callbacks run on the server's strands and take
// one mutex, never held across a send.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/http/server.h"
#include "hpod/http/websocket.h"

namespace hpod::controlplane {

class HostChannels {
 public:
  // Answers a renew_certificate of the connection whose certificate is
  // (serial, cn).
  using Renew = std::function<StatusOr<api::agentproto::Certificate>(
      const std::string& serial, const std::string& cn, const std::string& csr)>;
  explicit HostChannels(Renew renew) : renew_(std::move(renew)) {}

  // Takes the upgrade of an authenticated host (its verified certificate's
  // serial and CN); a newer connection replaces an older one of the same host.
  http::WebSocketCallbacks Accept(const std::string& host_id, const std::string& serial,
                                  const std::string& cn, std::shared_ptr<http::WebSocket> socket);
  bool IsConnected(const std::string& host_id) const;
  void Disconnect(const std::string& host_id, const std::string& reason);
  void Shutdown();

 private:
  struct Entry {
    std::shared_ptr<http::WebSocket> socket;
    uint64_t serial = 0;
  };
  const Renew renew_;
  mutable Mutex mu_;
  std::map<std::string, Entry> hosts_ GUARDED_BY(mu_);
  uint64_t next_serial_ GUARDED_BY(mu_) = 0;
};

}  // namespace hpod::controlplane
