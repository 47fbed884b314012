#include "hpod/train/comm/store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fmt/format.h"

namespace hpod::train::comm {
namespace {

using Clock = std::chrono::steady_clock;

enum Op : uint8_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4, kCheck = 5 };
enum Code : uint8_t { kOk = 0, kTimedOut = 1, kClosed = 2, kAborted = 3 };

// A request may carry this much at most (keys and value together): a store
// message is metadata, and a garbled length must not allocate gigabytes.
constexpr uint32_t kMaxMessageBytes = 64u << 20;
// How long a client waits for a reply beyond what the server may take.
constexpr Millis kReplyGrace{10000};

std::string Seconds(Millis ms) { return fmt::format("{:g} s", ms.count() / 1000.0); }

// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool PollUntil(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the read/write report it
  }
}

// Writes all of `data`; an error string on failure ("" when done).
std::string SendAll(int fd, const char* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    if (!PollUntil(fd, POLLOUT, deadline)) return "timed out sending";
    ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return "";
}

// Reads exactly `n` bytes; "closed" when the peer closed first.
std::string RecvAll(int fd, char* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    if (!PollUntil(fd, POLLIN, deadline)) return "timed out waiting for a reply";
    ssize_t r = recv(fd, data, n, 0);
    if (r == 0) return "closed";
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return "";
}

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void PutBytes(std::string& out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

// Reads one length-prefixed string from a socket.
std::string RecvString(int fd, std::string* s, Clock::time_point deadline) {
  uint32_t len = 0;
  if (auto e = RecvAll(fd, reinterpret_cast<char*>(&len), 4, deadline); !e.empty()) return e;
  if (len > kMaxMessageBytes) return fmt::format("message of {} bytes is too large", len);
  s->resize(len);
  return RecvAll(fd, s->data(), len, deadline);
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "\n") + s;
  return out;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    size_t nl = s.find('\n', start);
    out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

}  // namespace

std::string PrefixedKey(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "/" + key;
}

// --- HashStore ----------------------------------------------------------------

Status HashStore::Set(const std::string& key, const std::string& value) {
  MutexLock l(mu_);
  if (closed_) return UnavailableError("the store is closed");
  values_[key] = value;
  cv_.notify_all();
  return OkStatus();
}

StatusOr<std::string> HashStore::Get(const std::string& key, Millis timeout) {
  std::vector<std::string> missing;
  HPOD_RETURN_IF_ERROR(Wait({key}, timeout, &missing, ""));
  MutexLock l(mu_);
  return values_[key];
}

Status HashStore::Wait(const std::vector<std::string>& keys, Millis timeout,
                       std::vector<std::string>* missing, const std::string& abort_key) {
  MutexLock l(mu_);
  auto aborted = [&]()
                     REQUIRES(mu_) { return !abort_key.empty() && values_.count(abort_key) != 0; };
  auto all_set = [&]() REQUIRES(mu_) {
    return closed_ || aborted() ||
           std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) REQUIRES(mu_) { return values_.count(k) != 0; });
  };
  const bool done = l.WaitFor(cv_, timeout, all_set);
  if (closed_) return UnavailableError("the store is closed");
  if (aborted()) return AbortedError(values_[abort_key]);
  if (done) return OkStatus();
  std::vector<std::string> absent;
  for (const auto& k : keys) {
    if (values_.count(k) == 0) absent.push_back(k);
  }
  if (missing != nullptr) *missing = absent;
  return DeadlineExceededError(
      fmt::format("timed out after {} waiting for {}", Seconds(timeout), Join(absent)));
}

StatusOr<int64_t> HashStore::Add(const std::string& key, int64_t delta) {
  MutexLock l(mu_);
  if (closed_) return UnavailableError("the store is closed");
  int64_t v = 0;
  if (auto it = values_.find(key); it != values_.end())
    v = std::strtoll(it->second.c_str(), nullptr, 10);
  v += delta;
  values_[key] = std::to_string(v);
  cv_.notify_all();
  return v;
}

StatusOr<bool> HashStore::Check(const std::string& key) {
  MutexLock l(mu_);
  if (closed_) return UnavailableError("the store is closed");
  return values_.count(key) != 0;
}

void HashStore::Close() {
  MutexLock l(mu_);
  closed_ = true;
  cv_.notify_all();
}

// --- TcpStoreServer -----------------------------------------------------------

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& address,
                                                                uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return InternalError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return InvalidArgumentError("rendezvous store: not an IPv4 address to listen on: " + address);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1024) != 0) {
    const int err = errno;
    close(fd);
    return UnavailableError(fmt::format(
        "rendezvous store: cannot listen on {}:{}: {}{}", address, port, std::strerror(err),
        err == EADDRINUSE ? " (another run? use --master-port)" : ""));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return InternalError(std::string("eventfd: ") + std::strerror(errno));
  }
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer(fd, wake, ntohs(addr.sin_port)));
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

TcpStoreServer::TcpStoreServer(int listen_fd, int wake_fd, uint16_t port)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}

TcpStoreServer::~TcpStoreServer() {
  const uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;
  if (acceptor_.joinable()) acceptor_.join();
  // Blocked waits wake and reply first ("closed", or what they were waiting
  // for, e.g. an abort just set), then idle readers see EOF.
  store_.Close();
  {
    MutexLock l(mu_);
    stopping_ = true;
    for (int fd : client_fds_) shutdown(fd, SHUT_RD);
  }
  std::vector<std::thread> clients;
  {
    MutexLock l(mu_);
    clients.swap(clients_);
  }
  for (auto& t : clients) t.join();
  close(listen_fd_);
  close(wake_fd_);
}

void TcpStoreServer::AcceptLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    MutexLock l(mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    client_fds_.push_back(fd);
    clients_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TcpStoreServer::Serve(int fd) {
  // A client may sit idle for the whole run (between rendezvous and the
  // next checkpoint), so reads here have no deadline; shutdown() ends them.
  const auto forever = Clock::time_point::max();
  for (;;) {
    uint8_t op = 0;
    uint32_t nkeys = 0;
    if (!RecvAll(fd, reinterpret_cast<char*>(&op), 1, forever).empty()) break;
    if (!RecvAll(fd, reinterpret_cast<char*>(&nkeys), 4, forever).empty()) break;
    if (nkeys > 1u << 20) break;
    std::vector<std::string> keys(nkeys);
    std::string value;
    int64_t arg = 0;
    bool ok = true;
    for (auto& k : keys) ok = ok && RecvString(fd, &k, forever).empty();
    ok = ok && RecvString(fd, &value, forever).empty() &&
         RecvAll(fd, reinterpret_cast<char*>(&arg), 8, forever).empty();
    if (!ok || keys.empty()) break;

    Status st;
    std::string out;
    switch (op) {
      case kSet:
        st = store_.Set(keys[0], value);
        break;
      case kGet: {
        auto v = store_.Get(keys[0], Millis(arg));
        st = v.status();
        if (v.ok()) out = *v;
        break;
      }
      case kWait: {
        std::vector<std::string> missing;
        st = store_.Wait(keys, Millis(arg), &missing, value);
        out = st.code() == StatusCode::kAborted ? st.message() : Join(missing);
        break;
      }
      case kAdd: {
        auto v = store_.Add(keys[0], arg);
        st = v.status();
        if (v.ok()) out = std::to_string(*v);
        break;
      }
      case kCheck: {
        auto v = store_.Check(keys[0]);
        st = v.status();
        if (v.ok()) out = *v ? "1" : "0";
        break;
      }
      default:
        ok = false;
    }
    if (!ok) break;
    const Code code = st.ok()                                      ? kOk
                      : st.code() == StatusCode::kDeadlineExceeded ? kTimedOut
                      : st.code() == StatusCode::kAborted          ? kAborted
                                                                   : kClosed;
    std::string reply(1, static_cast<char>(code));
    PutBytes(reply, out);
    if (!SendAll(fd, reply.data(), reply.size(), Clock::now() + kReplyGrace).empty()) break;
  }
  MutexLock l(mu_);
  client_fds_.erase(std::remove(client_fds_.begin(), client_fds_.end(), fd), client_fds_.end());
  close(fd);
}

// --- TcpStore -----------------------------------------------------------------

StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, uint16_t port,
                                                      Millis timeout, std::string peer) {
  const std::string where = fmt::format("the rendezvous store of {} at {}:{}",
                                        peer.empty() ? "rank 0" : peer, host, port);
  const auto deadline = Clock::now() + timeout;
  std::string last = "no attempt";
  Millis backoff{10};
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    int gai = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (gai != 0) {
      last = gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          freeaddrinfo(res);
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          return std::unique_ptr<TcpStore>(new TcpStore(fd, where));
        }
        last = std::strerror(errno);
        close(fd);
      }
      freeaddrinfo(res);
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Millis(500));
  }
  return DeadlineExceededError(
      fmt::format("cannot reach {} within {}: {}", where, Seconds(timeout), last));
}

TcpStore::TcpStore(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<std::pair<uint8_t, std::string>> TcpStore::Call(uint8_t op,
                                                         const std::vector<std::string>& keys,
                                                         const std::string& value, int64_t arg,
                                                         Millis timeout) {
  std::string req(1, static_cast<char>(op));
  PutU32(req, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) PutBytes(req, k);
  PutBytes(req, value);
  req.append(reinterpret_cast<const char*>(&arg), 8);
  MutexLock l(mu_);
  if (fd_ < 0) return UnavailableError(where_ + " is no longer connected");
  const auto deadline = Clock::now() + timeout + kReplyGrace;
  std::string err = SendAll(fd_, req.data(), req.size(), deadline);
  uint8_t code = 0;
  std::string out;
  if (err.empty()) err = RecvAll(fd_, reinterpret_cast<char*>(&code), 1, deadline);
  if (err.empty()) err = RecvString(fd_, &out, deadline);
  if (!err.empty()) {
    close(fd_);
    fd_ = -1;  // the stream is out of step now: no later request may reuse it
    return UnavailableError(
        fmt::format("{} {}", where_, err == "closed" ? "closed the connection" : "failed: " + err));
  }
  if (code == kClosed) return UnavailableError(where_ + " is shutting down");
  return std::make_pair(code, std::move(out));
}

Status TcpStore::Set(const std::string& key, const std::string& value) {
  return Call(kSet, {key}, value, 0, Millis(0)).status();
}

StatusOr<std::string> TcpStore::Get(const std::string& key, Millis timeout) {
  HPOD_ASSIGN_OR_RETURN(auto r, Call(kGet, {key}, "", timeout.count(), timeout));
  if (r.first == kTimedOut) {
    return DeadlineExceededError(
        fmt::format("timed out after {} waiting for {}", Seconds(timeout), key));
  }
  return std::move(r.second);
}

Status TcpStore::Wait(const std::vector<std::string>& keys, Millis timeout,
                      std::vector<std::string>* missing, const std::string& abort_key) {
  HPOD_ASSIGN_OR_RETURN(auto r, Call(kWait, keys, abort_key, timeout.count(), timeout));
  if (r.first == kAborted) return AbortedError(r.second);
  if (r.first == kTimedOut) {
    if (missing != nullptr) *missing = Split(r.second);
    return DeadlineExceededError(
        fmt::format("timed out after {} waiting for {}", Seconds(timeout), r.second));
  }
  return OkStatus();
}

StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  HPOD_ASSIGN_OR_RETURN(auto r, Call(kAdd, {key}, "", delta, Millis(0)));
  return std::strtoll(r.second.c_str(), nullptr, 10);
}

StatusOr<bool> TcpStore::Check(const std::string& key) {
  HPOD_ASSIGN_OR_RETURN(auto r, Call(kCheck, {key}, "", 0, Millis(0)));
  return r.second.size() == 1 && r.second[0] == '1';
}

}  // namespace hpod::train::comm
