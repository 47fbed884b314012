#include "hpod/controlplane/s3_relay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "hpod/http/client.h"

namespace hpod::controlplane {
namespace {

bool HopByHop(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  return n == "connection" || n == "content-length" || n == "transfer-encoding" || n == "expect" ||
         n == "keep-alive";
}

}  // namespace

StatusOr<std::unique_ptr<S3Relay>> S3Relay::Start(const std::string& socket_path,
                                                  const std::string& endpoint) {
  HPOD_ASSIGN_OR_RETURN(http::Url url, http::ParseUrl(endpoint));
  std::unique_ptr<S3Relay> relay(new S3Relay());
  relay->endpoint_ = url.scheme + "://" + url.HostHeader();
  http::ServerOptions so;
  so.unix_path = socket_path;
  // Lifecycle prefixes may hold tarballs and wheels.
  so.body_limit_bytes = 256 * 1024 * 1024;
  S3Relay* self = relay.get();
  HPOD_ASSIGN_OR_RETURN(relay->server_, http::Server::Start(so, [self](const http::Request& in) {
                          thread_local http::Client client(http::ClientOptions{
                              std::chrono::milliseconds(5000), std::chrono::milliseconds(300000)});
                          http::Request out;
                          out.method = in.method;
                          out.target = in.target;
                          out.body = in.body;
                          for (const auto& h : in.headers) {
                            if (!HopByHop(h.name)) out.headers.push_back(h);
                          }
                          auto resp = client.Send(self->endpoint_ + in.target, out);
                          if (!resp.ok()) {
                            spdlog::warn("s3 relay: {} {}: {}", in.method, in.target,
                                         resp.status().ToString());
                            http::Response r;
                            r.status = 502;
                            r.body = std::string(resp.status().message());
                            return r;
                          }
                          http::Response r;
                          r.status = resp->status;
                          r.body = std::move(resp->body);
                          for (const auto& h : resp->headers) {
                            if (!HopByHop(h.name)) r.headers.push_back(h);
                          }
                          return r;
                        }));
  spdlog::info("relaying S3 requests of local nodes from unix:{} to {}", socket_path,
               relay->endpoint_);
  return relay;
}

void S3Relay::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::milliseconds(2000));
}

}  // namespace hpod::controlplane
