#pragma once

// The agent's end of the control channel (PROTOCOL.md): one WebSocket to hpodd,
// opened with the bootstrap token the first time and the node credential after
// that, kept open with heartbeats, and re-opened with full-jitter backoff whenever
// it drops. Messages the agent sends while disconnected wait in a bounded outbox
// (the oldest are dropped first, and a marker says how many) and go out, in order,
// right after the next `hello`. Heartbeats and whole Slurm tables are the outbox's
// two exceptions to that order (outbox.h).
//
// Thread contract: Send, SendLog, SetHeartbeatInterval, SessionDial and Stop are
// thread-safe; Run is called once, from one thread, and calls the handler from it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hpod/agent/join.h"
#include "hpod/agent/outbox.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/base/backoff.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/http/message.h"
#include "hpod/http/websocket.h"

namespace hpod::agent {

// Where and how to open one WebSocket to hpodd.
struct Dial {
  std::string url;  // "ws://localhost/agent/v1/channel"
  std::vector<http::Header> headers;
  http::WebSocketClientOptions options;
};

// The Dial for `path` on `endpoint` ("unix:///abs.sock" → ws://localhost<path>
// through the socket; "http(s)://host:port" → ws(s)://host:port<path>). An empty
// `authorization` sends no Authorization header (network agents).
StatusOr<Dial> MakeDial(std::string_view endpoint, std::string_view path,
                        std::string_view instance_id, std::string_view authorization,
                        std::chrono::milliseconds connect_timeout);

// The connect timeout (connect, handshake and, on a bootstrap, the credential) of
// an attempt made after `failures` failed ones in a row: base · 2^failures, at most
// 4 × base. An hpodd slow to answer (thousands of agents joining at once) gets longer
// with each retry, instead of every agent giving up at the same 5 s and queueing the
// same request again behind the ones it abandoned.
std::chrono::milliseconds ConnectTimeoutAfter(std::chrono::milliseconds base, int failures);

struct ChannelOptions {
  std::string endpoint;
  std::string instance_id;
  std::string bootstrap_token;  // used only while no credential is on disk
  // Holds node-credential (0600).
  std::string state_dir;
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{10000};
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds heartbeat_interval{2000};
  // Longest wait for a message before the handler's OnIdle runs anyway (sooner
  // when the handler's NextIdle asks for it). Stop() wakes the wait at once.
  std::chrono::milliseconds poll_interval{5000};
  // Bytes of queued messages kept while disconnected.
  size_t outbox_max_bytes = 4 * 1024 * 1024;
  // A network agent (an https:// endpoint; join.h): hpodd's CA and this host's
  // certificate + key. It authenticates by certificate only (no bootstrap token,
  // no credential), and `renewal` (may be null) renews the certificate over the
  // channel.
  std::string tls_ca_file;
  std::string tls_node_pem;
  CertificateRenewal* renewal = nullptr;
};

class Channel;

// What the agent plugs into the channel. All methods run on Run's thread, except
// HeartbeatFields (heartbeat thread); none may call Channel::Run or block for long.
class ChannelHandler {
 public:
  virtual ~ChannelHandler() = default;
  // The `hello` message, sent first on every connection.
  virtual api::agentproto::Hello Hello() = 0;
  // Each heartbeat's fields (lifecycle, uptime_s, slurm); the channel sets seq.
  virtual api::agentproto::Heartbeat HeartbeatFields() = 0;
  // After `hello` went out on a new connection.
  virtual void OnConnected() = 0;
  // Each JSON message from hpodd (except `credential`, handled by the channel).
  virtual void OnMessage(const nlohmann::json& message) = 0;
  // After each message, and when NextIdle's time (or poll_interval) has come.
  virtual void OnIdle() {}
  // How long the channel may wait for a message before OnIdle is due (a timer of
  // the handler, e.g. a config retry); nullopt: no timer pending.
  virtual std::optional<std::chrono::milliseconds> NextIdle() { return std::nullopt; }
};

class Channel {
 public:
  Channel(ChannelOptions options, ChannelHandler* handler);
  ~Channel();  // Stop() and joins
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects and serves until Stop() (returns OK) or until hpodd refuses this node
  // for good: 401/404 for the node credential or the bootstrap token, or no way to
  // authenticate at all — kFailedPrecondition whose message says what to fix (the
  // agent then exits 78).
  Status Run();
  void Stop();

  // Queues a message for hpodd (kept across disconnects, bounded): the ToJson of
  // one of api/agent_protocol.h's structs.
  void Send(const nlohmann::json& message);
  // Queues a message that carries a whole state (the controller's
  // `slurm_nodes`): it replaces an unsent one of its type, and heartbeats may go
  // ahead of it (Outbox::Kind::kLatest).
  void SendLatest(const nlohmann::json& message);
  // A `log` message; `data` longer than 64 KiB is split.
  void SendLog(std::string_view stream, std::string_view data);
  void SetHeartbeatInterval(std::chrono::milliseconds interval);
  // The Dial for a shell session, authenticated with the node credential (or,
  // for a network agent, its certificate).
  StatusOr<Dial> SessionDial(std::string_view session_id) const;

  bool connected() const;
  // Path of the persisted node credential.
  std::string credential_path() const;

 private:
  StatusOr<std::shared_ptr<http::WebSocketClient>> Connect();
  void Enqueue(std::string frame, bool keep_while_disconnected,
               Outbox::Kind kind = Outbox::Kind::kOrdered, std::string type = "");
  void WriterLoop();
  void HeartbeatLoop();
  bool SleepUnlessStopped(std::chrono::milliseconds d);
  // A network agent (tls_node_pem set) authenticates with its certificate.
  bool tls() const { return !options_.tls_node_pem.empty(); }
  void UseCertificate(Dial& dial) const;
  // Handles renewal's `certificate` and its `error`; true when it was one of them.
  bool OnIdentityMessage(const nlohmann::json& message);

  const ChannelOptions options_;
  ChannelHandler* const handler_;
  Backoff reconnect_;  // Run's thread only

  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::string secret_ GUARDED_BY(mu_);                           // empty until known
  std::shared_ptr<http::WebSocketClient> conn_ GUARDED_BY(mu_);  // set after hello
  Outbox outbox_ GUARDED_BY(mu_);
  std::chrono::milliseconds heartbeat_interval_ GUARDED_BY(mu_);
  std::thread writer_;
  std::thread heartbeat_;
};

}  // namespace hpod::agent
