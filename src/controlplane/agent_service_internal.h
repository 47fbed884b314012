#pragma once

// AgentService's private state, shared by agent_service.cc (channels, commands)
// and agent_sessions.cc (shell sessions). Not for use outside AgentService.

#include <algorithm>
#include <array>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpod/controlplane/agent_service.h"

namespace hpod::controlplane {

// A refused WebSocket upgrade: plain-text `message` with `status`.
inline http::Response RefuseUpgrade(int status, const std::string& message) {
  http::Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "text/plain"});
  r.body = message;
  return r;
}

struct AgentService::Channel {
  std::shared_ptr<http::WebSocket> socket;
  std::string instance_id;
  std::string cluster_id;
  std::string group_name;
  uint64_t serial = 0;  // distinguishes a reconnect from the connection it replaced
  // Its messages' handlers run here, in the order they came (AgentService::Post).
  std::shared_ptr<Lanes::Lane> lane;
  bool confirm_bootstrap = false;
  // A network agent's verified client certificate (empty over the Unix socket).
  std::string cert_serial;
  std::string cert_cn;
  std::string lifecycle_state;  // last state written to the store
  std::chrono::steady_clock::time_point connected_at;
  double connected_epoch = 0;  // the same moment, on the wall clock
  std::optional<std::chrono::steady_clock::time_point> last_heartbeat;
  // When hpodd last read a frame of any type, or a part of one (AgentLiveness);
  // written under the service's mu_, as last_heartbeat is.
  std::optional<std::chrono::steady_clock::time_point> last_read;
  // The newest heartbeat's host figures (GET /metrics); written under the
  // service's mu_, as last_heartbeat is.
  std::optional<AgentHostFigures> host;
  // This node's entry in the service's health_, set in the same critical
  // section that puts the connection in channels_ (so never null there):
  // health_ is never erased from, so the pointer stays valid, and Snapshot and
  // Health read a node's report through it instead of looking it up. The entry
  // is written and read under the service's mu_.
  const StoredHealth* health = nullptr;
  // The latest heartbeats' clock offsets (ClockOffset), at most kClockSamples,
  // held inline: a scrape reads 10,000 nodes' under the service's lock, and a
  // container's separate heap block was a cache miss each. Written under the
  // service's mu_, as last_heartbeat is.
  struct ClockSamples {
    std::array<double, kClockSamples> values{};
    size_t count = 0;  // values[0, count) hold samples
    size_t next = 0;   // where the next one goes: the oldest, once full
    void Add(double offset) {
      values[next] = offset;
      next = (next + 1) % kClockSamples;
      count = std::min(count + 1, kClockSamples);
    }
    // The largest (none before the first sample).
    std::optional<double> Max() const {
      if (count == 0) return std::nullopt;
      return *std::max_element(values.begin(), values.begin() + count);
    }
  };
  ClockSamples clock_offsets;
  // Its heartbeats' unreadable host figures were answered once (an `error` frame
  // queued); written under the service's mu_, as last_heartbeat is. Decided as
  // the heartbeat is read, not when the refusal runs on the lane: the heartbeats
  // read meanwhile must not each queue one.
  bool bad_host_refused = false;

  // These two are guarded by the service's mu_. A GUARDED_BY here cannot name it
  // (clang would take AgentService::mu_ for a member of this struct, not of the
  // service that owns the channel), so they are private and reached only through
  // accessors that REQUIRE the owning service's mu_: every use is checked.
  nlohmann::json& slurm_state(const AgentService& service) REQUIRES(service.mu_) {
    return slurm_state_;
  }
  std::set<std::string>& refused_types(const AgentService& service) REQUIRES(service.mu_) {
    return refused_types_;
  }
  // SendUnlessRecent's memory: by message type, the hash of the last text sent
  // and when.
  struct Sent {
    size_t hash = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, Sent>& recent_sends(const AgentService& service) REQUIRES(service.mu_) {
    return recent_sends_;
  }

 private:
  nlohmann::json slurm_state_;  // null until reported
  // Message types refused on this connection (an event is recorded for the first).
  std::set<std::string> refused_types_;
  std::map<std::string, Sent> recent_sends_;
};

struct AgentService::Session {
  std::string id;
  std::string token_hash;
  std::string instance_id;
  std::chrono::steady_clock::time_point created;
  std::shared_ptr<http::WebSocket> client;  // set once the user connects
  std::shared_ptr<http::WebSocket> agent;   // set once the agent connects
  // Frames that arrived before the other side connected.
  std::vector<std::string> to_agent, to_client;
  size_t buffered = 0;
  // The agent's side ended before the user connected, leaving frames for the user
  // (a session that could not start says why): the session waits for the user,
  // who gets them and then the close, until the connect timeout sweeps it.
  bool agent_done = false;
};

struct AgentService::PendingCommand {
  std::string instance_id;
  std::promise<CommandResult> result;
  bool done = false;
};

// A QueryTraining waiting for its answer. `done` is guarded by the service's mu_
// (set once, by whoever fulfils the promise first: the answer or the disconnect).
struct AgentService::PendingTraining {
  std::string instance_id;
  uint64_t serial = 0;  // the connection it was sent on
  std::promise<StatusOr<api::agentproto::TrainingResult>> result;
  bool done = false;
};

template <typename T>
std::optional<T> AgentService::Parse(const std::shared_ptr<Channel>& ch,
                                     const nlohmann::json& msg) {
  auto parsed = T::FromJson(msg);
  if (!parsed.ok()) {
    Refuse(ch, std::string(T::kType), std::string(parsed.status().message()));
    return std::nullopt;
  }
  return std::move(*parsed);
}

}  // namespace hpod::controlplane
