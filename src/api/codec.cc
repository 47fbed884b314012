#include "hpod/api/codec.h"

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
