#include "hpod/cli/args.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "hpod/cli/shorthand.h"
#include "hpod/cli/slurm_nodes.h"

namespace hpod::cli {
namespace {

using api::Shape;
using api::ShapeType;

constexpr std::string_view kUsageMarker = "hpod.cli.UsageError";

bool IsOption(const std::string& word) { return word.size() > 2 && word.rfind("--", 0) == 0; }

bool IsScalar(const Shape& shape) {
  return shape.type != ShapeType::kStructure && shape.type != ShapeType::kList &&
         shape.type != ShapeType::kMap;
}

std::string TrimLeft(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b);
}

// Strict integer: optional sign and digits, nothing else (no spaces, no "1e3").
std::optional<int64_t> ParseInt(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseDouble(const std::string& s) {
  static const std::regex kFloat(R"([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)");
  if (!std::regex_match(s, kFloat)) return std::nullopt;
  return std::stod(s);
}

Status ParamError(const std::string& cli_name, const std::string& message) {
  return InvalidArgumentError("Error parsing parameter '" + cli_name + "': " + message);
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

// One member's value from its words (awscli's unpack_cli_arg + shorthand hook).
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

// --- global options --------------------------------------------------------------

enum class GlobalArg { kNone, kValue, kOptionalValue };

struct GlobalSpec {
  std::string_view name;
  GlobalArg arg;
};

constexpr GlobalSpec kGlobals[] = {
    {"--endpoint-url", GlobalArg::kValue},
    {"--region", GlobalArg::kValue},
    {"--profile", GlobalArg::kValue},
    {"--output", GlobalArg::kValue},
    {"--query", GlobalArg::kValue},
    {"--no-sign-request", GlobalArg::kNone},
    {"--debug", GlobalArg::kNone},
    {"--no-paginate", GlobalArg::kNone},
    {"--cli-read-timeout", GlobalArg::kValue},
    {"--cli-connect-timeout", GlobalArg::kValue},
    {"--version", GlobalArg::kNone},
    {"--help", GlobalArg::kNone},
    {"--color", GlobalArg::kValue},
    {"--no-cli-pager", GlobalArg::kNone},
};

const GlobalSpec* FindGlobal(std::string_view name) {
  for (const auto& g : kGlobals) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

Status CheckChoice(std::string_view option, const std::string& value,
                   std::initializer_list<std::string_view> choices) {
  for (auto c : choices) {
    if (c == value) return OkStatus();
  }
  std::string list;
  for (auto c : choices)
    list += (list.empty() ? "" : ", ") + std::string("'") + std::string(c) + "'";
  return UsageError("argument " + std::string(option) + ": Invalid choice: '" + value +
                    "' (choose from " + list + ")");
}

// Removes the global options from `args` (wherever they are) into `g`.
StatusOr<std::vector<std::string>> ExtractGlobals(const std::vector<std::string>& args,
                                                  GlobalOptions& g, bool& version, bool& help) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "-h") {
      help = true;
      continue;
    }
    if (!IsOption(word)) {
      rest.push_back(word);
      continue;
    }
    size_t eq = word.find('=');
    std::string name = word.substr(0, eq);
    const GlobalSpec* spec = FindGlobal(name);
    if (spec == nullptr) {
      rest.push_back(word);
      continue;
    }
    std::optional<std::string> value;
    if (eq != std::string::npos) value = word.substr(eq + 1);
    if (spec->arg == GlobalArg::kNone && value.has_value()) {
      return UsageError("argument " + name + ": ignored explicit argument '" + *value + "'");
    }
    if (spec->arg == GlobalArg::kValue && !value.has_value()) {
      if (i + 1 >= args.size() || IsOption(args[i + 1])) {
        return UsageError("argument " + name + ": expected one argument");
      }
      value = args[++i];
    }
    if (name == "--endpoint-url") g.config.endpoint_url = value;
    if (name == "--region") g.config.region = value;
    if (name == "--profile") g.config.profile = value;
    if (name == "--output") {
      HPOD_RETURN_IF_ERROR(CheckChoice(name, *value, {"json", "text", "table"}));
      g.config.output = value;
    }
    if (name == "--query") g.query = value;
    if (name == "--color") HPOD_RETURN_IF_ERROR(CheckChoice(name, *value, {"on", "off", "auto"}));
    if (name == "--no-sign-request") g.no_sign_request = true;
    if (name == "--debug") g.debug = true;
    if (name == "--no-paginate") g.no_paginate = true;
    if (name == "--version") version = true;
    if (name == "--help") help = true;
    if (name == "--cli-read-timeout" || name == "--cli-connect-timeout") {
      std::optional<int64_t> n = ParseInt(*value);
      if (!n.has_value() || *n < 0) {
        return UsageError("argument " + name + ": invalid int value: '" + *value + "'");
      }
      (name == "--cli-read-timeout" ? g.read_timeout_s : g.connect_timeout_s) = n;
    }
  }
  return rest;
}

// Collects the words of one option: its "=value" or the following non-option words.
std::vector<std::string> TakeValues(const std::vector<std::string>& words, size_t& i,
                                    const std::optional<std::string>& inline_value, bool many) {
  if (inline_value.has_value()) return {*inline_value};
  std::vector<std::string> values;
  while (i + 1 < words.size() && !IsOption(words[i + 1])) {
    values.push_back(words[++i]);
    if (!many) break;
  }
  return values;
}

Status ParseOperationArgs(const std::vector<std::string>& words, const Environment& env,
                          Invocation& inv) {
  const api::Operation& op = *inv.operation;
  const Shape& input = *op.input;
  const bool paginated = op.paginator.has_value();
  std::map<std::string, Json> given;  // member name -> value, from explicit flags
  std::vector<std::string> unknown;
  std::optional<Json> cli_input;
  bool manual_paging = false;

  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (!IsOption(word)) {
      if (word == "help") {
        inv.kind = Invocation::Kind::kHelp;
        inv.help_topic = XformName(op.name);
        return OkStatus();
      }
      unknown.push_back(word);
      continue;
    }
    size_t eq = word.find('=');
    std::string name = word.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = word.substr(eq + 1);

    auto one_value = [&]() -> StatusOr<std::string> {
      std::vector<std::string> v = TakeValues(words, i, inline_value, false);
      if (v.empty()) return UsageError("argument " + name + ": expected one argument");
      return v[0];
    };
    if (name == "--cli-input-json") {
      HPOD_ASSIGN_OR_RETURN(std::string raw, one_value());
      HPOD_ASSIGN_OR_RETURN(std::optional<std::string> file, LoadParamFile(raw, env));
      if (file.has_value()) raw = *file;
      Json parsed = Json::parse(raw, nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        return ParamError("--cli-input-json", "Invalid JSON received: expected a JSON object");
      }
      cli_input = std::move(parsed);
      continue;
    }
    if (name == "--generate-cli-skeleton") {
      std::string mode = "input";
      if (inline_value.has_value()) {
        mode = *inline_value;
      } else if (i + 1 < words.size() && !IsOption(words[i + 1]) && words[i + 1] != "help") {
        mode = words[++i];
      }
      HPOD_RETURN_IF_ERROR(CheckChoice(name, mode, {"input", "output"}));
      inv.skeleton = mode;
      continue;
    }
    if (paginated && name == "--starting-token") {
      HPOD_ASSIGN_OR_RETURN(std::string v, one_value());
      inv.pagination.starting_token = v;
      continue;
    }
    if (paginated && (name == "--page-size" || name == "--max-items")) {
      HPOD_ASSIGN_OR_RETURN(std::string v, one_value());
      std::optional<int64_t> n = ParseInt(v);
      if (!n.has_value())
        return UsageError("argument " + name + ": invalid int value: '" + v + "'");
      (name == "--page-size" ? inv.pagination.page_size : inv.pagination.max_items) = n;
      continue;
    }
    // Model members: --member, and --no-member for booleans.
    const api::Member* member = nullptr;
    bool negated = false;
    for (const auto& m : input.members) {
      std::string flag = "--" + XformName(m.name);
      if (flag == name) member = &m;
      if (m.shape->type == ShapeType::kBoolean && "--no-" + XformName(m.name) == name) {
        member = &m;
        negated = true;
      }
    }
    if (member == nullptr) {
      unknown.push_back(word);
      // Like argparse's unknown-args list, the option's words come along.
      std::vector<std::string> dropped = TakeValues(words, i, std::nullopt, true);
      unknown.insert(unknown.end(), dropped.begin(), dropped.end());
      continue;
    }
    if (paginated &&
        (member->name == op.paginator->input_token || member->name == op.paginator->limit_key)) {
      manual_paging = true;
    }
    if (member->shape->type == ShapeType::kBoolean) {
      if (inline_value.has_value()) {
        return UsageError("argument " + name + ": ignored explicit argument '" + *inline_value +
                          "'");
      }
      given[member->name] = !negated;
      continue;
    }
    bool many = member->shape->type == ShapeType::kList;
    std::vector<std::string> values = TakeValues(words, i, inline_value, many);
    if (values.empty()) {
      return UsageError("argument " + name + ": expected " +
                        (many ? "at least one argument" : "one argument"));
    }
    HPOD_ASSIGN_OR_RETURN(Json value, ParseMemberValue(name, values, *member->shape, env));
    given[member->name] = std::move(value);
  }

  // argparse checks required arguments before reporting unknown ones; both are
  // skipped when the request comes from --cli-input-json or only a skeleton is
  // wanted (the CLI's OverrideRequiredArgsArgument), leaving validation to report.
  bool override_required = cli_input.has_value() || inv.skeleton == "input";
  if (!override_required) {
    std::string missing;
    for (const auto& m : input.members) {
      if (input.IsRequired(m.name) && given.find(m.name) == given.end()) {
        missing += (missing.empty() ? "--" : ", --") + XformName(m.name);
      }
    }
    if (!missing.empty()) return UsageError("the following arguments are required: " + missing);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    return UsageError("Unknown options: " + list);
  }

  inv.params = cli_input.value_or(Json::object());
  for (const auto& m : input.members) {
    auto it = given.find(m.name);
    if (it != given.end()) inv.params[m.name] = it->second;
  }
  if (paginated) {
    // AWS CLI v2: pagination members in --cli-input-json turn auto-pagination off.
    if (cli_input.has_value() && (cli_input->contains(op.paginator->input_token) ||
                                  cli_input->contains(op.paginator->limit_key))) {
      manual_paging = true;
    }
    inv.paginate = !inv.globals.no_paginate && !manual_paging;
    if (!inv.paginate) {
      std::string used;
      auto note = [&](bool set, std::string_view flag) {
        if (set) used += (used.empty() ? "" : ", ") + std::string(flag);
      };
      note(inv.pagination.starting_token.has_value() && !inv.pagination.starting_token->empty(),
           "--starting-token");
      note(inv.pagination.page_size.has_value() && *inv.pagination.page_size != 0, "--page-size");
      note(inv.pagination.max_items.has_value() && *inv.pagination.max_items != 0, "--max-items");
      if (!used.empty()) {
        return InvalidArgumentError(
            "Cannot specify --no-paginate along with pagination arguments: " + used);
      }
    }
  }
  return OkStatus();
}

Status ParseWaitArgs(const std::vector<std::string>& words, Invocation& inv) {
  std::vector<std::string> unknown;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "help") {
      inv.kind = Invocation::Kind::kHelp;
      inv.help_topic = "wait " + std::string(WaiterName(inv.waiter));
      return OkStatus();
    }
    size_t eq = word.find('=');
    std::string name = word.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = word.substr(eq + 1);
    if (name != "--cluster-name" && name != "--timeout" && name != "--delay") {
      unknown.push_back(word);
      if (IsOption(word)) {
        std::vector<std::string> dropped = TakeValues(words, i, std::nullopt, true);
        unknown.insert(unknown.end(), dropped.begin(), dropped.end());
      }
      continue;
    }
    std::vector<std::string> v = TakeValues(words, i, inline_value, false);
    if (v.empty()) return UsageError("argument " + name + ": expected one argument");
    if (name == "--cluster-name") {
      inv.cluster_name = v[0];
      continue;
    }
    std::optional<int64_t> n = ParseInt(v[0]);
    if (!n.has_value() || *n < (name == "--delay" ? 1 : 0)) {
      return UsageError("argument " + name + ": invalid int value: '" + v[0] + "'");
    }
    (name == "--timeout" ? inv.wait_timeout : inv.wait_delay) = std::chrono::seconds(*n);
  }
  if (inv.cluster_name.empty()) {
    return UsageError("the following arguments are required: --cluster-name");
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    return UsageError("Unknown options: " + list);
  }
  return OkStatus();
}

// Options of the hand-written commands: name -> takes a value.
struct SimpleOption {
  std::string_view name;
  bool takes_value;
};

// Parses `words` against `options` into `values` (flags map to ""), the way
// ParseWaitArgs does; "help" anywhere turns the invocation into a help request.
StatusOr<bool> ParseSimpleArgs(const std::vector<std::string>& words,
                               std::initializer_list<SimpleOption> options,
                               std::map<std::string, std::string>& values) {
  std::vector<std::string> unknown;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "help") return true;
    size_t eq = word.find('=');
    std::string name = word.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = word.substr(eq + 1);
    const SimpleOption* spec = nullptr;
    for (const auto& o : options) {
      if (o.name == name) spec = &o;
    }
    if (spec == nullptr || !IsOption(word)) {
      unknown.push_back(word);
      if (IsOption(word)) {
        std::vector<std::string> dropped = TakeValues(words, i, std::nullopt, true);
        unknown.insert(unknown.end(), dropped.begin(), dropped.end());
      }
      continue;
    }
    if (!spec->takes_value) {
      if (inline_value.has_value()) {
        return UsageError("argument " + name + ": ignored explicit argument '" + *inline_value +
                          "'");
      }
      values[name] = "";
      continue;
    }
    std::vector<std::string> v = TakeValues(words, i, inline_value, false);
    if (v.empty()) return UsageError("argument " + name + ": expected one argument");
    values[name] = v[0];
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    return UsageError("Unknown options: " + list);
  }
  return false;
}

Status RequireOptions(const std::map<std::string, std::string>& values,
                      std::initializer_list<std::string_view> required) {
  std::string missing;
  for (auto r : required) {
    if (values.count(std::string(r)) == 0) {
      missing += (missing.empty() ? "" : ", ") + std::string(r);
    }
  }
  if (!missing.empty()) return UsageError("the following arguments are required: " + missing);
  return OkStatus();
}

// `aws ssm start-session` flags where they overlap (--target, --reason, which is
// accepted and ignored), plus --command for hpod's non-interactive mode.
Status ParseStartSessionArgs(const std::vector<std::string>& words, bool help, Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(
      bool help_word,
      ParseSimpleArgs(words, {{"--target", true}, {"--command", true}, {"--reason", true}},
                      values));
  if (help || help_word) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = "start-session";
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(RequireOptions(values, {"--target"}));
  inv.kind = Invocation::Kind::kStartSession;
  inv.session_request = Json::object({{"Target", values["--target"]}});
  if (values.count("--command") != 0) inv.session_request["Command"] = values["--command"];
  return OkStatus();
}

Status ParseLogsArgs(const std::vector<std::string>& words, bool help, Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(
      bool help_word,
      ParseSimpleArgs(
          words,
          {{"--cluster-name", true}, {"--node-id", true}, {"--stream", true}, {"--follow", false}},
          values));
  if (help || help_word) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = "logs";
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(RequireOptions(values, {"--cluster-name", "--node-id"}));
  inv.kind = Invocation::Kind::kLogs;
  inv.cluster_name = values["--cluster-name"];
  inv.node_id = values["--node-id"];
  if (values.count("--stream") != 0) {
    HPOD_RETURN_IF_ERROR(CheckChoice("--stream", values["--stream"], {"LifecycleConfig", "Agent"}));
    inv.log_stream = values["--stream"];
  }
  inv.follow = values.count("--follow") != 0;
  return OkStatus();
}

std::string VerbChoices() {
  std::vector<std::string> verbs;
  for (const api::Operation* op : api::ServiceModel::Get().operations()) {
    verbs.push_back(XformName(op->name));
  }
  verbs.push_back("wait");
  verbs.push_back("start-session");
  verbs.push_back("logs");
  std::sort(verbs.begin(), verbs.end());
  std::string out;
  for (const auto& v : verbs) out += "\n  " + v;
  return out;
}

}  // namespace

std::string XformName(std::string_view name) {
  std::string s(name);
  if (s.find('-') != std::string::npos) return s;
  static const std::regex kSpecial("[A-Z]{2,}s$");
  static const std::regex kFirstCap("(.)([A-Z][a-z]+)");
  static const std::regex kEndCap("([a-z0-9])([A-Z])");
  std::smatch m;
  if (std::regex_search(s, m, kSpecial)) {
    std::string matched = m.str(0);
    std::transform(matched.begin(), matched.end(), matched.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    s = s.substr(0, s.size() - matched.size()) + "-" + matched;
  }
  s = std::regex_replace(s, kFirstCap, "$1-$2");
  s = std::regex_replace(s, kEndCap, "$1-$2");
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

const api::Operation* FindOperationByVerb(std::string_view verb) {
  for (const api::Operation* op : api::ServiceModel::Get().operations()) {
    if (XformName(op->name) == verb) return op;
  }
  return nullptr;
}

Status UsageError(std::string message) {
  return InvalidArgumentError(std::move(message)).WithAwsType(std::string(kUsageMarker));
}

bool IsUsageError(const Status& status) { return status.aws_type() == kUsageMarker; }

std::string_view WaiterName(Waiter waiter) {
  return waiter == Waiter::kClusterInService ? "cluster-in-service" : "cluster-deleted";
}

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

StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args,
                                      const Environment& env) {
  Invocation inv;
  bool version = false, help = false;
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> words,
                        ExtractGlobals(args, inv.globals, version, help));
  if (inv.globals.query.has_value()) {
    StatusOr<Expression> q = Expression::Compile(*inv.globals.query);
    if (!q.ok()) {
      return InvalidArgumentError("Bad value for --query " + *inv.globals.query + ": " +
                                  q.status().message());
    }
    inv.query = *std::move(q);
  }
  if (version) {
    inv.kind = Invocation::Kind::kVersion;
    return inv;
  }
  size_t pos = 0;
  if (pos < words.size() && words[pos] == "sagemaker") ++pos;
  if (pos >= words.size() || words[pos] == "help") {
    if (!help && pos >= words.size()) {
      return UsageError("the following arguments are required: command");
    }
    inv.kind = Invocation::Kind::kHelp;
    return inv;
  }
  const std::string verb = words[pos++];
  std::vector<std::string> rest(words.begin() + static_cast<long>(pos), words.end());
  if (verb == "wait") {
    if (rest.empty() || rest[0] == "help" || (IsOption(rest[0]) && help)) {
      inv.kind = Invocation::Kind::kHelp;
      inv.help_topic = "wait";
      return inv;
    }
    if (rest[0] == "cluster-in-service") {
      inv.waiter = Waiter::kClusterInService;
    } else if (rest[0] == "cluster-deleted") {
      inv.waiter = Waiter::kClusterDeleted;
    } else {
      return UsageError(
          "argument waiter_name: Invalid choice, valid choices are:\n\n"
          "  cluster-deleted\n  cluster-in-service");
    }
    if (help) {
      inv.kind = Invocation::Kind::kHelp;
      inv.help_topic = "wait " + rest[0];
      return inv;
    }
    inv.kind = Invocation::Kind::kWait;
    rest.erase(rest.begin());
    HPOD_RETURN_IF_ERROR(ParseWaitArgs(rest, inv));
    return inv;
  }
  if (verb == "start-session") {
    HPOD_RETURN_IF_ERROR(ParseStartSessionArgs(rest, help, inv));
    return inv;
  }
  if (verb == "logs") {
    HPOD_RETURN_IF_ERROR(ParseLogsArgs(rest, help, inv));
    return inv;
  }
  inv.operation = FindOperationByVerb(verb);
  if (inv.operation == nullptr) {
    if (help) {
      inv.kind = Invocation::Kind::kHelp;
      return inv;
    }
    return UsageError("argument command: Invalid choice '" + verb + "', valid choices are:\n" +
                      VerbChoices());
  }
  if (help) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = verb;
    return inv;
  }
  inv.kind = Invocation::Kind::kOperation;
  if (inv.operation->name == "ListClusterNodes") inv.with_slurm = TakeWithSlurmFlag(rest);
  HPOD_RETURN_IF_ERROR(ParseOperationArgs(rest, env, inv));
  HPOD_RETURN_IF_ERROR(CheckWithSlurm(inv));
  return inv;
}

}  // namespace hpod::cli
