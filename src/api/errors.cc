#include "hpod/api/errors.h"

#include <nlohmann/json.hpp>

namespace hpod::api {
namespace {

int StatusForType(const std::string& type) {
  if (type == "UnrecognizedClientException" || type == "InvalidSignatureException" ||
      type == "MissingAuthenticationTokenException" || type == "AccessDeniedException") {
    // AWS JSON services answer AccessDeniedException with 400 and the
    // authentication failures with 403.
    return type == "AccessDeniedException" ? 400 : 403;
  }
  if (type == "InternalFailure") return 500;
  if (type == "ServiceUnavailable") return 503;
  return 400;
}

}  // namespace

ApiError ToApiError(const Status& status) {
  ApiError e;
  e.message = status.message();
  if (!status.aws_type().empty()) {
    e.type = status.aws_type();
    e.http_status = StatusForType(e.type);
    return e;
  }
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      e.type = "ValidationException";
      break;
    case StatusCode::kNotFound:
      e.type = "ResourceNotFound";
      break;
    case StatusCode::kAlreadyExists:
      e.type = "ResourceInUse";
      break;
    case StatusCode::kResourceExhausted:
      e.type = "ResourceLimitExceeded";
      break;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      e.type = "ConflictException";
      break;
    case StatusCode::kPermissionDenied:
      e.type = "AccessDeniedException";
      break;
    case StatusCode::kUnauthenticated:
      e.type = "UnrecognizedClientException";
      break;
    case StatusCode::kUnavailable:
      e.type = "ServiceUnavailable";
      break;
    default:
      e.type = "InternalFailure";
      // Internal details stay in the daemon's log.
      e.message = "We encountered an internal error. Please try again.";
      break;
  }
  e.http_status = StatusForType(e.type);
  return e;
}

std::string ErrorBody(const ApiError& error) {
  nlohmann::ordered_json j;
  j["__type"] = error.type;
  j["message"] = error.message;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace hpod::api
