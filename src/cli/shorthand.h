#pragma once

// The AWS CLI "shorthand" syntax for structure and list-of-structure parameters,
// ported from awscli/shorthand.py (ShorthandParser) so that copy-pasted AWS command
// lines parse the same way:
//
//   Key=team,Value=ml                      -> {"Key": "team", "Value": "ml"}
//   SecurityGroupIds=sg-1,sg-2,Subnets=s1  -> {"SecurityGroupIds": ["sg-1", "sg-2"],
//                                              "Subnets": "s1"}
//   LifeCycleConfig={SourceS3Uri=s3://b/p,OnCreate=on_create.sh}
//   Names=[a,b],Quoted='a,b'               -> explicit lists, quoted values
//   Script@=file://on_create.sh            -> the value is read from the file
//
// The parser is purely syntactic: every leaf is a string, a value is a list only
// when commas made it one. Typing (integers, booleans, wrapping a single value
// into a list) is the caller's job and is driven by the service model.
//
// Thread contract: ParseShorthand is a pure function (apart from the callback).

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::cli {

struct ShorthandOptions {
  // Resolves `key@=value`: returns the file's text when `value` is a file:// or
  // fileb:// reference, nullopt when it is not one, or an error. Unset means
  // `@=` values are taken literally.
  std::function<StatusOr<std::optional<std::string>>(std::string_view)> load_param_file;
};

// Parses `input` into an object of strings, lists and objects. Errors are
// kInvalidArgument with awscli's wording, e.g.
//   Expected: '=', received: 'EOF' for input:
//   Key
//      ^
StatusOr<nlohmann::ordered_json> ParseShorthand(std::string_view input,
                                                const ShorthandOptions& options = {});

}  // namespace hpod::cli
