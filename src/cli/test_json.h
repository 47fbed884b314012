#pragma once

// Test helper: JSON equality that ignores object key order (Python's `==` on
// dicts), for comparing hpod's model-ordered output with botocore's.

#include <nlohmann/json.hpp>

namespace hpod::cli::testing {

inline bool SameJson(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k) || !SameJson(v, b[k])) return false;
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameJson(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace hpod::cli::testing
