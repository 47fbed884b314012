#pragma once

// Errors are values: functions that can fail return Status or StatusOr<T>.
// Codes follow abseil's canonical set and say what the caller should do next:
//   kUnavailable        retry the same call later;
//   kAborted            retry the whole read-modify-write;
//   kFailedPrecondition do not retry until the state is fixed.
// Protocol-specific names (AWS error types) are derived from the code in one place
// (api/errors.h); a Status may carry an explicit one as `aws_type` only where the
// canonical code alone is ambiguous (the auth errors).
//
// Thread contract: Status and StatusOr are values; distinct objects may be used from
// different threads, one object is not synchronized.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hpod {

enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kUnauthenticated,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // An explicit protocol error name (e.g. "InvalidSignatureException"); empty when the
  // name should be derived from code().
  const std::string& aws_type() const { return aws_type_; }
  Status&& WithAwsType(std::string type) && {
    aws_type_ = std::move(type);
    return std::move(*this);
  }

  // Prefixes the message with context, keeping code and type: "loading x: <message>".
  Status Annotate(std::string_view context) const;

  // "NOT_FOUND: message" (for logs and test failures).
  std::string ToString() const;

  bool operator==(const Status& other) const {
    return code_ == other.code_ && message_ == other.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string aws_type_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status AbortedError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status UnauthenticatedError(std::string message);
Status DeadlineExceededError(std::string message);

// StatusOr<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) {  // NOLINT: implicit by design
    if (status.ok()) v_ = Status(StatusCode::kInternal, "StatusOr constructed from OK status");
  }
  StatusOr(Status&& status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok())
      v_ = Status(StatusCode::kInternal, "StatusOr constructed from OK status");
  }
  StatusOr(const T& value) : v_(value) {}        // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // Precondition: ok().
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> v_;
};

namespace internal {
inline const Status& AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const StatusOr<T>& s) {
  return s.status();
}
}  // namespace internal

}  // namespace hpod

#define HPOD_CONCAT_INNER_(a, b) a##b
#define HPOD_CONCAT_(a, b) HPOD_CONCAT_INNER_(a, b)

#define HPOD_RETURN_IF_ERROR(expr)                                  \
  do {                                                              \
    ::hpod::Status hpod_status_ = ::hpod::internal::AsStatus(expr); \
    if (!hpod_status_.ok()) return hpod_status_;                    \
  } while (0)

#define HPOD_ASSIGN_OR_RETURN(lhs, expr) \
  HPOD_ASSIGN_OR_RETURN_IMPL_(HPOD_CONCAT_(hpod_statusor_, __LINE__), lhs, expr)
#define HPOD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// For broken invariants only: logs and aborts.
#define HPOD_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) ::hpod::internal::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)

namespace hpod::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace hpod::internal
