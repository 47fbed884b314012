#include "hpod/controlplane/ids.h"

#include "hpod/api/validate.h"
#include "hpod/base/crypto.h"

namespace hpod::controlplane {

std::string NewClusterId() { return RandomString(12, "abcdefghijklmnopqrstuvwxyz0123456789"); }

std::string NewInstanceId() { return "i-" + RandomString(17, "0123456789abcdef"); }

std::string NewRecoveryId() {
  return "rcv-" + RandomString(12, "abcdefghijklmnopqrstuvwxyz0123456789");
}

std::string NewEventId() { return NewUuid4(); }

std::string NewNodeLogicalId(std::string_view instance_name) {
  return std::string(instance_name) + "-" + RandomString(8, "0123456789abcdef");
}

std::string ClusterArn(std::string_view region, std::string_view account, std::string_view id) {
  return "arn:aws:sagemaker:" + std::string(region) + ":" + std::string(account) + ":cluster/" +
         std::string(id);
}

std::optional<std::string> ClusterIdFromArn(std::string_view text) {
  static constexpr char kPattern[] =
      "arn:aws[a-z\\-]*:sagemaker:[a-z0-9\\-]*:[0-9]{12}:cluster/[a-z0-9]{12}";
  if (!api::MatchesPattern(kPattern, text)) return std::nullopt;
  return std::string(text.substr(text.size() - 12));
}

std::string SessionTarget(std::string_view cluster_id, std::string_view group,
                          std::string_view instance_id) {
  return "sagemaker-cluster:" + std::string(cluster_id) + "_" + std::string(group) + "-" +
         std::string(instance_id);
}

std::string HostnameFromIp(std::string_view ip) {
  if (ip.empty()) return "";
  std::string out = "ip-";
  for (char c : ip) out.push_back(c == '.' ? '-' : c);
  return out;
}

std::string PrivateDnsName(std::string_view ip, std::string_view region) {
  if (ip.empty()) return "";
  std::string domain =
      region == "us-east-1" ? "ec2.internal" : std::string(region) + ".compute.internal";
  return HostnameFromIp(ip) + "." + domain;
}

}  // namespace hpod::controlplane
