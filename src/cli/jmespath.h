#pragma once

// A subset of JMESPath (https://jmespath.org/specification.html) for --query,
// following the reference implementation (jmespath.py: lexer, Pratt parser with
// its binding powers, tree interpreter), so results match the AWS CLI's where the
// subset applies. Supported:
//
//   identifiers and "quoted identifiers"    Cluster, "Cluster Name"
//   sub-expressions                         NodeDetails.InstanceStatus.Status
//   index and slices                        InstanceGroups[0], [-1], [1:3], [::2]
//   projections                             ClusterSummaries[*].ClusterName, *.Status
//   flatten                                 InstanceGroups[].InstanceGroupName, [][]
//   filters                                 ClusterSummaries[?ClusterStatus=='InService']
//   comparisons and logic                   ==, !=, <, <=, >, >=, &&, ||, !
//   multiselect list and hash               [ClusterName, ClusterStatus], {n: ClusterName}
//   pipes, @, literals                      A | [0], `"json"`, 'raw string'
//
// Not supported (rejected at compile time with a clear error): function calls
// such as length() or sort_by(), and expression references (&expr).
//
// Thread contract: a compiled Expression is immutable and may be shared.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::cli {

class Expression {
 public:
  // Parses `text`; kInvalidArgument with the position of the problem on failure.
  static StatusOr<Expression> Compile(std::string_view text);

  // Evaluates against `data`; JMESPath null is JSON null.
  nlohmann::ordered_json Search(const nlohmann::ordered_json& data) const;

  const std::string& text() const { return text_; }

  struct Node;  // the parse tree (defined in jmespath.cc)

 private:
  Expression(std::string text, std::shared_ptr<const Node> root)
      : text_(std::move(text)), root_(std::move(root)) {}
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace hpod::cli
