#include "hpod/http/server.h"

// The server core: the listener's accept loop, the connection registry, the FIFO
// of complete requests and the handler threads that serve it, and Shutdown. Each
// HTTP connection is a session (server_session.cc); sockets are opened in
// server_listen.cc; WebSockets are served in server_websocket.cc.

#include <sys/resource.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>  // std::call_once
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

// Boost 1.74's Asio uses std::exchange without including <utility> (an error under
// g++ 12 with -std=c++20), so <utility> above must precede every Boost header.
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>

#include "hpod/base/thread_annotations.h"
#include "hpod/http/server_internal.h"
#include "hpod/http/websocket.h"

namespace hpod::http {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

using internal::Protocol;

// Back-off after a failed accept (EMFILE and friends), instead of spinning.
constexpr std::chrono::milliseconds kAcceptBackoff{50};

constexpr std::string_view kInternalFailureBody =
    R"({"__type":"InternalFailure","message":"The request processing has failed because of an unknown error, exception or failure."})";

// Plain strings rather than spdlog's format strings: each formatted call instantiates
// fmt's machinery, a noticeable part of this file's build time.
void LogError(const std::string& message) { spdlog::error("http server: " + message); }
void LogWarning(const std::string& message) { spdlog::warn("http server: " + message); }

void RaiseFileLimitOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Each connection is a descriptor and the default soft limit (1024) is far below
    // what a control plane with one connection per node agent needs.
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    rlim_t previous = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      LogWarning("could not raise RLIMIT_NOFILE from " + std::to_string(previous));
    }
  });
}

// Everything the server shares between its I/O threads, its handler threads and its
// callers.
//
// Thread contract: Shutdown/port/open_connections/accepted_connections are safe from
// any thread; the accept path runs on the acceptor's strand; sessions call options(),
// stopping(), Enqueue() and Unregister() from their own strands, and the handler
// threads call Invoke().
//
// Scheduling: the I/O threads never run the handler. A session with a complete
// request queues itself (Enqueue) on one FIFO queue that the handler threads serve,
// and its response is posted back to its strand for writing. Running the handler on
// the I/O threads made a ready connection wait behind the handler work of every
// connection ahead of it in Asio's queue, once per step (accept, each read, the
// write), so under load some connections waited 20x the median; the queue gives
// every request the same wait: the requests ahead of it, once.
//
// WebSocket connections (server_websocket.cc) register here too, so that
// open_connections counts them and Shutdown closes them; they never enter the queue.
class ServerCore final : public internal::SessionHost {
 public:
  ServerCore(ServerOptions options, Handler handler, UpgradeHandler upgrade_handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        upgrade_handler_(std::move(upgrade_handler)),
        acceptor_(asio::make_strand(ioc_)),
        accept_backoff_(acceptor_.get_executor()),
        lag_probe_(acceptor_.get_executor()) {}
  ~ServerCore() override {
    // Destroying the server from its own handler would free the io_context under
    // the running thread.
    HPOD_CHECK(!OnIoThread());
    Shutdown(std::chrono::milliseconds(0));
  }

  // Binds and listens, and queues the first accept. Called once, before StartThreads.
  Status Listen();
  void StartThreads();

  uint16_t port() const { return port_; }
  size_t open_connections() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return sessions_.size();
  }
  uint64_t accepted_connections() const { return accepted_.load(std::memory_order_relaxed); }
  uint64_t shed_requests() const { return shed_.load(std::memory_order_relaxed); }
  std::chrono::milliseconds io_lag() const;

  void Shutdown(std::chrono::milliseconds grace) EXCLUDES(shutdown_mu_, mu_, queue_mu_);
  Status ReloadTls() EXCLUDES(tls_mu_);

  const ServerOptions& options() const override { return options_; }
  bool stopping() const override { return stopping_flag_.load(std::memory_order_acquire); }
  std::optional<uint64_t> Register(std::weak_ptr<internal::Connection> connection) override
      EXCLUDES(mu_);
  void Unregister(uint64_t id) override EXCLUDES(mu_);

  bool accepts_upgrades() const override { return static_cast<bool>(upgrade_handler_); }
  Response Invoke(const Request& request) noexcept override;
  UpgradeResult InvokeUpgrade(const Request& request,
                              std::shared_ptr<WebSocket> socket) noexcept override;
  bool Enqueue(std::shared_ptr<internal::HttpSession> session) override EXCLUDES(queue_mu_);

 private:
  void Accept();
  void OnAccept(beast::error_code ec, Protocol::socket socket) EXCLUDES(mu_);
  // Stops accepting and tells every session to finish its current request and close.
  // Non-blocking and idempotent.
  void BeginStop() EXCLUDES(mu_);
  std::vector<std::shared_ptr<internal::Connection>> LiveSessions() EXCLUDES(mu_);
  bool OnIoThread() const;
  int Backlog() const {
    return options_.listen_backlog > 0
               ? options_.listen_backlog
               : static_cast<int>(asio::socket_base::max_listen_connections);
  }
  void HandlerLoop() EXCLUDES(queue_mu_);
  // Drops the queued requests and joins the handler threads (after each finishes
  // the request it is running).
  void StopHandlers() EXCLUDES(queue_mu_);

  const ServerOptions options_;
  const Handler handler_;
  const UpgradeHandler upgrade_handler_;
  uint16_t port_ = 0;  // written by Listen before any thread runs
  // The Unix socket file this server created (removed by Shutdown if still ours).
  std::optional<ino_t> unix_inode_;

  // The TLS context new connections take a reference to (null: plain). ReloadTls
  // swaps it; a connection keeps the one it was accepted with.
  mutable Mutex tls_mu_;
  std::shared_ptr<internal::SslContext> tls_context_ GUARDED_BY(tls_mu_);

  mutable Mutex mu_;
  std::condition_variable sessions_changed_;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_session_id_ GUARDED_BY(mu_) = 0;
  std::unordered_map<uint64_t, std::weak_ptr<internal::Connection>> sessions_ GUARDED_BY(mu_);
  // Mirrors stopping_ for the sessions' lock-free checks.
  std::atomic<bool> stopping_flag_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> shed_{0};

  // Serializes callers of Shutdown; never taken on an I/O thread.
  Mutex shutdown_mu_;
  bool joined_ GUARDED_BY(shutdown_mu_) = false;

  // Declared after everything a session touches: handlers still queued when the
  // io_context is destroyed hold the last references to their sessions, whose
  // destructors call Unregister.
  asio::io_context ioc_;
  internal::Acceptor acceptor_;        // used on its strand only
  asio::steady_timer accept_backoff_;  // same strand as acceptor_
  bool accept_failing_ = false;        // same strand as acceptor_
  // The I/O threads' lag (Server::IoLag): a timer every kLagProbe on the
  // acceptor's strand, and how late its handler ran. The largest of the current
  // window (kLagWindow probes) and the one before, in ms; the pending probe's
  // expiry (steady clock, ns) tells a probe that has not run yet.
  asio::steady_timer lag_probe_;
  int lag_probes_ = 0;  // same strand as acceptor_
  std::atomic<int64_t> lag_current_ms_{0};
  std::atomic<int64_t> lag_previous_ms_{0};
  std::atomic<int64_t> lag_expiry_ns_{0};
  void ProbeLag();
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;

  // The request queue (see Scheduling above). Bounded by max_connections: a session
  // queues itself only with a complete request and reads nothing more until its
  // response is written.
  struct Queued {
    std::shared_ptr<internal::HttpSession> session;
    std::chrono::steady_clock::time_point since;
  };
  Mutex queue_mu_;
  std::condition_variable queue_ready_;
  std::deque<Queued> queue_ GUARDED_BY(queue_mu_);
  bool handlers_stopping_ GUARDED_BY(queue_mu_) = false;
  std::vector<std::thread> handler_threads_;
};

// Points at the server whose I/O or handler thread this is, so that Shutdown from
// inside a handler does not try to join its own thread.
thread_local const ServerCore* tls_io_server = nullptr;

Status ServerCore::Listen() {
  // Before binding: a listener that cannot speak TLS must not accept anything.
  if (options_.tls.enabled) HPOD_RETURN_IF_ERROR(ReloadTls());
  if (options_.unix_path.empty()) {
    HPOD_ASSIGN_OR_RETURN(
        port_, internal::ListenTcp(options_.address, options_.port, Backlog(), acceptor_));
  } else {
    HPOD_ASSIGN_OR_RETURN(unix_inode_,
                          internal::ListenUnix(options_.unix_path, Backlog(), acceptor_));
  }
  Accept();
  return OkStatus();
}

void ServerCore::StartThreads() {
  int handler_threads = options_.handler_threads > 0 ? options_.handler_threads : options_.threads;
  for (int i = 0; i < std::max(1, handler_threads); ++i) {
    handler_threads_.emplace_back([this] {
      tls_io_server = this;
      HandlerLoop();
    });
  }
  work_.emplace(ioc_.get_executor());
  asio::post(lag_probe_.get_executor(), [this] { ProbeLag(); });
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] {
      tls_io_server = this;
      for (;;) {
        // Handlers catch what they can; anything else (bad_alloc) is logged and the
        // loop resumes rather than taking the process down.
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          LogError(std::string("I/O thread caught: ") + e.what());
        }
      }
    });
  }
}

constexpr std::chrono::milliseconds kLagProbe{250};
constexpr int kLagWindow = 20;  // 5 s a window: Server::IoLag covers the last 5 to 10 s

void ServerCore::ProbeLag() {
  if (stopping_flag_.load(std::memory_order_acquire)) return;
  const auto expiry = std::chrono::steady_clock::now() + kLagProbe;
  lag_expiry_ns_.store(expiry.time_since_epoch().count(), std::memory_order_relaxed);
  lag_probe_.expires_at(expiry);
  lag_probe_.async_wait([this, expiry](beast::error_code ec) {
    if (ec) return;  // cancelled: the server stops
    const int64_t late = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - expiry)
                             .count();
    if (++lag_probes_ == kLagWindow) {
      lag_probes_ = 0;
      lag_previous_ms_.store(lag_current_ms_.exchange(late), std::memory_order_relaxed);
    } else if (late > lag_current_ms_.load(std::memory_order_relaxed)) {
      lag_current_ms_.store(late, std::memory_order_relaxed);
    }
    ProbeLag();
  });
}

std::chrono::milliseconds ServerCore::io_lag() const {
  int64_t lag = std::max(lag_current_ms_.load(std::memory_order_relaxed),
                         lag_previous_ms_.load(std::memory_order_relaxed));
  // A probe overdue now: the I/O threads have not come to it yet.
  const int64_t expiry = lag_expiry_ns_.load(std::memory_order_relaxed);
  if (expiry != 0) {
    const auto overdue = std::chrono::steady_clock::now().time_since_epoch() -
                         std::chrono::steady_clock::duration(expiry);
    lag = std::max<int64_t>(lag,
                            std::chrono::duration_cast<std::chrono::milliseconds>(overdue).count());
  }
  return std::chrono::milliseconds(std::max<int64_t>(lag, 0));
}

void ServerCore::Accept() {
  acceptor_.async_accept(
      asio::make_strand(ioc_),
      [this](beast::error_code ec, Protocol::socket socket) { OnAccept(ec, std::move(socket)); });
}

void ServerCore::OnAccept(beast::error_code ec, Protocol::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Typically EMFILE: retrying at once would spin while nothing changes. Logged
    // once per streak, not on every retry.
    if (!accept_failing_) LogWarning("accept failed: " + ec.message());
    accept_failing_ = true;
    accept_backoff_.expires_after(kAcceptBackoff);
    accept_backoff_.async_wait([this](beast::error_code ec) {
      if (!ec) Accept();
    });
    return;
  }
  accept_failing_ = false;
  accepted_.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<internal::SslContext> tls_context;
  {
    MutexLock lock(tls_mu_);
    tls_context = tls_context_;
  }
  std::shared_ptr<internal::HttpSession> session;
  try {
    MutexLock lock(mu_);
    // Over the limit the connection is closed (by the socket's destructor) at once.
    if (!stopping_ && sessions_.size() < options_.max_connections) {
      uint64_t id = next_session_id_++;
      session = internal::HttpSession::Create(this, id, std::move(socket), std::move(tls_context));
      sessions_.emplace(id, session);
    }
  } catch (const std::exception& e) {
    LogError(std::string("cannot start a session: ") + e.what());
  }
  if (session != nullptr) session->Start();
  Accept();
}

Status ServerCore::ReloadTls() {
  if (!options_.tls.enabled) return FailedPreconditionError("TLS is not enabled on this listener");
  // Read outside the lock: the files may be slow, accepting must not wait for them.
  HPOD_ASSIGN_OR_RETURN(std::shared_ptr<internal::SslContext> context,
                        internal::MakeServerTlsContext(options_.tls));
  {
    MutexLock lock(tls_mu_);
    tls_context_.swap(context);
  }
  return OkStatus();  // the previous context goes with its last connection
}

std::optional<uint64_t> ServerCore::Register(std::weak_ptr<internal::Connection> connection) {
  MutexLock lock(mu_);
  if (stopping_) return std::nullopt;
  uint64_t id = next_session_id_++;
  sessions_.emplace(id, std::move(connection));
  return id;
}

void ServerCore::Unregister(uint64_t id) {
  {
    MutexLock lock(mu_);
    sessions_.erase(id);
  }
  sessions_changed_.notify_all();
}

Response ServerCore::Invoke(const Request& request) noexcept {
  try {
    return handler_(request);
  } catch (const std::exception& e) {
    LogError("handler threw on " + request.method + " " + request.target + ": " + e.what());
  } catch (...) {
    LogError("handler threw a non-exception on " + request.method + " " + request.target);
  }
  return internal::InternalFailure();
}

UpgradeResult ServerCore::InvokeUpgrade(const Request& request,
                                        std::shared_ptr<WebSocket> socket) noexcept {
  try {
    return upgrade_handler_(request, std::move(socket));
  } catch (const std::exception& e) {
    LogError("upgrade handler threw on " + request.target + ": " + e.what());
  } catch (...) {
    LogError("upgrade handler threw a non-exception on " + request.target);
  }
  return internal::InternalFailure();
}

bool ServerCore::Enqueue(std::shared_ptr<internal::HttpSession> session) {
  {
    MutexLock lock(queue_mu_);
    if (handlers_stopping_) return false;
    queue_.push_back({std::move(session), std::chrono::steady_clock::now()});
  }
  queue_ready_.notify_one();
  return true;
}

void ServerCore::HandlerLoop() {
  for (;;) {
    Queued next;
    {
      MutexLock lock(queue_mu_);
      lock.Wait(queue_ready_,
                [this]() REQUIRES(queue_mu_) { return handlers_stopping_ || !queue_.empty(); });
      if (handlers_stopping_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - next.since);
    const bool shed = options_.max_queue_wait.count() > 0 && waited > options_.max_queue_wait;
    // Invoke catches what the handler throws; this is for the post (bad_alloc). The
    // session then has nothing pending and closes when it goes.
    try {
      if (shed) {
        shed_.fetch_add(1, std::memory_order_relaxed);
        next.session->Shed(internal::Overloaded(waited.count()));
      } else {
        next.session->Handle();
      }
    } catch (const std::exception& e) {
      LogError(std::string("handler thread caught: ") + e.what());
    }
  }
}

void ServerCore::StopHandlers() {
  std::deque<Queued> dropped;
  {
    MutexLock lock(queue_mu_);
    handlers_stopping_ = true;
    dropped.swap(queue_);
  }
  queue_ready_.notify_all();
  dropped.clear();  // outside queue_mu_: the last references close the sessions
  for (std::thread& thread : handler_threads_) thread.join();
  handler_threads_.clear();
}

std::vector<std::shared_ptr<internal::Connection>> ServerCore::LiveSessions() {
  std::vector<std::shared_ptr<internal::Connection>> live;
  MutexLock lock(mu_);
  live.reserve(sessions_.size());
  for (auto& [id, weak] : sessions_) {
    if (auto session = weak.lock()) live.push_back(std::move(session));
  }
  return live;
}

bool ServerCore::OnIoThread() const { return tls_io_server == this; }

void ServerCore::BeginStop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    stopping_flag_.store(true, std::memory_order_release);
  }
  // Sessions registered from here on do not exist: OnAccept checks stopping_ under
  // mu_, so this snapshot sees every session that will ever run.
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
    accept_backoff_.cancel();
    lag_probe_.cancel();
  });
  // The snapshot's references may be the last ones; they are dropped outside mu_.
  for (const auto& session : LiveSessions()) session->OnServerStopping();
}

void ServerCore::Shutdown(std::chrono::milliseconds grace) {
  if (OnIoThread()) {
    // From inside a handler this thread cannot join itself (nor wait for its own
    // request); the owner's later Shutdown or the destructor finishes the job.
    BeginStop();
    return;
  }
  MutexLock shutdown_lock(shutdown_mu_);
  if (joined_) return;
  BeginStop();
  // wait_for with milliseconds::max() would overflow the clock arithmetic.
  grace = std::clamp(grace, std::chrono::milliseconds(0),
                     std::chrono::milliseconds(std::chrono::hours(24)));
  {
    MutexLock lock(mu_);
    lock.WaitFor(sessions_changed_, grace, [this]() REQUIRES(mu_) { return sessions_.empty(); });
  }
  for (const auto& session : LiveSessions()) session->ForceClose();
  // Before the I/O threads: a handler still running is waited for, and posts its
  // response while they still run (the write then fails on the closed socket).
  StopHandlers();
  // With the acceptor and every socket closed, run() returns once the aborted
  // operations have completed.
  work_.reset();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  joined_ = true;
  if (unix_inode_) internal::RemoveUnixSocket(options_.unix_path, *unix_inode_);
}

}  // namespace

Response internal::InternalFailure() {
  Response response;
  response.status = 500;
  response.headers.push_back({"Content-Type", "application/x-amz-json-1.1"});
  response.body = std::string(kInternalFailureBody);
  return response;
}

Response internal::Overloaded(int64_t waited_ms) {
  Response response;
  response.status = 503;
  response.headers.push_back({"Content-Type", "application/x-amz-json-1.1"});
  response.headers.push_back({"Retry-After", "1"});
  // Only digits vary: no JSON escaping needed.
  response.body = R"({"__type":"ServiceUnavailable","message":"the server is overloaded: )"
                  R"(this request waited )" +
                  std::to_string(waited_ms) +
                  R"( ms for a handler and was not run; retry with backoff"})";
  return response;
}

struct Server::Impl {
  Impl(ServerOptions options, Handler handler, UpgradeHandler upgrade_handler)
      : core(std::move(options), std::move(handler), std::move(upgrade_handler)) {}
  ServerCore core;
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(std::chrono::milliseconds(0)); }

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Handler handler) {
  return Start(options, std::move(handler), nullptr);
}

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Handler handler,
                                                UpgradeHandler upgrade_handler) {
  RaiseFileLimitOnce();
  if (options.threads < 1) return InvalidArgumentError("ServerOptions.threads must be >= 1");
  if (options.handler_threads < 0) {
    return InvalidArgumentError("ServerOptions.handler_threads must be >= 0");
  }
  try {
    auto impl = std::make_unique<Impl>(options, std::move(handler), std::move(upgrade_handler));
    HPOD_RETURN_IF_ERROR(impl->core.Listen());
    impl->core.StartThreads();
    return std::unique_ptr<Server>(new Server(std::move(impl)));
  } catch (const std::exception& e) {
    // io_context and thread creation report resource exhaustion by throwing.
    return InternalError(std::string("cannot start the HTTP server: ") + e.what());
  }
}

uint16_t Server::port() const { return impl_->core.port(); }

size_t Server::open_connections() const { return impl_->core.open_connections(); }

uint64_t Server::accepted_connections() const { return impl_->core.accepted_connections(); }

uint64_t Server::shed_requests() const { return impl_->core.shed_requests(); }

std::chrono::milliseconds Server::IoLag() const { return impl_->core.io_lag(); }

void Server::Shutdown(std::chrono::milliseconds grace) { impl_->core.Shutdown(grace); }

Status Server::ReloadTls() { return impl_->core.ReloadTls(); }

}  // namespace hpod::http
