#include "hpod/agent/local_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <optional>

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// A client that sends nothing for this long is dropped (it holds a thread).
constexpr int kReadTimeoutMs = 5000;

std::string ErrorLine(std::string_view message) {
  return Json{{"error", std::string(message)}}.dump();
}

// Reads up to the first newline; false on timeout, EOF before any byte or an
// oversized request.
bool ReadLine(int fd, std::string* line) {
  char buf[4096];
  while (line->size() <= LocalSocketServer::kMaxRequestBytes) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, kReadTimeoutMs);
    if (r <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return !line->empty();  // a client that closed its side after the request
    line->append(buf, static_cast<size_t>(n));
    if (auto nl = line->find('\n'); nl != std::string::npos) {
      line->resize(nl);
      return true;
    }
  }
  return false;
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away: nothing to tell it
    off += static_cast<size_t>(n);
  }
}

}  // namespace

LocalSocketServer::LocalSocketServer(std::string path, Ask ask)
    : path_(std::move(path)), ask_(std::move(ask)) {}

LocalSocketServer::~LocalSocketServer() { Stop(); }

Status LocalSocketServer::Start() {
  sockaddr_un addr{};
  if (path_.size() >= sizeof(addr.sun_path)) {
    return InvalidArgumentError("local socket path too long: " + path_);
  }
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec) return InternalError("creating the directory of " + path_ + ": " + ec.message());
  ::chmod(fs::path(path_).parent_path().c_str(), 0755);
  // A socket file left by an earlier agent process refuses connections: replace it.
  ::unlink(path_.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return InternalError(std::string("socket: ") + ::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::chmod(path_.c_str(), 0666) != 0 || ::listen(listen_fd_, kMaxClients) != 0 ||
      ::pipe2(wake_fd_, O_CLOEXEC) != 0) {
    Status s = InternalError("listening on " + path_ + ": " + ::strerror(errno));
    ::close(listen_fd_);
    listen_fd_ = -1;
    return s;
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
  spdlog::info("local socket: listening on {}", path_);
  return OkStatus();
}

void LocalSocketServer::Stop() {
  if (acceptor_.joinable()) {
    char c = 0;
    (void)!::write(wake_fd_[1], &c, 1);
    acceptor_.join();
  }
  Reap(/*all=*/true);
  for (int* fd : {&listen_fd_, &wake_fd_[0], &wake_fd_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

std::string LocalSocketServer::Serve(std::string_view line, uid_t peer_uid, const Ask& ask) {
  Json request = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object()) return ErrorLine("the request is not a JSON object on one line");
  StatusOr<Json> answer = ask(request, peer_uid);
  if (!answer.ok()) return ErrorLine(answer.status().message());
  if (!answer->is_object()) return ErrorLine("hpodd's answer is not an object");
  // dump() throws on text that is not UTF-8; hpodd's answers are its own JSON,
  // but the replace handler keeps a bad byte from costing the answer.
  return answer->dump(-1, ' ', false, Json::error_handler_t::replace);
}

void LocalSocketServer::AcceptLoop() {
  while (true) {
    struct pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
    int r = ::poll(p, 2, 1000);
    if (r < 0 && errno != EINTR) {
      spdlog::error("local socket: poll: {}", ::strerror(errno));
      return;
    }
    if (p[1].revents != 0) return;
    Reap(/*all=*/false);
    if ((p[0].revents & POLLIN) == 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    MutexLock lock(mu_);
    if (clients_.size() >= kMaxClients) {
      WriteAll(fd, ErrorLine("the hpod agent is busy; ask again") + "\n");
      ::close(fd);
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    clients_.push_back(Client{std::thread([this, fd, done] {
                                std::string line;
                                struct ucred cred {};
                                socklen_t len = sizeof(cred);
                                uid_t peer = static_cast<uid_t>(-1);
                                if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                                  peer = cred.uid;
                                }
                                std::string out = ReadLine(fd, &line)
                                                      ? Serve(line, peer, ask_)
                                                      : ErrorLine("no request line within 5 s");
                                WriteAll(fd, out + "\n");
                                ::close(fd);
                                done->store(true);
                              }),
                              done});
  }
}

void LocalSocketServer::Reap(bool all) {
  std::list<Client> finished;
  {
    MutexLock lock(mu_);
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (all || it->done->load()) {
        finished.splice(finished.end(), clients_, it++);
      } else {
        ++it;
      }
    }
  }
  // Joined outside the lock: a client thread waiting for hpodd holds no lock.
  for (Client& c : finished) c.thread.join();
}

struct PendingQueries::Waiter {
  std::string id;
  std::optional<Json> answer;
  std::condition_variable cv;
};

StatusOr<Json> PendingQueries::Ask(const std::function<void(const std::string&)>& send,
                                   std::chrono::milliseconds timeout) {
  auto w = std::make_shared<Waiter>();
  {
    MutexLock lock(mu_);
    w->id = "q-" + std::to_string(next_++);
    waiting_.push_back(w);
  }
  send(w->id);
  MutexLock lock(mu_);
  bool answered = lock.WaitFor(w->cv, timeout, [&] { return w->answer.has_value(); });
  waiting_.remove(w);
  if (!answered) {
    return DeadlineExceededError("hpodd did not answer within " +
                                 std::to_string(timeout.count() / 1000) + " s");
  }
  return std::move(*w->answer);
}

void PendingQueries::Deliver(const std::string& id, Json answer) {
  MutexLock lock(mu_);
  for (auto& w : waiting_) {
    if (w->id != id) continue;
    w->answer = std::move(answer);
    w->cv.notify_all();
    return;
  }
}

}  // namespace hpod::agent
