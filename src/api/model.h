#pragma once

// The SageMaker cluster API as botocore models it: operations, shapes and their
// constraints, and paginators, loaded from sagemaker_cluster_model.json (extracted
// by scripts/gen-api-model.py and compiled into the binary). The daemon validates
// requests against it and the CLI derives its verbs and flags from it, so neither
// can drift from AWS's model.
//
// Thread contract: ServiceModel::Get() builds the model once (thread-safe static)
// and the returned object is immutable, so it may be read from any thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hpod::api {

enum class ShapeType {
  kStructure,
  kList,
  kMap,
  kString,
  kInteger,
  kLong,
  kBoolean,
  kTimestamp,
  kDouble,
  kFloat,
  kBlob,
};

std::string_view ShapeTypeName(ShapeType type);

struct Shape;

struct Member {
  std::string name;  // "ClusterName"
  const Shape* shape = nullptr;
  // The model's idempotencyToken: a client fills in a fresh UUID when the
  // caller gives none (botocore's generate_idempotent_uuid), once per call.
  bool idempotency_token = false;
};

struct Shape {
  std::string name;  // "ClusterName"
  ShapeType type = ShapeType::kString;
  // Structures: members in model order and the required ones.
  std::vector<Member> members;
  std::vector<std::string> required;
  // Lists: the element shape. Maps: key and value shapes.
  const Shape* member = nullptr;
  const Shape* key = nullptr;
  const Shape* value = nullptr;
  // Length (strings, lists, maps) or value (numbers) bounds.
  std::optional<int64_t> min;
  std::optional<int64_t> max;
  // Regular expression the whole string must match (PCRE syntax); empty = none.
  std::string pattern;
  std::vector<std::string> enum_values;
  bool is_union = false;      // exactly one member may be set
  bool is_exception = false;  // an error shape

  const Member* FindMember(std::string_view name) const;
  bool IsRequired(std::string_view member_name) const;
};

struct Paginator {
  std::string input_token;               // "NextToken"
  std::string output_token;              // "NextToken"
  std::string limit_key;                 // "MaxResults"
  std::vector<std::string> result_keys;  // "ClusterSummaries"
};

struct Operation {
  std::string name;  // "CreateCluster"
  const Shape* input = nullptr;
  const Shape* output = nullptr;
  std::vector<const Shape*> errors;
  std::optional<Paginator> paginator;
};

class ServiceModel {
 public:
  // The compiled-in SageMaker cluster model.
  static const ServiceModel& Get();

  const Operation* FindOperation(std::string_view name) const;
  const Shape* FindShape(std::string_view name) const;
  // Operations in the order the model lists them.
  const std::vector<const Operation*>& operations() const { return operation_order_; }

  const std::string& target_prefix() const { return target_prefix_; }  // "SageMaker"
  const std::string& signing_name() const { return signing_name_; }    // "sagemaker"
  const std::string& api_version() const { return api_version_; }      // "2017-07-24"
  const std::string& source() const { return source_; }  // botocore version it came from

 private:
  ServiceModel() = default;
  std::unordered_map<std::string, std::unique_ptr<Shape>> shapes_;
  std::unordered_map<std::string, std::unique_ptr<Operation>> operations_;
  std::vector<const Operation*> operation_order_;
  std::string target_prefix_, signing_name_, api_version_, source_;

  friend struct ModelLoader;
};

}  // namespace hpod::api
