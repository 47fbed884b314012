#include "hpod/controlplane/pagination.h"

#include "hpod/base/crypto.h"

namespace hpod::controlplane {
namespace {

Status BadToken() {
  return InvalidArgumentError("The NextToken is invalid or was issued for a different request");
}

}  // namespace

std::string PageTokenCodec::ScopeOf(const std::string& operation, const nlohmann::json& request) {
  nlohmann::json r = request.is_object() ? request : nlohmann::json::object();
  r.erase("NextToken");
  r.erase("MaxResults");
  // nlohmann::json sorts object keys, so equal requests dump equally.
  return operation + ":" + HexEncode(Sha256(r.dump())).substr(0, 16);
}

std::string PageTokenCodec::Encode(const std::string& scope, const nlohmann::json& position) const {
  std::string payload = nlohmann::json{{"s", scope}, {"p", position}}.dump();
  std::string mac = HmacSha256(secret_, payload).substr(0, 16);
  return Base64UrlEncode(payload) + "." + Base64UrlEncode(mac);
}

StatusOr<nlohmann::json> PageTokenCodec::Decode(const std::string& scope,
                                                const std::string& token) const {
  size_t dot = token.find('.');
  if (dot == std::string::npos) return BadToken();
  auto payload = Base64UrlDecode(token.substr(0, dot));
  auto mac = Base64UrlDecode(token.substr(dot + 1));
  if (!payload.ok() || !mac.ok()) return BadToken();
  if (!ConstantTimeEquals(*mac, HmacSha256(secret_, *payload).substr(0, 16))) return BadToken();
  auto j = nlohmann::json::parse(*payload, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("s") || !j.contains("p")) return BadToken();
  if (j["s"] != scope) return BadToken();
  return j["p"];
}

}  // namespace hpod::controlplane
