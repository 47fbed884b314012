// AgentService: shell sessions (hpod start-session). The user's WebSocket (API
// listener) and the agent's (agent listener) are paired by session id and hpodd
// relays frames between them verbatim; see src/agent/PROTOCOL.md "Session frames".

#include <spdlog/spdlog.h>

#include "hpod/base/crypto.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/agent_service_internal.h"

namespace hpod::controlplane {

namespace {

constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

std::string ErrorFrame(const std::string& text) { return std::string(1, '\x03') + text; }

// The session relay's subprotocols for browsers (src/agent/PROTOCOL.md, "Session frames").
constexpr std::string_view kSessionSubprotocol = "hpod-session";
constexpr std::string_view kTokenSubprotocolPrefix = "hpod-token.";

}  // namespace

StatusOr<SessionGrant> AgentService::StartSession(const std::string& instance_id,
                                                  const std::string& command,
                                                  const std::string& user, bool unprivileged,
                                                  int rows, int cols) {
  SweepSessions();
  auto s = std::make_shared<Session>();
  s->id = "s-" + RandomString(17, "0123456789abcdef");
  SessionGrant grant{s->id, RandomString(43, kAlnum)};
  s->token_hash = HexEncode(Sha256(grant.token));
  s->instance_id = instance_id;
  s->created = clock_.SteadyNow();
  std::shared_ptr<Channel> ch;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) {
      return FailedPreconditionError("The agent of node " + instance_id +
                                     " is not connected to hpodd, so no session can be opened");
    }
    ch = it->second;
    sessions_[s->id] = s;
  }
  api::agentproto::OpenSession m;
  m.session_id = s->id;
  if (!command.empty()) m.argv = {"bash", "-lc", command};
  m.rows = rows;
  m.cols = cols;
  m.pty = command.empty();
  m.user = user;
  m.unprivileged = unprivileged;
  if (!ch->socket->Send(m.ToJson().dump(), false)) {
    EndSession(s->id);
    return UnavailableError("the agent of node " + instance_id + " disconnected; try again");
  }
  spdlog::info("session {} requested on {}", s->id, instance_id);
  return grant;
}

http::UpgradeResult AgentService::HandleClientSessionUpgrade(
    const http::Request& request, std::shared_ptr<http::WebSocket> socket) {
  std::string path(request.Path());
  const std::string kPrefix = "/v1/sessions/";
  if (path.rfind(kPrefix, 0) != 0) return RefuseUpgrade(404, "no such endpoint");
  std::string id = path.substr(kPrefix.size());
  std::string_view auth = request.HeaderValue("Authorization");
  const std::string_view kScheme = "HpodSession ";
  std::string token =
      auth.substr(0, kScheme.size()) == kScheme ? std::string(auth.substr(kScheme.size())) : "";
  // A browser cannot set Authorization on a WebSocket; it offers the token as a
  // subprotocol instead ("hpod-session, hpod-token.<token>"; tokens are
  // alphanumeric, so valid there), and must then see hpod-session selected.
  bool offers_session = false;
  std::string offered_token;
  for (const std::string& p : http::HeaderList(request.headers, "Sec-WebSocket-Protocol")) {
    if (p == kSessionSubprotocol) offers_session = true;
    if (p.rfind(kTokenSubprotocolPrefix, 0) == 0) {
      offered_token = p.substr(kTokenSubprotocolPrefix.size());
    }
  }
  if (token.empty() && offers_session) token = offered_token;
  std::shared_ptr<Session> s;
  std::vector<std::string> pending;
  bool agent_done = false;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end())
      return RefuseUpgrade(404, "session " + id + " does not exist or expired");
    s = it->second;
    // One-time token: a second connection with it is refused.
    if (token.empty() || s->client != nullptr ||
        !ConstantTimeEquals(HexEncode(Sha256(token)), s->token_hash)) {
      return RefuseUpgrade(401, "invalid token for session " + id);
    }
    s->client = socket;
    pending.swap(s->to_client);
    agent_done = s->agent_done;
    // Queued before the handshake completes; delivered first. Under the lock:
    // once `client` is set the agent side may close it (its on_close), and a
    // frame queued after that close would be dropped (the error that says why a
    // session ended at once).
    for (auto& frame : pending) socket->Send(std::move(frame), true);
  }
  if (agent_done) {
    socket->Close("session ended");
    EndSession(id);
  }
  http::WebSocketCallbacks callbacks = RelayCallbacks(s, /*from_client=*/true);
  if (offers_session) callbacks.subprotocol = std::string(kSessionSubprotocol);
  return callbacks;
}

http::UpgradeResult AgentService::AgentSessionUpgrade(const std::string& session_id,
                                                      const std::string& instance_id,
                                                      std::shared_ptr<http::WebSocket> socket) {
  std::shared_ptr<Session> s;
  std::vector<std::string> pending;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end() || it->second->instance_id != instance_id || it->second->agent) {
      return RefuseUpgrade(404, "no session " + session_id + " for " + instance_id);
    }
    s = it->second;
    s->agent = socket;
    pending.swap(s->to_agent);
    // Under the lock, as for the client: never after the other side's close.
    for (auto& frame : pending) socket->Send(std::move(frame), true);
  }
  return RelayCallbacks(s, /*from_client=*/false);
}

http::WebSocketCallbacks AgentService::RelayCallbacks(const std::shared_ptr<Session>& s,
                                                      bool from_client) {
  // Frames go to the other side, or wait in a bounded buffer until it connects.
  auto peer_of = [s, from_client] { return from_client ? s->agent : s->client; };
  http::WebSocketCallbacks cb;
  cb.on_message = [this, s, from_client, peer_of](http::WebSocketMessage m) {
    std::shared_ptr<http::WebSocket> peer;
    {
      MutexLock lock(mu_);
      peer = peer_of();
      if (!peer) {
        if (s->buffered + m.data.size() > options_.session_buffer_bytes) return;
        s->buffered += m.data.size();
        (from_client ? s->to_agent : s->to_client).push_back(std::move(m.data));
        return;
      }
    }
    peer->Send(std::move(m.data), true);
  };
  cb.on_close = [this, s, from_client, peer_of] {
    std::shared_ptr<http::WebSocket> peer;
    {
      MutexLock lock(mu_);
      peer = peer_of();
      if (!from_client && !peer && !s->to_client.empty()) {
        s->agent_done = true;  // kept for the user (Session::agent_done)
        return;
      }
    }
    // Frames already queued to the peer (the exit status) go out before the close.
    if (peer) peer->Close(from_client ? "client left" : "session ended");
    EndSession(s->id);
  };
  return cb;
}

void AgentService::EndSession(const std::string& session_id) {
  MutexLock lock(mu_);
  if (sessions_.erase(session_id) > 0) spdlog::info("session {} ended", session_id);
}

void AgentService::SweepSessions() {
  std::vector<std::shared_ptr<Session>> expired;
  {
    MutexLock lock(mu_);
    auto now = clock_.SteadyNow();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second->client == nullptr &&
          now - it->second->created > options_.session_connect_timeout) {
        expired.push_back(it->second);
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : expired) {
    if (s->agent) {
      s->agent->Send(ErrorFrame("the client never connected"), true);
      s->agent->Close("client never connected");
    }
  }
}

}  // namespace hpod::controlplane
