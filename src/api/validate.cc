#include "hpod/api/validate.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace hpod::api {
namespace {

struct PcreCodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};

// Compiled patterns keyed by source. Compilation happens once per pattern; the
// cache only grows to the number of patterns in the model.
class PatternCache {
 public:
  static PatternCache& Get() {
    static PatternCache cache;
    return cache;
  }
  bool Matches(std::string_view pattern, std::string_view text) {
    pcre2_code* code = Compile(pattern);
    if (code == nullptr) return false;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md,
                         nullptr);
    pcre2_match_data_free(md);
    return rc >= 0;
  }

 private:
  pcre2_code* Compile(std::string_view pattern) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = compiled_.find(std::string(pattern));
    if (it != compiled_.end()) return it->second.get();
    int err = 0;
    PCRE2_SIZE offset = 0;
    // Model patterns are matched against the whole value. PCRE2_MATCH_INVALID_UTF
    // makes bad UTF-8 in a request a non-match instead of an error.
    pcre2_code* code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err,
        &offset, nullptr);
    compiled_[std::string(pattern)].reset(code);
    return code;
  }
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<pcre2_code, PcreCodeDeleter>> compiled_;
};

// Number of Unicode code points, which is how AWS counts string length.
int64_t CodePoints(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

// Never dumps structured values: a hostile body may nest millions of levels and
// dump() recurses.
std::string Quote(const nlohmann::json& v) {
  if (v.is_array()) return "'<list of " + std::to_string(v.size()) + " items>'";
  if (v.is_object()) return "'<structure of " + std::to_string(v.size()) + " members>'";
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return "'" + text + "'";
}

class Validator {
 public:
  explicit Validator(const ValidateOptions& options) : options_(options) {}

  void Check(const Shape& shape, const nlohmann::json& v, const std::string& path,
             const std::string& parent_member) {
    if (!serialization_error_.empty()) return;
    switch (shape.type) {
      case ShapeType::kStructure:
        return CheckStructure(shape, v, path);
      case ShapeType::kList:
        return CheckList(shape, v, path);
      case ShapeType::kMap:
        return CheckMap(shape, v, path);
      case ShapeType::kString:
        return CheckString(shape, v, path, parent_member);
      case ShapeType::kInteger:
      case ShapeType::kLong:
        return CheckInteger(shape, v, path);
      case ShapeType::kBoolean:
        if (!v.is_boolean()) TypeError(path, "boolean", v);
        return;
      case ShapeType::kTimestamp:
      case ShapeType::kDouble:
      case ShapeType::kFloat:
        if (!v.is_number()) TypeError(path, std::string(ShapeTypeName(shape.type)), v);
        return;
      case ShapeType::kBlob:
        if (!v.is_string()) TypeError(path, "blob (base64 string)", v);
        return;
    }
  }

  Status Result() const {
    if (!serialization_error_.empty()) {
      return InvalidArgumentError(serialization_error_).WithAwsType("SerializationException");
    }
    if (errors_.empty()) return OkStatus();
    std::string msg = std::to_string(errors_.size()) + " validation error" +
                      (errors_.size() == 1 ? "" : "s") + " detected: ";
    for (size_t i = 0; i < errors_.size(); ++i) {
      if (i > 0) msg += "; ";
      msg += errors_[i];
    }
    return InvalidArgumentError(msg).WithAwsType("ValidationException");
  }

 private:
  static std::string Join(const std::string& path, const std::string& member) {
    return path.empty() ? LowerCamel(member) : path + "." + LowerCamel(member);
  }

  void TypeError(const std::string& path, const std::string& expected, const nlohmann::json& v) {
    if (!serialization_error_.empty()) return;
    serialization_error_ = "Expected " + expected + " at '" + (path.empty() ? "<body>" : path) +
                           "' but found " + std::string(v.type_name()) + " " + Quote(v);
  }

  void Constraint(const std::string& path, const std::string& value, const std::string& rule) {
    errors_.push_back("Value " + value + " at '" + path +
                      "' failed to satisfy constraint: Member must " + rule);
  }

  void CheckLength(const Shape& shape, int64_t len, const std::string& path,
                   const std::string& shown) {
    if (shape.min && len < *shape.min) {
      Constraint(path, shown, "have length greater than or equal to " + std::to_string(*shape.min));
    }
    if (shape.max && len > *shape.max) {
      Constraint(path, shown, "have length less than or equal to " + std::to_string(*shape.max));
    }
  }

  void CheckStructure(const Shape& shape, const nlohmann::json& v, const std::string& path) {
    if (!v.is_object()) return TypeError(path, "structure (JSON object)", v);
    for (const std::string& req : shape.required) {
      auto it = v.find(req);
      if (it == v.end() || it->is_null()) {
        errors_.push_back("Value null at '" + Join(path, req) +
                          "' failed to satisfy constraint: Member must not be null");
      }
    }
    int set_members = 0;
    for (const auto& [key, child] : v.items()) {
      const Member* m = shape.FindMember(key);
      if (m == nullptr) {
        errors_.push_back("Unknown field '" + key + "' at '" + (path.empty() ? "<body>" : path) +
                          "': " + shape.name + " has no member named '" + key + "'");
        continue;
      }
      // JSON null is how some clients say "absent".
      if (child.is_null()) continue;
      ++set_members;
      Check(*m->shape, child, Join(path, key), key);
    }
    if (shape.is_union && set_members != 1) {
      errors_.push_back("Value at '" + (path.empty() ? "<body>" : path) +
                        "' failed to satisfy constraint: Member must have exactly one of its "
                        "members set (" +
                        shape.name + " is a union)");
    }
  }

  void CheckList(const Shape& shape, const nlohmann::json& v, const std::string& path) {
    if (!v.is_array()) return TypeError(path, "list (JSON array)", v);
    CheckLength(shape, static_cast<int64_t>(v.size()), path, Quote(v));
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].is_null()) {
        Constraint(path + "." + std::to_string(i + 1) + ".member", "null", "not be null");
        continue;
      }
      Check(*shape.member, v[i], path + "." + std::to_string(i + 1) + ".member", "");
    }
  }

  void CheckMap(const Shape& shape, const nlohmann::json& v, const std::string& path) {
    if (!v.is_object()) return TypeError(path, "map (JSON object)", v);
    CheckLength(shape, static_cast<int64_t>(v.size()), path, Quote(v));
    for (const auto& [key, child] : v.items()) {
      Check(*shape.key, key, path + ".key", "");
      Check(*shape.value, child, path + "." + key, "");
    }
  }

  void CheckString(const Shape& shape, const nlohmann::json& v, const std::string& path,
                   const std::string& member) {
    if (!v.is_string()) return TypeError(path, "string", v);
    const std::string& s = v.get_ref<const std::string&>();
    CheckLength(shape, CodePoints(s), path, Quote(v));
    if (!shape.enum_values.empty()) {
      bool found = false;
      for (const auto& e : shape.enum_values) found = found || e == s;
      if (!found) {
        std::string set;
        for (const auto& e : shape.enum_values) set += (set.empty() ? "" : ", ") + e;
        Constraint(path, Quote(v), "satisfy enum value set: [" + set + "]");
      }
    }
    if (!shape.pattern.empty()) {
      bool file_uri_ok = options_.allow_file_uris && shape.name == "S3Uri" &&
                         s.rfind("file://", 0) == 0 && s.size() > 7;
      if (!file_uri_ok && !MatchesPattern(shape.pattern, s)) {
        Constraint(path, Quote(v), "satisfy regular expression pattern: " + shape.pattern);
      }
    }
  }

  void CheckInteger(const Shape& shape, const nlohmann::json& v, const std::string& path) {
    if (!v.is_number_integer()) {
      // 3.0 is an integer on the wire for most JSON encoders.
      if (v.is_number_float() && v.get<double>() == static_cast<double>(v.get<int64_t>())) {
        return CheckRange(shape, v.get<int64_t>(), path);
      }
      return TypeError(path, "integer", v);
    }
    CheckRange(shape, v.get<int64_t>(), path);
  }

  void CheckRange(const Shape& shape, int64_t n, const std::string& path) {
    std::string shown = "'" + std::to_string(n) + "'";
    if (shape.min && n < *shape.min) {
      Constraint(path, shown, "have value greater than or equal to " + std::to_string(*shape.min));
    }
    if (shape.max && n > *shape.max) {
      Constraint(path, shown, "have value less than or equal to " + std::to_string(*shape.max));
    }
  }

  const ValidateOptions& options_;
  std::vector<std::string> errors_;
  std::string serialization_error_;
};

}  // namespace

bool MatchesPattern(std::string_view pattern, std::string_view text) {
  return PatternCache::Get().Matches(pattern, text);
}

std::string LowerCamel(std::string_view member_name) {
  std::string out(member_name);
  if (!out.empty() && out[0] >= 'A' && out[0] <= 'Z') out[0] = static_cast<char>(out[0] + 32);
  return out;
}

Status ValidateValue(const Shape& shape, const nlohmann::json& value,
                     const ValidateOptions& options) {
  Validator v(options);
  v.Check(shape, value, "", "");
  return v.Result();
}

}  // namespace hpod::api
