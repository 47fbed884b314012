#include "hpod/agent/channel.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "hpod/agent/fs_util.h"

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
namespace proto = api::agentproto;

constexpr size_t kMaxLogChunk = 64 * 1024;

// Output of scripts and commands need not be UTF-8; JSON must be.
std::string Serialize(const Json& message) {
  return message.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::chrono::milliseconds ConnectTimeoutAfter(std::chrono::milliseconds base, int failures) {
  return base * (int64_t{1} << std::clamp(failures, 0, 2));
}

StatusOr<Dial> MakeDial(std::string_view endpoint, std::string_view path,
                        std::string_view instance_id, std::string_view authorization,
                        std::chrono::milliseconds connect_timeout) {
  Dial dial;
  dial.options.connect_timeout = connect_timeout;
  if (endpoint.rfind("unix://", 0) == 0) {
    dial.options.unix_socket_path = std::string(endpoint.substr(7));
    if (dial.options.unix_socket_path.empty() || dial.options.unix_socket_path[0] != '/') {
      return InvalidArgumentError("endpoint " + std::string(endpoint) + " needs an absolute path");
    }
    dial.url = "ws://localhost" + std::string(path);
  } else if (endpoint.rfind("http://", 0) == 0 || endpoint.rfind("https://", 0) == 0) {
    std::string base(endpoint);
    while (!base.empty() && base.back() == '/') base.pop_back();
    dial.url = base + std::string(path);
  } else {
    return InvalidArgumentError("unsupported endpoint " + std::string(endpoint));
  }
  dial.headers = {{"X-Hpod-Instance-Id", std::string(instance_id)}};
  if (!authorization.empty()) dial.headers.push_back({"Authorization", std::string(authorization)});
  return dial;
}

Channel::Channel(ChannelOptions options, ChannelHandler* handler)
    : options_(std::move(options)),
      handler_(handler),
      // Full jitter: a thousand agents restarted together must not reconnect together.
      reconnect_(
          {.initial = options_.backoff_initial, .max = options_.backoff_max, .jitter = true}),
      outbox_(options_.outbox_max_bytes),
      heartbeat_interval_(options_.heartbeat_interval) {}

Channel::~Channel() {
  Stop();
  if (writer_.joinable()) writer_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::string Channel::credential_path() const {
  return (std::filesystem::path(options_.state_dir) / "node-credential").string();
}

void Channel::Stop() {
  std::shared_ptr<http::WebSocketClient> conn;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    conn = conn_;
    cv_.notify_all();
  }
  // Ends a Receive in progress, so Run notices the stop without polling.
  if (conn) conn->Close("agent stopping");
}

bool Channel::connected() const {
  MutexLock lock(mu_);
  return conn_ != nullptr;
}

void Channel::SetHeartbeatInterval(std::chrono::milliseconds interval) {
  MutexLock lock(mu_);
  heartbeat_interval_ = std::max(interval, std::chrono::milliseconds(100));
  cv_.notify_all();
}

StatusOr<Dial> Channel::SessionDial(std::string_view session_id) const {
  std::string secret;
  {
    MutexLock lock(mu_);
    secret = secret_;
  }
  if (tls()) {
    HPOD_ASSIGN_OR_RETURN(
        Dial dial, MakeDial(options_.endpoint, "/agent/v1/sessions/" + std::string(session_id),
                            options_.instance_id, "", options_.connect_timeout));
    UseCertificate(dial);
    return dial;
  }
  if (secret.empty()) return FailedPreconditionError("no node credential yet");
  return MakeDial(options_.endpoint, "/agent/v1/sessions/" + std::string(session_id),
                  options_.instance_id, "HpodNode " + secret, options_.connect_timeout);
}

void Channel::UseCertificate(Dial& dial) const {
  dial.options.ca_file = options_.tls_ca_file;
  dial.options.client_cert_file = options_.tls_node_pem;
  dial.options.client_key_file = options_.tls_node_pem;
}

void Channel::Send(const Json& message) { Enqueue(Serialize(message), true); }

void Channel::SendLatest(const Json& message) {
  Enqueue(Serialize(message), true, Outbox::Kind::kLatest, message.value("type", ""));
}

void Channel::SendLog(std::string_view stream, std::string_view data) {
  for (size_t i = 0; i < data.size(); i += kMaxLogChunk) {
    proto::Log frame{std::string(stream), std::string(data.substr(i, kMaxLogChunk))};
    Enqueue(Serialize(frame.ToJson()), true);
  }
}

void Channel::Enqueue(std::string frame, bool keep_while_disconnected, Outbox::Kind kind,
                      std::string type) {
  // No logging in here: the Agent log sink calls this, under spdlog's sink lock.
  MutexLock lock(mu_);
  if (!keep_while_disconnected && conn_ == nullptr) return;
  outbox_.Push(std::move(frame), kind, std::move(type));
  cv_.notify_all();
}

void Channel::WriterLoop() {
  MutexLock lock(mu_);
  while (true) {
    lock.Wait(cv_,
              [&]() REQUIRES(mu_) { return stopping_ || (conn_ != nullptr && !outbox_.empty()); });
    if (stopping_) return;
    std::shared_ptr<http::WebSocketClient> conn = conn_;
    std::string frame;
    bool is_marker = false;
    if (outbox_.dropped() > 0) {
      frame = Serialize(proto::Log{"Agent", "[hpod-agent] " + std::to_string(outbox_.dropped()) +
                                                " earlier messages were dropped while "
                                                "disconnected\n"}
                            .ToJson());
      is_marker = true;
    } else {
      frame = outbox_.Pop();
    }
    lock.Unlock();
    Status sent = conn->Send(frame, /*binary=*/false);
    lock.Lock();
    if (sent.ok()) {
      if (is_marker) outbox_.ClearDropped();
      continue;
    }
    // The connection is gone: keep the frame for the next one (Run notices the loss).
    if (!is_marker) outbox_.PushFront(std::move(frame));
    if (conn_ == conn) conn_ = nullptr;
  }
}

void Channel::HeartbeatLoop() {
  uint64_t seq = 0;
  MutexLock lock(mu_);
  while (!stopping_) {
    auto interval = heartbeat_interval_;
    lock.WaitFor(cv_, interval,
                 [&]() REQUIRES(mu_) { return stopping_ || heartbeat_interval_ != interval; });
    if (stopping_) return;
    if (heartbeat_interval_ != interval || conn_ == nullptr) continue;
    lock.Unlock();
    proto::Heartbeat beat = handler_->HeartbeatFields();
    beat.seq = static_cast<int64_t>(++seq);
    Enqueue(Serialize(beat.ToJson()), /*keep_while_disconnected=*/false, Outbox::Kind::kHeartbeat);
    if (options_.renewal != nullptr) {
      if (auto renew = options_.renewal->Due()) Enqueue(Serialize(renew->ToJson()), false);
    }
    lock.Lock();
  }
}

bool Channel::SleepUnlessStopped(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  return !lock.WaitFor(cv_, d, [&]() REQUIRES(mu_) { return stopping_; });
}

StatusOr<std::shared_ptr<http::WebSocketClient>> Channel::Connect() {
  std::string secret;
  {
    MutexLock lock(mu_);
    secret = secret_;
  }
  const bool bootstrap = secret.empty() && !tls();
  std::string authorization =
      tls() ? "" : (bootstrap ? "HpodBootstrap " + options_.bootstrap_token : "HpodNode " + secret);
  // Run's thread is the only one that touches reconnect_.
  const auto timeout = ConnectTimeoutAfter(options_.connect_timeout, reconnect_.failures());
  HPOD_ASSIGN_OR_RETURN(Dial dial, MakeDial(options_.endpoint, "/agent/v1/channel",
                                            options_.instance_id, authorization, timeout));
  if (tls()) UseCertificate(dial);
  auto client = http::WebSocketClient::Connect(dial.url, dial.headers, dial.options);
  if (!client.ok()) {
    StatusCode code = client.status().code();
    if (code == StatusCode::kUnauthenticated || code == StatusCode::kNotFound) {
      return FailedPreconditionError(
          std::string("hpodd refused this node's ") +
          (tls()       ? "certificate " + options_.tls_node_pem
           : bootstrap ? "bootstrap token"
                       : "credential " + credential_path()) +
          " (" + (code == StatusCode::kNotFound ? "404: the node was deleted" : "401") + ": " +
          Trim(client.status().message()) + "); not retrying");
    }
    return client.status();
  }
  std::shared_ptr<http::WebSocketClient> conn(std::move(*client).release());
  if (bootstrap) {
    // The token is dead once hpodd answered: the credential must reach the disk
    // before anything else happens, or this node could never connect again.
    auto first = conn->Receive(timeout);
    if (!first.ok())
      return UnavailableError("no credential after bootstrap: " + first.status().message());
    auto credential = proto::Credential::FromJson(Json::parse(first->data, nullptr, false));
    if (!credential.ok()) {
      return UnavailableError("first message after bootstrap was not a credential (" +
                              credential.status().message() + ")");
    }
    std::string new_secret = std::move(credential->secret);
    Status persisted = WriteFileAtomic(credential_path(), new_secret, 0600);
    if (!persisted.ok()) {
      return FailedPreconditionError("cannot persist the node credential: " + persisted.message());
    }
    MutexLock lock(mu_);
    secret_ = new_secret;
  }
  HPOD_RETURN_IF_ERROR(conn->Send(Serialize(handler_->Hello().ToJson()), false));
  return conn;
}

bool Channel::OnIdentityMessage(const Json& message) {
  if (options_.renewal == nullptr) return false;
  const std::string type = message.value("type", "");
  if (type == proto::Certificate::kType) {
    auto cert = proto::Certificate::FromJson(message);
    Status s = cert.ok() ? options_.renewal->Accept(*cert) : cert.status();
    if (!s.ok()) spdlog::warn("renewing this host's certificate: {}", s.message());
    return true;
  }
  if (type == proto::Error::kType &&
      message.value("frame_type", "") == proto::RenewCertificate::kType) {
    spdlog::warn("hpodd did not renew this host's certificate: {}",
                 message.value("message", std::string("(no reason)")));
    return true;
  }
  return false;
}

Status Channel::Run() {
  if (tls()) {
    // A network agent: its certificate is its credential (join.h).
  } else if (auto stored = ReadFile(credential_path()); stored.ok() && !Trim(*stored).empty()) {
    MutexLock lock(mu_);
    secret_ = Trim(*stored);
  } else if (options_.bootstrap_token.empty()) {
    return FailedPreconditionError("no node credential at " + credential_path() +
                                   " and no bootstrap_token in the agent config");
  }
  writer_ = std::thread([this] { WriterLoop(); });
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  Status result;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_) break;
    }
    auto conn = Connect();
    if (!conn.ok()) {
      if (conn.status().code() == StatusCode::kFailedPrecondition) {
        spdlog::error("{}", conn.status().message());
        result = conn.status();
        break;
      }
      auto wait = reconnect_.Next();
      spdlog::warn("channel to {} unavailable ({}); retrying in {} ms", options_.endpoint,
                   conn.status().message(), wait.count());
      SleepUnlessStopped(wait);
      continue;
    }
    reconnect_.Reset();
    spdlog::info("channel connected to {}", options_.endpoint);
    {
      MutexLock lock(mu_);
      conn_ = *conn;
      cv_.notify_all();
    }
    handler_->OnConnected();
    while (true) {
      {
        MutexLock lock(mu_);
        if (stopping_) break;
      }
      std::chrono::milliseconds wait = options_.poll_interval;
      if (auto due = handler_->NextIdle()) {
        wait = std::clamp(*due, std::chrono::milliseconds(0), wait);
      }
      auto message = (*conn)->Receive(wait);
      if (!message.ok()) {
        if (message.status().code() == StatusCode::kDeadlineExceeded) {
          handler_->OnIdle();
          continue;
        }
        spdlog::warn("channel lost: {}", message.status().message());
        break;
      }
      if (message->binary) continue;
      Json parsed = Json::parse(message->data, nullptr, false);
      if (!parsed.is_object()) {
        spdlog::warn("ignoring a channel message that is not a JSON object");
        continue;
      }
      if (OnIdentityMessage(parsed)) continue;
      handler_->OnMessage(parsed);
      handler_->OnIdle();
    }
    {
      MutexLock lock(mu_);
      if (conn_ == *conn) conn_ = nullptr;
    }
    bool stopping;
    {
      MutexLock lock(mu_);
      stopping = stopping_;
    }
    if (stopping) {
      // Best effort: what is queued (the last lifecycle report, logs) goes out now.
      std::deque<std::string> rest;
      {
        MutexLock lock(mu_);
        rest = outbox_.TakeAll();
      }
      for (const auto& frame : rest) {
        if (!(*conn)->Send(frame, false).ok()) break;
      }
      (*conn)->Close("agent stopping");
      break;
    }
    // A connection that was up starts over from the shortest (jittered) pause.
    SleepUnlessStopped(reconnect_.Next());
  }
  Stop();
  if (writer_.joinable()) writer_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  return result;
}

}  // namespace hpod::agent
