#pragma once

// Decoding of AWS JSON 1.1 requests: the operation from X-Amz-Target, the body
// parsed and validated against the operation's input shape. Everything a client
// can send passes through here first, so it must answer any byte string with a
// value, never a crash (fuzzed by fuzz/request_decoder_fuzzer.cc).
//
// Thread contract: stateless functions; safe from any thread.

#include <nlohmann/json.hpp>
#include <string_view>

#include "hpod/api/model.h"
#include "hpod/api/validate.h"
#include "hpod/base/status.h"

namespace hpod::api {

struct DecodedRequest {
  const Operation* operation = nullptr;
  nlohmann::json input;  // validated; an object
};

// For a SageMaker cluster operation of botocore's model that hpod does not serve
// on purpose (EKS-only ones, and those not built yet): why, in one sentence; ""
// for any other name.
std::string RefusedClusterOperation(std::string_view operation);

// `target` is the X-Amz-Target header ("SageMaker.CreateCluster"), `content_type`
// the Content-Type header. Errors:
//   UnknownOperationException  missing/unknown target or operation
//   ValidationException        an operation RefusedClusterOperation names, saying why
//   SerializationException     body is not a JSON object, or a wrong type
//   ValidationException        constraint violations, unknown fields
StatusOr<DecodedRequest> DecodeRequest(const ServiceModel& model, std::string_view target,
                                       std::string_view content_type, std::string_view body,
                                       const ValidateOptions& options = {});

}  // namespace hpod::api
