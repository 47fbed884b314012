#include "hpod/controlplane/host_channels.h"

#include <spdlog/spdlog.h>

namespace hpod::controlplane {

http::WebSocketCallbacks HostChannels::Accept(const std::string& host_id,
                                              const std::string& serial_hex, const std::string& cn,
                                              std::shared_ptr<http::WebSocket> socket) {
  std::shared_ptr<http::WebSocket> replaced;
  uint64_t serial = 0;
  {
    MutexLock lock(mu_);
    serial = ++next_serial_;
    auto it = hosts_.find(host_id);
    if (it != hosts_.end()) replaced = it->second.socket;
    hosts_[host_id] = Entry{socket, serial};
    lost_.erase(host_id);
  }
  if (replaced) replaced->Close("replaced by a new connection");
  spdlog::info("host {} connected", host_id);
  http::WebSocketCallbacks cb;
  std::weak_ptr<http::WebSocket> weak = socket;
  cb.on_message = [this, weak, serial_hex, cn, host_id, serial](http::WebSocketMessage m) {
    namespace proto = api::agentproto;
    nlohmann::json j = nlohmann::json::parse(m.data, nullptr, false);
    if (m.binary || !j.is_object()) return;
    const std::string type = j.value("type", "");
    if (type == proto::HostStatus::kType) {
      auto status = proto::HostStatus::FromJson(j);
      if (!status.ok()) {
        spdlog::warn("host {}: {}", host_id, status.status().message());
        return;
      }
      if (status->leaving) {
        MutexLock lock(mu_);
        auto it = hosts_.find(host_id);
        if (it != hosts_.end() && it->second.serial == serial) it->second.leaving = true;
      }
      if (events_.status) events_.status(host_id, *status);
      return;
    }
    if (type != proto::RenewCertificate::kType) return;
    auto s = weak.lock();
    if (!s) return;
    auto renew = proto::RenewCertificate::FromJson(j);
    StatusOr<proto::Certificate> issued =
        renew.ok() ? (renew_ ? renew_(serial_hex, cn, renew->csr)
                             : StatusOr<proto::Certificate>(UnimplementedError("no renewal")))
                   : StatusOr<proto::Certificate>(renew.status());
    if (issued.ok()) {
      s->Send(issued->ToJson().dump(), false);
    } else {
      s->Send(proto::Error{std::string(proto::RenewCertificate::kType),
                           "renew_certificate: " + issued.status().message()}
                  .ToJson()
                  .dump(),
              false);
    }
  };
  cb.on_close = [this, host_id, serial] {
    MutexLock lock(mu_);
    auto it = hosts_.find(host_id);
    if (it != hosts_.end() && it->second.serial == serial) {
      const bool leaving = it->second.leaving;
      hosts_.erase(it);
      if (!leaving) lost_[host_id] = std::chrono::steady_clock::now();
      spdlog::info("host {} disconnected{}", host_id,
                   leaving ? " (its agent stops on purpose)" : " without a goodbye");
    }
  };
  return cb;
}

std::optional<std::chrono::steady_clock::time_point> HostChannels::LostSince(
    const std::string& host_id) const {
  MutexLock lock(mu_);
  if (hosts_.count(host_id)) return std::nullopt;
  auto it = lost_.find(host_id);
  if (it == lost_.end()) return std::nullopt;
  return it->second;
}

bool HostChannels::Send(const std::string& host_id, const nlohmann::json& frame) {
  std::shared_ptr<http::WebSocket> socket;
  {
    MutexLock lock(mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end()) return false;
    socket = it->second.socket;
  }
  return socket->Send(frame.dump(), false);
}

bool HostChannels::IsConnected(const std::string& host_id) const {
  MutexLock lock(mu_);
  return hosts_.count(host_id) > 0;
}

void HostChannels::Disconnect(const std::string& host_id, const std::string& reason) {
  std::shared_ptr<http::WebSocket> socket;
  {
    MutexLock lock(mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end()) return;
    socket = it->second.socket;
  }
  socket->Close(reason);
}

void HostChannels::Shutdown() {
  std::map<std::string, Entry> all;
  {
    MutexLock lock(mu_);
    all.swap(hosts_);
  }
  for (auto& [id, e] : all) e.socket->Close("hpodd is shutting down");
}

}  // namespace hpod::controlplane
