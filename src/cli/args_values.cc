// An option's words -> a member value, by the member's shape (args_internal.h),
// and file:// parameters.

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "hpod/cli/args_internal.h"
#include "hpod/cli/shorthand.h"

namespace hpod::cli {
namespace internal {
namespace {

using api::Shape;
using api::ShapeType;

bool IsScalar(const Shape& shape) {
  return shape.type != ShapeType::kStructure && shape.type != ShapeType::kList &&
         shape.type != ShapeType::kMap;
}

std::string TrimLeft(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b);
}

std::optional<double> ParseDouble(const std::string& s) {
  static const std::regex kFloat(R"([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)");
  if (!std::regex_match(s, kFloat)) return std::nullopt;
  return std::stod(s);
}

StatusOr<Json> ParseJsonValue(const std::string& cli_name, const std::string& value) {
  Json parsed = Json::parse(value, nullptr, false);
  if (!parsed.is_discarded()) return parsed;
  // Re-parse with exceptions only to obtain nlohmann's description of the problem.
  std::string why;
  try {
    Json unused = Json::parse(value);
    (void)unused;
  } catch (const Json::parse_error& e) {
    why = e.what();
  }
  return ParamError(cli_name, "Invalid JSON: " + why + "\nJSON received: " + value);
}

// "InstanceCount" for ".InstanceCount": paths are built with a leading '.'.
std::string DisplayPath(const std::string& path) {
  return !path.empty() && path[0] == '.' ? path.substr(1) : path;
}

// awscli's BackCompatVisitor, plus strict numbers: shorthand leaves are strings,
// the model says which should be integers, booleans or single-element lists.
Status Coerce(Json& v, const Shape& shape, const std::string& cli_name, const std::string& path) {
  switch (shape.type) {
    case ShapeType::kStructure:
      if (!v.is_object()) return OkStatus();
      for (const auto& m : shape.members) {
        auto it = v.find(m.name);
        if (it == v.end() || it->is_null()) continue;
        HPOD_RETURN_IF_ERROR(Coerce(*it, *m.shape, cli_name, path + "." + m.name));
      }
      return OkStatus();
    case ShapeType::kList:
      if (v.is_null()) return OkStatus();
      if (!v.is_array()) v = Json::array({v});
      for (size_t i = 0; i < v.size(); ++i) {
        HPOD_RETURN_IF_ERROR(
            Coerce(v[i], *shape.member, cli_name, path + "[" + std::to_string(i) + "]"));
      }
      return OkStatus();
    case ShapeType::kMap:
      if (!v.is_object()) return OkStatus();
      for (auto& [k, e] : v.items()) {
        HPOD_RETURN_IF_ERROR(Coerce(e, *shape.value, cli_name, path + "." + k));
      }
      return OkStatus();
    case ShapeType::kInteger:
    case ShapeType::kLong: {
      if (!v.is_string()) return OkStatus();
      std::optional<int64_t> n = ParseInt(v.get<std::string>());
      if (!n.has_value()) {
        return ParamError(cli_name, "expected an integer for " + DisplayPath(path) +
                                        ", received: '" + v.get<std::string>() + "'");
      }
      v = *n;
      return OkStatus();
    }
    case ShapeType::kDouble:
    case ShapeType::kFloat: {
      if (!v.is_string()) return OkStatus();
      std::optional<double> d = ParseDouble(v.get<std::string>());
      if (!d.has_value()) {
        return ParamError(cli_name, "expected a number for " + DisplayPath(path) + ", received: '" +
                                        v.get<std::string>() + "'");
      }
      v = *d;
      return OkStatus();
    }
    case ShapeType::kBoolean: {
      if (!v.is_string()) return OkStatus();
      std::string lower = v.get<std::string>();
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      // Anything else stays a string and fails validation with the value shown.
      if (lower == "true") v = true;
      if (lower == "false") v = false;
      return OkStatus();
    }
    default:
      return OkStatus();
  }
}

StatusOr<Json> ParseShorthandValue(const std::string& cli_name, const std::string& value,
                                   const Shape& shape, const Environment& env) {
  // awscli special case: a structure whose only member is a string "Value".
  if (shape.type == ShapeType::kStructure && shape.members.size() == 1 &&
      shape.members[0].name == "Value" && shape.members[0].shape->type == ShapeType::kString &&
      value.find('=') == std::string::npos) {
    return Json::object({{"Value", value}});
  }
  ShorthandOptions options;
  options.load_param_file = [&env](std::string_view v) { return LoadParamFile(v, env); };
  StatusOr<Json> parsed = ParseShorthand(value, options);
  if (!parsed.ok()) return ParamError(cli_name, parsed.status().message());
  Json v = *std::move(parsed);
  HPOD_RETURN_IF_ERROR(Coerce(v, shape, cli_name, ""));
  return v;
}

StatusOr<Json> ParseScalar(const std::string& cli_name, const std::string& word,
                           const Shape& shape) {
  switch (shape.type) {
    case ShapeType::kInteger:
    case ShapeType::kLong: {
      std::optional<int64_t> n = ParseInt(word);
      if (!n.has_value()) {
        return UsageError("argument " + cli_name + ": invalid int value: '" + word + "'");
      }
      return Json(*n);
    }
    case ShapeType::kDouble:
    case ShapeType::kFloat: {
      std::optional<double> d = ParseDouble(word);
      if (!d.has_value()) {
        return UsageError("argument " + cli_name + ": invalid float value: '" + word + "'");
      }
      return Json(*d);
    }
    case ShapeType::kBoolean: {
      // Only reachable inside lists; top-level booleans are --flag/--no-flag.
      std::string lower = word;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      return Json(lower != "false");
    }
    default:
      return Json(word);
  }
}

}  // namespace

std::optional<int64_t> ParseInt(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

Status ParamError(const std::string& cli_name, const std::string& message) {
  return InvalidArgumentError("Error parsing parameter '" + cli_name + "': " + message);
}

StatusOr<Json> ParseMemberValue(const std::string& cli_name, std::vector<std::string> words,
                                const Shape& shape, const Environment& env) {
  bool from_file = false;
  if (words.size() == 1) {
    StatusOr<std::optional<std::string>> file = LoadParamFile(words[0], env);
    if (!file.ok()) return ParamError(cli_name, file.status().message());
    if (file->has_value()) {
      words[0] = **file;
      from_file = true;
    }
  }
  if (IsScalar(shape)) return ParseScalar(cli_name, words[0], shape);
  const std::string first = TrimLeft(words[0]);
  if (shape.type == ShapeType::kList) {
    if (words.size() == 1 && !first.empty() && first[0] == '[') {
      return ParseJsonValue(cli_name, words[0]);
    }
    const Shape& member = *shape.member;
    Json list = Json::array();
    if (IsScalar(member)) {
      // A file holding "a b c" lists three values (the AWS CLI would iterate the
      // characters of the text; whitespace-separated words are what users mean).
      if (from_file) {
        std::istringstream in(words[0]);
        words.assign(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>());
      }
      for (const auto& w : words) {
        HPOD_ASSIGN_OR_RETURN(Json v, ParseScalar(cli_name, w, member));
        list.push_back(std::move(v));
      }
      return list;
    }
    // Complex elements: JSON when the first word looks like JSON, else shorthand.
    bool json = !first.empty() && (first[0] == '{' || first[0] == '[');
    for (const auto& w : words) {
      if (json) {
        std::string t = TrimLeft(w);
        if (member.type == ShapeType::kStructure && (t.empty() || t[0] != '{')) {
          return ParamError(cli_name, "Invalid JSON:\n" + w);
        }
        HPOD_ASSIGN_OR_RETURN(Json v, ParseJsonValue(cli_name, w));
        list.push_back(std::move(v));
      } else {
        HPOD_ASSIGN_OR_RETURN(Json v, ParseShorthandValue(cli_name, w, member, env));
        list.push_back(std::move(v));
      }
    }
    return list;
  }
  // Structure or map: a single value.
  if (!first.empty() && first[0] == '{') return ParseJsonValue(cli_name, words[0]);
  if (!first.empty() && first[0] == '[') return ParamError(cli_name, "Invalid JSON:\n" + words[0]);
  return ParseShorthandValue(cli_name, words[0], shape, env);
}

}  // namespace internal

StatusOr<std::optional<std::string>> LoadParamFile(std::string_view value, const Environment& env) {
  std::string_view prefix;
  if (value.rfind("file://", 0) == 0) prefix = "file://";
  if (value.rfind("fileb://", 0) == 0) prefix = "fileb://";
  if (prefix.empty()) return std::optional<std::string>();
  std::string path = ExpandPath(value.substr(prefix.size()), env);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    return InvalidArgumentError("Unable to load paramfile " + std::string(value) + ": [Errno " +
                                std::to_string(err) + "] " + std::strerror(err) + ": '" + path +
                                "'");
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::optional<std::string>(buf.str());
}

}  // namespace hpod::cli
