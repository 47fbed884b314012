#pragma once

// Identifiers in the forms SageMaker uses, so scripts that parse them keep working.
//
// Thread contract: stateless functions (randomness from the OS); thread-safe.

#include <optional>
#include <string>
#include <string_view>

namespace hpod::controlplane {

// 12 characters of [a-z0-9], e.g. "2hd31rmi9mde".
std::string NewClusterId();
// "i-" + 17 lowercase hex digits, e.g. "i-09e7576cbc230c181".
std::string NewInstanceId();
// RFC 4122 version-4 UUID, lowercase.
std::string NewEventId();
// rcv- + 12 [a-z0-9]: a node recovery (recovery.h).
std::string NewRecoveryId();
// "<instance-name>-<8 hex>": stable across replacement (NodeLogicalId).
std::string NewNodeLogicalId(std::string_view instance_name);

// arn:aws:sagemaker:<region>:<account>:cluster/<id>
std::string ClusterArn(std::string_view region, std::string_view account, std::string_view id);
// The cluster id of a cluster ARN, or nullopt when `text` is not one.
std::optional<std::string> ClusterIdFromArn(std::string_view text);

// sagemaker-cluster:<cluster-id>_<group>-<instance-id> (SSM-style session target).
std::string SessionTarget(std::string_view cluster_id, std::string_view group,
                          std::string_view instance_id);

// "ip-10-1-4-190" from "10.1.4.190"; empty for an empty address.
std::string HostnameFromIp(std::string_view ip);
// "ip-10-1-4-190.us-west-2.compute.internal" (us-east-1 uses "ec2.internal").
std::string PrivateDnsName(std::string_view ip, std::string_view region);

}  // namespace hpod::controlplane
