#include "hpod/slurm/spank/agent_client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

namespace hpod::spank {
namespace {

using SteadyClock = std::chrono::steady_clock;

// String fields are read leniently: a missing or non-string field reads as empty, so
// that an agent that leaves out an optional field is not a protocol error.
std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::string Errno(int err) { return std::string(strerror(err)); }

int MillisLeft(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Closes the fd on every path out of Exchange. Not thread-safe (one Exchange's own).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitFor(int fd, short events, SteadyClock::time_point deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return OkStatus();
    if (n == 0) return DeadlineExceededError(what);
    if (errno != EINTR) return UnavailableError("poll: " + Errno(errno));
  }
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kHealthy:
      return "healthy";
    case Verdict::kRecovering:
      return "recovering";
    case Verdict::kRecovered:
      return "recovered";
    case Verdict::kFailed:
      return "failed";
  }
  return "unknown";
}

StatusOr<Verdict> ParseVerdict(std::string_view name) {
  for (Verdict v :
       {Verdict::kHealthy, Verdict::kRecovering, Verdict::kRecovered, Verdict::kFailed}) {
    if (VerdictName(v) == name) return v;
  }
  return InternalError("the agent answered an unknown verdict '" + std::string(name) + "'");
}

std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kHealthy:
      return "healthy";
    case NodeState::kRecovering:
      return "recovering";
    case NodeState::kRecovered:
      return "recovered";
    case NodeState::kFailed:
      return "failed";
    case NodeState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

NodeState ParseNodeState(std::string_view name) {
  for (NodeState s :
       {NodeState::kHealthy, NodeState::kRecovering, NodeState::kRecovered, NodeState::kFailed}) {
    if (NodeStateName(s) == name) return s;
  }
  return NodeState::kUnknown;
}

std::string_view EventKindName(EventKind k) {
  switch (k) {
    case EventKind::kStarted:
      return "started";
    case EventKind::kEnded:
      return "ended";
    case EventKind::kRetrying:
      return "retrying";
    case EventKind::kFinished:
      return "finished";
  }
  return "unknown";
}

nlohmann::json HealthQueryToJson(const HealthQuery& q) {
  return {{"op", "job_health"}, {"job_id", q.job_id}, {"nodes", q.nodes}, {"since", q.since}};
}

nlohmann::json JobEventToJson(const JobEvent& e) {
  nlohmann::json j = {
      {"op", "job_event"},    {"job_id", e.job_id},   {"step_id", e.step_id},
      {"restart", e.restart}, {"attempt", e.attempt}, {"event", EventKindName(e.event)},
      {"time", e.time},       {"nodes", e.nodes},     {"max_attempts", e.max_attempts}};
  if (e.exit_code) j["exit_code"] = *e.exit_code;
  if (!e.message.empty()) j["message"] = e.message;
  if (!e.recovery_ids.empty()) j["recovery_ids"] = e.recovery_ids;
  if (e.goodput) j["goodput"] = *e.goodput;
  if (e.ledger_tail) j["ledger_tail"] = *e.ledger_tail;
  return j;
}

StatusOr<HealthAnswer> HealthAnswerFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InternalError("the agent's answer is not a JSON object");
  if (j.contains("error")) {
    std::string why = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    return UnavailableError("the agent answered: " + why);
  }
  if (!j.contains("verdict") || !j["verdict"].is_string()) {
    return InternalError("the agent's answer has no verdict");
  }
  HealthAnswer a;
  HPOD_ASSIGN_OR_RETURN(a.verdict, ParseVerdict(j["verdict"].get<std::string>()));
  a.message = Str(j, "message");
  auto nodes = j.find("nodes");
  if (nodes != j.end() && nodes->is_array()) {
    for (const auto& n : *nodes) {
      if (!n.is_object()) continue;
      NodeHealth h;
      h.name = Str(n, "name");
      h.state = ParseNodeState(Str(n, "state"));
      h.recovery_id = Str(n, "recovery_id");
      h.action = Str(n, "action");
      h.phase = Str(n, "phase");
      h.status = Str(n, "status");
      a.nodes.push_back(std::move(h));
    }
  }
  return a;
}

StatusOr<nlohmann::json> UnixSocketAgentClient::Exchange(const nlohmann::json& request) {
  const std::string& path = options_.socket_path;
  const auto deadline = SteadyClock::now() + options_.timeout;
  const std::string timeout_msg = "no answer from the agent at " + path + " within " +
                                  std::to_string(options_.timeout.count()) + " ms";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return UnavailableError("bad agent socket path '" + path + "'");
  }
  memcpy(addr.sun_path, path.data(), path.size());

  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return UnavailableError("socket: " + Errno(errno));
  for (;;) {
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EINPROGRESS) {
      HPOD_RETURN_IF_ERROR(WaitFor(fd.get(), POLLOUT, deadline, timeout_msg));
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return UnavailableError("connect " + path + ": " + Errno(err));
      break;
    }
    // A Unix socket's full backlog answers EAGAIN at once: try again until the deadline.
    if (errno == EAGAIN && MillisLeft(deadline) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (errno == EAGAIN) return DeadlineExceededError(timeout_msg);
    return UnavailableError("connect " + path + ": " + Errno(errno));
  }

  // `replace`: a ledger tail with invalid UTF-8 is sent with U+FFFD, not thrown on.
  const std::string line =
      request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::size_t sent = 0;
  while (sent < line.size()) {
    // MSG_NOSIGNAL: an agent that went away must not kill srun with SIGPIPE.
    ssize_t n = send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      HPOD_RETURN_IF_ERROR(WaitFor(fd.get(), POLLOUT, deadline, timeout_msg));
      continue;
    }
    return UnavailableError("write to " + path + ": " + Errno(errno));
  }

  std::string answer;
  for (;;) {
    std::size_t nl = answer.find('\n');
    if (nl != std::string::npos) {
      answer.resize(nl);
      break;
    }
    if (answer.size() > options_.max_answer_bytes) {
      return InternalError("the agent's answer is longer than " +
                           std::to_string(options_.max_answer_bytes) + " bytes");
    }
    HPOD_RETURN_IF_ERROR(WaitFor(fd.get(), POLLIN, deadline, timeout_msg));
    char buf[4096];
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      answer.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0) return UnavailableError("read from " + path + ": " + Errno(errno));
    // EOF: an answer without its newline is still an answer.
    if (answer.empty()) {
      return UnavailableError("the agent at " + path + " closed the connection without an answer");
    }
    break;
  }
  // No exceptions: a malformed answer is a value like any other failure.
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InternalError("the agent at " + path +
                         " answered something that is not a JSON object: " + answer.substr(0, 80));
  }
  return j;
}

StatusOr<HealthAnswer> UnixSocketAgentClient::JobHealth(const HealthQuery& query) {
  HPOD_ASSIGN_OR_RETURN(nlohmann::json j, Exchange(HealthQueryToJson(query)));
  return HealthAnswerFromJson(j);
}

Status UnixSocketAgentClient::Report(const JobEvent& event) {
  HPOD_ASSIGN_OR_RETURN(nlohmann::json j, Exchange(JobEventToJson(event)));
  if (j.contains("error")) {
    std::string why = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    return UnavailableError("the agent answered: " + why);
  }
  auto ok = j.find("ok");
  if (ok == j.end() || !ok->is_boolean() || !ok->get<bool>()) {
    return InternalError("the agent did not answer {\"ok\":true}: " + j.dump().substr(0, 80));
  }
  return OkStatus();
}

}  // namespace hpod::spank
