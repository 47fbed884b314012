#pragma once

// Validation of decoded requests against botocore's model, as AWS JSON services do
// it server-side: every constraint violation is collected and reported in AWS's
// wording, with member paths in AWS form ('instanceGroups.1.member.instanceCount'):
//
//   1 validation error detected: Value 'x_y' at 'clusterName' failed to satisfy
//   constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9])*
//
// Type mismatches (a string where a number belongs, an object where a list belongs)
// are SerializationException, as AWS answers them; fields the model does not know
// are ValidationException naming the field (AWS ignores them, hpod refuses them so
// a typo is never silently dropped).
//
// Thread contract: stateless functions; safe from any thread.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "hpod/api/model.h"
#include "hpod/base/status.h"

namespace hpod::api {

struct ValidateOptions {
  // hpod accepts lifecycle scripts from local directories too (file://), an
  // extension over the model's (https|s3):// pattern for S3Uri.
  bool allow_file_uris = true;
};

// Checks `value` against `shape`. Returns OK, or kInvalidArgument with aws_type
// ValidationException / SerializationException and a message naming each field.
Status ValidateValue(const Shape& shape, const nlohmann::json& value,
                     const ValidateOptions& options = {});

// Whole-string match of `pattern` (PCRE2, UTF, Unicode properties) against `text`.
// Compiled patterns are cached. An invalid pattern never matches.
bool MatchesPattern(std::string_view pattern, std::string_view text);

// 'InstanceGroups' -> 'instanceGroups' (AWS's member path style).
std::string LowerCamel(std::string_view member_name);

}  // namespace hpod::api
