#include "hpod/api/codec.h"

#include <map>
#include <string>

namespace hpod::api {
namespace {

// The validator treats a null member as absent (as AWS does); removing them here
// means no handler ever sees a null and mistakes it for a value.
void StripNullMembers(nlohmann::json& v) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end();) {
      if (it->is_null()) {
        it = v.erase(it);
      } else {
        StripNullMembers(*it);
        ++it;
      }
    }
  } else if (v.is_array()) {
    for (auto& e : v) StripNullMembers(e);
  }
}

}  // namespace

std::string RefusedClusterOperation(std::string_view operation) {
  static const std::map<std::string, std::string, std::less<>> kRefused = [] {
    const std::string volumes =
        "it attaches EBS volumes to the nodes of EKS clusters; hpod runs Slurm, and a node's "
        "disks are its host's";
    const std::string scheduler =
        "it configures EKS task governance (Kueue); hpod runs Slurm: use partitions, QOS and "
        "the accounting limits of sacctmgr on the controller";
    const std::string quotas =
        "EKS task governance's compute quotas have no Slurm counterpart in hpod; limit teams "
        "with Slurm accounts and QOS (sacctmgr) on the controller";
    std::map<std::string, std::string, std::less<>> m;
    for (const char* op : {"AttachClusterNodeVolume", "DetachClusterNodeVolume"}) m[op] = volumes;
    for (const char* op : {"CreateClusterSchedulerConfig", "DescribeClusterSchedulerConfig",
                           "ListClusterSchedulerConfigs", "UpdateClusterSchedulerConfig",
                           "DeleteClusterSchedulerConfig"}) {
      m[op] = scheduler;
    }
    for (const char* op : {"CreateComputeQuota", "DescribeComputeQuota", "ListComputeQuotas",
                           "UpdateComputeQuota", "DeleteComputeQuota"}) {
      m[op] = quotas;
    }
    return m;
  }();
  auto it = kRefused.find(operation);
  return it == kRefused.end() ? std::string() : it->second;
}

StatusOr<DecodedRequest> DecodeRequest(const ServiceModel& model, std::string_view target,
                                       std::string_view content_type, std::string_view body,
                                       const ValidateOptions& options) {
  const std::string prefix = model.target_prefix() + ".";
  if (target.empty()) {
    return InvalidArgumentError("Missing X-Amz-Target header; expected " + prefix + "<Operation>")
        .WithAwsType("UnknownOperationException");
  }
  if (target.substr(0, prefix.size()) != prefix) {
    return InvalidArgumentError("Unknown target prefix in X-Amz-Target '" + std::string(target) +
                                "'; expected " + prefix + "<Operation>")
        .WithAwsType("UnknownOperationException");
  }
  const Operation* op = model.FindOperation(target.substr(prefix.size()));
  if (op == nullptr) {
    if (auto why = RefusedClusterOperation(target.substr(prefix.size())); !why.empty()) {
      return InvalidArgumentError(std::string(target.substr(prefix.size())) +
                                  " is not supported by hpod: " + why);
    }
    return InvalidArgumentError("Unknown operation " + std::string(target.substr(prefix.size())) +
                                " (hpod serves the SageMaker cluster operations)")
        .WithAwsType("UnknownOperationException");
  }
  // Content-Type may carry parameters ("; charset=utf-8").
  std::string_view ct = content_type.substr(0, content_type.find(';'));
  while (!ct.empty() && ct.back() == ' ') ct.remove_suffix(1);
  if (ct != "application/x-amz-json-1.1" && ct != "application/x-amz-json-1.0" &&
      ct != "application/json") {
    return InvalidArgumentError("Unsupported Content-Type '" + std::string(content_type) +
                                "'; send application/x-amz-json-1.1")
        .WithAwsType("SerializationException");
  }
  nlohmann::json input;
  if (body.empty()) {
    input = nlohmann::json::object();
  } else {
    input = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (input.is_discarded()) {
      return InvalidArgumentError("Request body is not valid JSON")
          .WithAwsType("SerializationException");
    }
  }
  if (!input.is_object()) {
    return InvalidArgumentError("Request body must be a JSON object")
        .WithAwsType("SerializationException");
  }
  HPOD_RETURN_IF_ERROR(ValidateValue(*op->input, input, options));
  StripNullMembers(input);
  return DecodedRequest{op, std::move(input)};
}

}  // namespace hpod::api
