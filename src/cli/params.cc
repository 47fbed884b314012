#include "hpod/cli/params.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <regex>
#include <vector>

namespace hpod::cli {
namespace {

using api::Shape;
using api::ShapeType;

// --- Python-style printing -------------------------------------------------

std::string PyFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // nlohmann prints the shortest round-trip form, as Python's repr does.
  return Json(v).dump();
}

std::string PyQuote(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

// --- validation ----------------------------------------------------------------

std::string PyTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "<class 'NoneType'>";
    case Json::value_t::boolean:
      return "<class 'bool'>";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "<class 'int'>";
    case Json::value_t::number_float:
      return "<class 'float'>";
    case Json::value_t::string:
      return "<class 'str'>";
    case Json::value_t::array:
      return "<class 'list'>";
    case Json::value_t::object:
      return "<class 'dict'>";
    default:
      return "<class 'bytes'>";
  }
}

// Collects botocore's validation errors. Thread contract: single use by one thread.
class Validator {
 public:
  void Validate(const Json& v, const Shape& shape, const std::string& name) {
    switch (shape.type) {
      case ShapeType::kStructure:
        if (!TypeCheck(v, v.is_object(), "<class 'dict'>", name)) return;
        return Structure(v, shape, name);
      case ShapeType::kList:
        if (!TypeCheck(v, v.is_array(), "<class 'list'>, <class 'tuple'>", name)) return;
        return List(v, shape, name);
      case ShapeType::kMap:
        if (!TypeCheck(v, v.is_object(), "<class 'dict'>", name)) return;
        for (const auto& [key, value] : v.items()) {
          Validate(Json(key), *shape.key, name + " (key: " + key + ")");
          Validate(value, *shape.value, name + "." + key);
        }
        return;
      case ShapeType::kString:
        if (!TypeCheck(v, v.is_string(), "<class 'str'>", name)) return;
        // botocore counts code points; so do we (UTF-8 continuation bytes skipped).
        return RangeCheck(name, CodePoints(v.get_ref<const std::string&>()), shape,
                          "invalid length");
      case ShapeType::kInteger:
      case ShapeType::kLong:
        if (!TypeCheck(v, v.is_number_integer(), "<class 'int'>", name)) return;
        return RangeCheck(name, v.get<double>(), shape, "invalid range");
      case ShapeType::kDouble:
      case ShapeType::kFloat:
        if (!TypeCheck(v, v.is_number(),
                       "<class 'float'>, <class 'decimal.Decimal'>, <class 'int'>", name)) {
          return;
        }
        return RangeCheck(name, v.get<double>(), shape, "invalid range");
      case ShapeType::kBoolean:
        TypeCheck(v, v.is_boolean(), "<class 'bool'>", name);
        return;
      case ShapeType::kTimestamp:
        TypeCheck(v, ParseTimestamp(v).has_value(), "<class 'datetime.datetime'>, timestamp-string",
                  name);
        return;
      case ShapeType::kBlob:
        TypeCheck(v, v.is_string(), "<class 'bytes'>, <class 'bytearray'>, file-like object", name);
        return;
    }
  }

  std::vector<std::string> errors;

 private:
  static std::string DisplayName(const std::string& name) {
    if (name.empty()) return "input";
    if (name[0] == '.') return name.substr(1);
    return name;
  }

  static double CodePoints(const std::string& s) {
    return static_cast<double>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  }

  bool TypeCheck(const Json& v, bool ok, std::string_view valid_types, const std::string& name) {
    if (ok) return true;
    errors.push_back("Invalid type for parameter " + DisplayName(name) + ", value: " + PyStr(v) +
                     ", type: " + PyTypeName(v) + ", valid types: " + std::string(valid_types));
    return false;
  }

  void RangeCheck(const std::string& name, double value, const Shape& shape,
                  std::string_view error_type) {
    if (!shape.min.has_value() || value >= static_cast<double>(*shape.min)) return;
    std::string shown = PyStr(Json(static_cast<int64_t>(value)));
    if (error_type == "invalid length") {
      errors.push_back("Invalid length for parameter " + DisplayName(name) + ", value: " + shown +
                       ", valid min length: " + std::to_string(*shape.min));
    } else {
      if (value != std::floor(value)) shown = PyFloat(value);
      errors.push_back("Invalid value for parameter " + DisplayName(name) + ", value: " + shown +
                       ", valid min value: " + std::to_string(*shape.min));
    }
  }

  void Structure(const Json& v, const Shape& shape, const std::string& name) {
    if (shape.is_union) {
      std::string members;
      for (const auto& m : shape.members) members += (members.empty() ? "" : ", ") + m.name;
      // botocore's wording, missing space included.
      if (v.empty()) {
        errors.push_back("Must set one of the following keys for tagged unionstructure " +
                         DisplayName(name) + ": " + members + ".");
      } else if (v.size() > 1) {
        errors.push_back("Invalid number of parameters set for tagged union structure " +
                         DisplayName(name) +
                         ". Can only set one of the following keys: " + members + ".");
      }
    }
    for (const std::string& required : shape.required) {
      if (!v.contains(required)) {
        errors.push_back("Missing required parameter in " + DisplayName(name) + ": \"" + required +
                         "\"");
      }
    }
    std::vector<std::pair<std::string, const Shape*>> known;
    for (const auto& [key, value] : v.items()) {
      const api::Member* member = shape.FindMember(key);
      if (member == nullptr) {
        std::string valid;
        for (const auto& m : shape.members) valid += (valid.empty() ? "" : ", ") + m.name;
        errors.push_back("Unknown parameter in " + DisplayName(name) + ": \"" + key +
                         "\", must be one of: " + valid);
      } else {
        known.emplace_back(key, member->shape);
      }
    }
    for (const auto& [key, member_shape] : known) Validate(v[key], *member_shape, name + "." + key);
  }

  void List(const Json& v, const Shape& shape, const std::string& name) {
    RangeCheck(name, static_cast<double>(v.size()), shape, "invalid length");
    for (size_t i = 0; i < v.size(); ++i) {
      Validate(v[i], *shape.member, name + "[" + std::to_string(i) + "]");
    }
  }
};

// --- timestamps ----------------------------------------------------------------

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  return std::chrono::sys_days(std::chrono::year(static_cast<int>(y)) / std::chrono::month(m) /
                               std::chrono::day(d))
      .time_since_epoch()
      .count();
}

std::optional<double> ParseIsoString(const std::string& s) {
  // YYYY-MM-DD[(T|t| )HH:MM[:SS[.frac]]][Z|z| UTC| GMT|±HH[:MM]|±HHMM]
  static const std::regex kIso(
      R"(^\s*(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?)"
      R"(\s*(?:([Zz]|UTC|GMT)|([+-])(\d{2}):?(\d{2})?)?\s*$)");
  std::smatch m;
  if (!std::regex_match(s, m, kIso)) return std::nullopt;
  auto num = [&](int i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
  unsigned month = static_cast<unsigned>(num(2)), day = static_cast<unsigned>(num(3));
  int hour = num(4), minute = num(5), second = num(6);
  std::chrono::year_month_day ymd{std::chrono::year(num(1)), std::chrono::month(month),
                                  std::chrono::day(day)};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 59) return std::nullopt;
  double t = static_cast<double>(DaysFromCivil(num(1), month, day)) * 86400.0 + hour * 3600.0 +
             minute * 60.0 + second;
  if (m[7].matched) t += std::stod("0." + m[7].str());
  if (m[9].matched) {
    int offset = num(10) * 3600 + num(11) * 60;
    t += (m[9].str() == "+" ? -offset : offset);
  }
  return t;
}

bool LooksNumeric(const std::string& s) {
  static const std::regex kNumber(R"(^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$)");
  return std::regex_match(s, kNumber);
}

// --- serialization and parsing ------------------------------------------------

// Walks `v` along `shape`, keeping only modeled structure members (nulls dropped)
// and applying `on_timestamp` to timestamp leaves. Request serialization and
// response parsing differ only in how they treat timestamps.
template <typename Fn>
Json WalkByShape(const Shape& shape, const Json& v, const Fn& on_timestamp) {
  switch (shape.type) {
    case ShapeType::kStructure: {
      if (!v.is_object()) return v;
      Json out = Json::object();
      for (const auto& member : shape.members) {
        auto it = v.find(member.name);
        if (it == v.end() || it->is_null()) continue;
        out[member.name] = WalkByShape(*member.shape, *it, on_timestamp);
      }
      return out;
    }
    case ShapeType::kList: {
      if (!v.is_array()) return v;
      Json out = Json::array();
      for (const auto& e : v) out.push_back(WalkByShape(*shape.member, e, on_timestamp));
      return out;
    }
    case ShapeType::kMap: {
      if (!v.is_object()) return v;
      Json out = Json::object();
      for (const auto& [k, e] : v.items()) {
        if (!e.is_null()) out[k] = WalkByShape(*shape.value, e, on_timestamp);
      }
      return out;
    }
    case ShapeType::kTimestamp: {
      std::optional<double> t = ParseTimestamp(v);
      if (!t.has_value()) return v;
      return on_timestamp(*t);
    }
    default:
      return v;
  }
}

Json Serialize(const Shape& shape, const Json& v) {
  return WalkByShape(shape, v, [](double t) {
    // botocore sends whole seconds as an integer and keeps milliseconds otherwise.
    double ms = std::round(t * 1000.0) / 1000.0;
    if (ms == std::floor(ms)) return Json(static_cast<int64_t>(ms));
    return Json(ms);
  });
}

Json Parse(const Shape& shape, const Json& v) {
  return WalkByShape(shape, v, [](double t) { return Json(FormatIsoTimestamp(t)); });
}

Json SkeletonOf(const Shape& shape, bool for_output, const std::string& name,
                std::vector<const Shape*>& stack) {
  stack.push_back(&shape);
  Json out;
  switch (shape.type) {
    case ShapeType::kStructure:
      out = Json::object();
      // botocore stops at the second time a shape recurses into itself.
      if (std::count(stack.begin(), stack.end(), &shape) > 1) break;
      for (const auto& m : shape.members) {
        out[m.name] = SkeletonOf(*m.shape, for_output, m.name, stack);
      }
      break;
    case ShapeType::kList:
      out = Json::array(
          {SkeletonOf(*shape.member, for_output, for_output ? shape.member->name : "", stack)});
      break;
    case ShapeType::kMap:
      out = Json::object({{"KeyName", SkeletonOf(*shape.value, for_output, "", stack)}});
      break;
    case ShapeType::kString:
      if (for_output) {
        out = name;
      } else {
        out = shape.enum_values.empty() ? std::string() : shape.enum_values.front();
      }
      break;
    case ShapeType::kInteger:
    case ShapeType::kLong:
      out = 0;
      break;
    case ShapeType::kDouble:
    case ShapeType::kFloat:
      out = 0.0;
      break;
    case ShapeType::kBoolean:
      out = true;
      break;
    case ShapeType::kTimestamp:
      if (for_output) {
        out = 0;
      } else {
        out = "1970-01-01T00:00:00";
      }
      break;
    case ShapeType::kBlob:
      out = "";
      break;
  }
  stack.pop_back();
  return out;
}

}  // namespace

Status ValidateParams(const api::Shape& input, const Json& params) {
  Validator validator;
  validator.Validate(params, input, "");
  if (validator.errors.empty()) return OkStatus();
  std::string report = "Parameter validation failed:";
  for (const std::string& e : validator.errors) report += "\n" + e;
  return InvalidArgumentError(report);
}

Json SerializeRequest(const api::Shape& input, const Json& params) {
  return Serialize(input, params);
}

Json ParseResponse(const api::Shape& output, const Json& body) { return Parse(output, body); }

Json Skeleton(const api::Shape& shape, bool for_output) {
  std::vector<const Shape*> stack;
  return SkeletonOf(shape, for_output, "", stack);
}

std::optional<double> ParseTimestamp(const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const std::string& s = value.get_ref<const std::string&>();
  if (LooksNumeric(s)) return std::stod(s);
  return ParseIsoString(s);
}

std::string FormatIsoTimestamp(double epoch_seconds) {
  double whole;
  double frac = std::modf(epoch_seconds, &whole);
  auto seconds = static_cast<int64_t>(whole);
  auto micros = static_cast<int64_t>(std::nearbyint(frac * 1e6));  // half-even, as CPython
  if (micros >= 1000000) {
    seconds += 1;
    micros -= 1000000;
  } else if (micros < 0) {
    seconds -= 1;
    micros += 1000000;
  }
  int64_t days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400;
  int64_t rem = seconds - days * 86400;
  std::chrono::year_month_day ymd{std::chrono::sys_days(std::chrono::days(days))};
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d",
                        static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                        static_cast<unsigned>(ymd.day()), static_cast<int>(rem / 3600),
                        static_cast<int>(rem / 60 % 60), static_cast<int>(rem % 60));
  std::string out(buf, static_cast<size_t>(n));
  if (micros != 0) {
    std::snprintf(buf, sizeof(buf), ".%06lld", static_cast<long long>(micros));
    out += buf;
  }
  return out + "+00:00";
}

std::string PyStr(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  return PyRepr(value);
}

std::string PyRepr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::number_float:
      return PyFloat(value.get<double>());
    case Json::value_t::string:
      return PyQuote(value.get<std::string>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + PyRepr(value[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.items()) {
        out += (first ? "" : ", ") + PyQuote(k) + ": " + PyRepr(v);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

}  // namespace hpod::cli
