#pragma once

// The channels of hosts that joined a pool and serve no node yet (spare hosts):
// `GET /agent/v1/host` on the agents' network listener, authenticated by the
// host's client certificate (join_service.h). hpodd keeps only whether each is
// connected — what "a machine id already joined and live" means for a spare
// host — closes it when the host is revoked, and answers its
// renew_certificate frames (PROTOCOL.md) as a node's channel does. The pool
// provider (pool_provider.h) tells a host which instance it serves through
// Send (`assign`) and hears its `host_status` through the HostEvents it set.
// Other frames are dropped.
//
// Thread contract: thread-safe; callbacks run on the server's strands and take
// one mutex, never held across a send.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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

  // What the pool provider hears: each host_status (a host sends one as soon as
  // its channel opens). Called on the server's strands, without the channels'
  // mutex held (a callback may Send).
  struct HostEvents {
    std::function<void(const std::string& host_id, const api::agentproto::HostStatus&)> status;
  };
  // Set once, before the listener starts.
  void SetEvents(HostEvents events) { events_ = std::move(events); }

  // Takes the upgrade of an authenticated host (its verified certificate's
  // serial and CN); a newer connection replaces an older one of the same host.
  http::WebSocketCallbacks Accept(const std::string& host_id, const std::string& serial,
                                  const std::string& cn, std::shared_ptr<http::WebSocket> socket);
  bool IsConnected(const std::string& host_id) const;
  // When the host's channel dropped without the agent saying it was leaving
  // (host_status.leaving), while it has not connected again: the machine lost,
  // or its agent died. nullopt otherwise.
  std::optional<std::chrono::steady_clock::time_point> LostSince(const std::string& host_id) const;
  // Sends one frame to a connected host; false when it is not connected (it gets
  // the level-triggered state again when it connects).
  bool Send(const std::string& host_id, const nlohmann::json& frame);
  void Disconnect(const std::string& host_id, const std::string& reason);
  void Shutdown();

 private:
  struct Entry {
    std::shared_ptr<http::WebSocket> socket;
    uint64_t serial = 0;
    bool leaving = false;  // its agent said it stops on purpose
  };
  const Renew renew_;
  HostEvents events_;
  mutable Mutex mu_;
  std::map<std::string, Entry> hosts_ GUARDED_BY(mu_);
  std::map<std::string, std::chrono::steady_clock::time_point> lost_ GUARDED_BY(mu_);
  uint64_t next_serial_ GUARDED_BY(mu_) = 0;
};

}  // namespace hpod::controlplane
