#pragma once

// The agent's local socket (PROTOCOL.md, "Local socket"): a Unix socket on the node
// through which programs on the node — the auto-resume supervisor inside srun
// (src/slurm/spank/) — ask hpodd about their job. One request line in, one answer
// line out per connection; the agent relays each request over its channel
// (`job_query` / `job_answer`) and never reads what it relays.
//
// It is the only thing the agent listens on, and it is reachable only on the node
// (a path in the node's private /run).
//
// Thread contract: LocalSocketServer is started and stopped from one thread; each
// connection is served on its own thread (at most kMaxClients at once; more are
// answered "busy"). `ask` is called from those threads concurrently.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::agent {

inline constexpr char kLocalSocketPath[] = "/run/hpod-agent/agent.sock";

class LocalSocketServer {
 public:
  // Returns hpodd's answer object (or an error, which the client receives as
  // {"error": message}). `peer_uid`: the client's uid by SO_PEERCRED (the
  // node's systemctl changes units for root only); -1 when unknown.
  using Ask =
      std::function<StatusOr<nlohmann::json>(const nlohmann::json& request, uid_t peer_uid)>;
  static constexpr int kMaxClients = 16;
  static constexpr size_t kMaxRequestBytes = 1 << 20;

  LocalSocketServer(std::string path, Ask ask);
  ~LocalSocketServer();  // Stop()

  // Binds (replacing a stale socket file; the directory is created 0755, the socket
  // made 0666 so any user's srun may ask) and starts accepting.
  Status Start();
  void Stop();

  // One request line → the answer line (without the newline); exposed for tests.
  static std::string Serve(std::string_view line, uid_t peer_uid, const Ask& ask);

 private:
  void AcceptLoop();
  void Reap(bool all);

  const std::string path_;
  const Ask ask_;
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // a pipe: Stop() writes, AcceptLoop's poll wakes
  std::thread acceptor_;
  struct Client {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  Mutex mu_;
  std::list<Client> clients_ GUARDED_BY(mu_);
};

// Pairs `job_query` ids with the `job_answer`s that come back on the channel.
//
// Thread contract: thread-safe.
class PendingQueries {
 public:
  // Sends through `send` and waits up to `timeout` for Deliver() with the id.
  // `send` gets the query's id and sends the `job_query`.
  StatusOr<nlohmann::json> Ask(const std::function<void(const std::string& id)>& send,
                               std::chrono::milliseconds timeout);
  // A `job_answer` arrived; an id no one waits for (any more) is dropped.
  void Deliver(const std::string& id, nlohmann::json answer);

 private:
  struct Waiter;
  Mutex mu_;
  uint64_t next_ GUARDED_BY(mu_) = 1;
  std::list<std::shared_ptr<Waiter>> waiting_ GUARDED_BY(mu_);
};

}  // namespace hpod::agent
