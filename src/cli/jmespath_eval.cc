// JMESPath, part 2: the tree interpreter (jmespath.py's TreeInterpreter) over the
// tree jmespath.cc builds.
#include <optional>
#include <utility>
#include <vector>

#include "hpod/cli/jmespath.h"
#include "hpod/cli/jmespath_internal.h"

namespace hpod::cli {
namespace {

using Node = Expression::Node;

// --- interpreter ------------------------------------------------------------

bool IsFalse(const Json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
         (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         ((v.is_array() || v.is_object()) && v.empty());
}

// Python equality on parsed JSON: dicts ignore key order, bools are not numbers.
bool Equals(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !Equals(v, *it)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!Equals(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

Json Compare(const std::string& op, const Json& l, const Json& r) {
  if (op == "==") return Equals(l, r);
  if (op == "!=") return !Equals(l, r);
  bool numbers = l.is_number() && r.is_number();
  bool strings = l.is_string() && r.is_string();
  // Ordering is defined for numbers, and (as jmespath.py allows) for two strings.
  if (!numbers && !strings) return nullptr;
  int c;
  if (numbers) {
    double a = l.get<double>(), b = r.get<double>();
    c = a < b ? -1 : (a > b ? 1 : 0);
  } else {
    int cmp = l.get_ref<const std::string&>().compare(r.get_ref<const std::string&>());
    c = cmp < 0 ? -1 : (cmp > 0 ? 1 : 0);
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

// Python's slice semantics (slice.indices), as jmespath.py uses list slicing.
Json Slice(const Json& list, const std::optional<int64_t> parts[3]) {
  auto n = static_cast<int64_t>(list.size());
  int64_t step = parts[2].value_or(1);
  if (step == 0) return nullptr;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v.has_value()) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t start = clamp(parts[0], step < 0 ? n - 1 : 0);
  int64_t stop = clamp(parts[1], step < 0 ? -1 : n);
  Json out = Json::array();
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) out.push_back(list[static_cast<size_t>(i)]);
  } else {
    for (int64_t i = start; i > stop; i += step) out.push_back(list[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

Json EvaluateNode(const Node& node, const Json& value) {
  switch (node.type) {
    case NodeType::kIdentity:
    case NodeType::kCurrent:
      return value;
    case NodeType::kLiteral:
      return node.value;
    case NodeType::kField: {
      if (!value.is_object()) return nullptr;
      auto it = value.find(node.name);
      return it == value.end() ? Json(nullptr) : *it;
    }
    case NodeType::kSubexpression:
    case NodeType::kIndexExpression: {
      Json result = value;
      for (const auto& child : node.children) result = EvaluateNode(*child, result);
      return result;
    }
    case NodeType::kIndex: {
      if (!value.is_array()) return nullptr;
      int64_t i = node.value.get<int64_t>();
      auto n = static_cast<int64_t>(value.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return nullptr;
      return value[static_cast<size_t>(i)];
    }
    case NodeType::kSlice:
      if (!value.is_array()) return nullptr;
      return Slice(value, node.slice);
    case NodeType::kProjection: {
      Json base = EvaluateNode(*node.children[0], value);
      if (!base.is_array()) return nullptr;
      Json out = Json::array();
      for (const auto& e : base) {
        Json r = EvaluateNode(*node.children[1], e);
        if (!r.is_null()) out.push_back(std::move(r));
      }
      return out;
    }
    case NodeType::kValueProjection: {
      Json base = EvaluateNode(*node.children[0], value);
      if (!base.is_object()) return nullptr;
      Json out = Json::array();
      for (const auto& [k, e] : base.items()) {
        Json r = EvaluateNode(*node.children[1], e);
        if (!r.is_null()) out.push_back(std::move(r));
      }
      return out;
    }
    case NodeType::kFilterProjection: {
      Json base = EvaluateNode(*node.children[0], value);
      if (!base.is_array()) return nullptr;
      Json out = Json::array();
      for (const auto& e : base) {
        if (IsFalse(EvaluateNode(*node.children[2], e))) continue;
        Json r = EvaluateNode(*node.children[1], e);
        if (!r.is_null()) out.push_back(std::move(r));
      }
      return out;
    }
    case NodeType::kFlatten: {
      Json base = EvaluateNode(*node.children[0], value);
      if (!base.is_array()) return nullptr;
      Json out = Json::array();
      for (const auto& e : base) {
        if (e.is_array()) {
          for (const auto& inner : e) out.push_back(inner);
        } else {
          out.push_back(e);
        }
      }
      return out;
    }
    case NodeType::kMultiSelectList: {
      if (value.is_null()) return nullptr;
      Json out = Json::array();
      for (const auto& child : node.children) out.push_back(EvaluateNode(*child, value));
      return out;
    }
    case NodeType::kMultiSelectHash: {
      if (value.is_null()) return nullptr;
      Json out = Json::object();
      for (size_t i = 0; i < node.children.size(); ++i) {
        out[node.keys[i]] = EvaluateNode(*node.children[i], value);
      }
      return out;
    }
    case NodeType::kComparator:
      return Compare(node.name, EvaluateNode(*node.children[0], value),
                     EvaluateNode(*node.children[1], value));
    case NodeType::kOr: {
      Json left = EvaluateNode(*node.children[0], value);
      return IsFalse(left) ? EvaluateNode(*node.children[1], value) : left;
    }
    case NodeType::kAnd: {
      Json left = EvaluateNode(*node.children[0], value);
      return IsFalse(left) ? left : EvaluateNode(*node.children[1], value);
    }
    case NodeType::kNot:
      return IsFalse(EvaluateNode(*node.children[0], value));
    case NodeType::kPipe:
      return EvaluateNode(*node.children[1], EvaluateNode(*node.children[0], value));
  }
  return nullptr;
}

nlohmann::ordered_json Expression::Search(const nlohmann::ordered_json& data) const {
  return EvaluateNode(*root_, data);
}

}  // namespace hpod::cli
