#pragma once

// The parse tree shared by the JMESPath parser (jmespath.cc) and its
// interpreter (jmespath_eval.cc). Private to the two.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hpod/cli/jmespath.h"

namespace hpod::cli {

using Json = nlohmann::ordered_json;

enum class NodeType {
  kIdentity,
  kCurrent,
  kField,
  kLiteral,
  kSubexpression,
  kIndexExpression,
  kIndex,
  kSlice,
  kProjection,
  kValueProjection,
  kFilterProjection,
  kFlatten,
  kMultiSelectList,
  kMultiSelectHash,
  kComparator,
  kOr,
  kAnd,
  kNot,
  kPipe,
};

struct Expression::Node {
  NodeType type = NodeType::kIdentity;
  std::string name;  // field name or comparator token
  Json value;        // literal, index
  std::optional<int64_t> slice[3];
  std::vector<std::string> keys;  // multiselect hash keys, parallel to children
  std::vector<std::shared_ptr<Node>> children;
};

// Evaluates the tree at `node` against `value` (JMESPath's tree interpreter).
Json EvaluateNode(const Expression::Node& node, const Json& value);

}  // namespace hpod::cli
