// The rendezvous store of a distributed hpod-train run: a small key-value
// service that ranks use to find each other (gloo's connectFullMesh, NCCL's
// unique id), to agree on a run before any step (rendezvous.h), and to commit
// sharded checkpoints (every rank's part landed). gloo ships no TCP store
// (PyTorch's lives in c10d), so this is ours: rank 0 runs TcpStoreServer, every
// rank (rank 0 included) talks to it through a TcpStore client; tests that run
// ranks as threads share one HashStore.
//
// Every blocking call takes a timeout and fails with DeadlineExceeded naming
// what it waited for; a server that goes away is Unavailable. Values are bytes.
//
// Wire protocol (TCP, little-endian, one request then one response):
//   request  u8 op (1 set, 2 get, 3 wait, 4 add, 5 check), u32 key count,
//            per key u32 length + bytes, u32 value length + bytes,
//            i64 argument (get/wait: timeout in ms; add: delta)
//   response u8 code (0 ok, 1 timed out, 2 closed, 3 aborted), u32 length +
//            bytes (get: the value; wait on timeout: the missing keys,
//            '\n'-joined; wait aborted: the abort key's value; add: the new
//            value as decimal text; check: "1" or "0"). A wait's value field
//            carries its abort key.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::train::comm {

using Millis = std::chrono::milliseconds;

// Thread contract: implementations are safe for concurrent use from any thread.
class Store {
 public:
  virtual ~Store() = default;

  // Sets (or replaces) `key`.
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set.
  // DeadlineExceeded when it was not set in time.
  virtual StatusOr<std::string> Get(const std::string& key, Millis timeout) = 0;
  // Waits until every key is set. DeadlineExceeded after `timeout`, with the
  // keys still missing in `missing` (may be null) so a caller can name them.
  // When `abort_key` is not empty and gets set meanwhile (a rank gave up),
  // Aborted with its value as the message.
  virtual Status Wait(const std::vector<std::string>& keys, Millis timeout,
                      std::vector<std::string>* missing, const std::string& abort_key) = 0;
  // Adds `delta` to the integer at `key` (0 when unset) and returns the sum.
  virtual StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Whether `key` is set, without waiting.
  virtual StatusOr<bool> Check(const std::string& key) = 0;
};

// An in-process store: ranks as threads in tests, and the state behind
// TcpStoreServer.
class HashStore : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key, Millis timeout) override;
  Status Wait(const std::vector<std::string>& keys, Millis timeout,
              std::vector<std::string>* missing, const std::string& abort_key) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  StatusOr<bool> Check(const std::string& key) override;
  // Wakes every waiter with Unavailable, now and later (server shutdown).
  void Close();

 private:
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

// Serves a HashStore over TCP. One thread accepts, one thread per client
// connection serves its requests in order (a blocking get/wait blocks only its
// own client). Thread contract: Start and the destructor from one thread.
class TcpStoreServer {
 public:
  // Listens on `address`:`port` ("0.0.0.0" for every interface; port 0 picks a
  // free one, see port()). SO_REUSEADDR, so a restarted job can take the port
  // its previous attempt just left. Unavailable when the port is taken.
  static StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& address, uint16_t port);
  // Stops accepting, wakes blocked requests (their clients see Unavailable),
  // closes every connection and joins the threads.
  ~TcpStoreServer();
  uint16_t port() const { return port_; }

 private:
  TcpStoreServer(int listen_fd, int wake_fd, uint16_t port);
  void AcceptLoop();
  void Serve(int fd);

  const int listen_fd_;
  const int wake_fd_;
  const uint16_t port_;
  HashStore store_;
  Mutex mu_;
  std::vector<int> client_fds_ GUARDED_BY(mu_);  // open connections
  std::vector<std::thread> clients_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread acceptor_;  // last: starts once the members above exist
};

// A client of TcpStoreServer. Thread contract: safe from any thread; requests
// from several threads are serialized on the one connection (a blocking get
// from one thread delays the others; use a second client for that).
class TcpStore : public Store {
 public:
  // Connects to host:port, retrying (the server may not listen yet) until
  // `timeout`. `peer` names the server in errors ("rank 0 (ip-10-77-1-11)").
  // DeadlineExceeded: "cannot reach the rendezvous store of rank 0 at
  // ip-10-77-1-11:29500 within 60 s: Connection refused".
  static StatusOr<std::unique_ptr<TcpStore>> Connect(const std::string& host, uint16_t port,
                                                     Millis timeout, std::string peer);
  ~TcpStore() override;

  Status Set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key, Millis timeout) override;
  Status Wait(const std::vector<std::string>& keys, Millis timeout,
              std::vector<std::string>* missing, const std::string& abort_key) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  StatusOr<bool> Check(const std::string& key) override;

 private:
  TcpStore(int fd, std::string where);
  // One request/response; `timeout` is how long the server may hold it.
  StatusOr<std::pair<uint8_t, std::string>> Call(uint8_t op, const std::vector<std::string>& keys,
                                                 const std::string& value, int64_t arg,
                                                 Millis timeout);

  Mutex mu_;
  int fd_ GUARDED_BY(mu_);   // -1 once broken
  const std::string where_;  // "the rendezvous store of rank 0 at host:port"
};

// Key under a prefix, so two runs (or two attempts of one job) sharing a store
// never see each other's keys: "<prefix>/<key>".
std::string PrefixedKey(const std::string& prefix, const std::string& key);

}  // namespace hpod::train::comm
