#pragma once

// The one place where hpod::Status maps to AWS's error shape on the wire
// ({"__type": "<Code>", "message": "..."} plus an HTTP status). Handlers return
// canonical codes; this file decides what a client sees.
//
// Thread contract: stateless functions; safe from any thread.

#include <string>

#include "hpod/base/status.h"

namespace hpod::api {

struct ApiError {
  int http_status = 400;
  std::string type;  // "ValidationException"
  std::string message;
};

// Precondition: !status.ok().
//   kInvalidArgument      ValidationException          400
//   kNotFound             ResourceNotFound             400
//   kAlreadyExists        ResourceInUse                400
//   kResourceExhausted    ResourceLimitExceeded        400
//   kFailedPrecondition,
//   kAborted              ConflictException            400
//   kPermissionDenied     AccessDeniedException        400
//   kUnauthenticated      UnrecognizedClientException  403
//   kUnavailable          ServiceUnavailable           503
//   anything else         InternalFailure              500
// An explicit status.aws_type() wins over the table (with that type's status).
ApiError ToApiError(const Status& status);

// {"__type": type, "message": message} as compact JSON.
std::string ErrorBody(const ApiError& error);

}  // namespace hpod::api
