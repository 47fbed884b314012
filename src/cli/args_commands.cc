// Each command's own options (args_internal.h): the operations derived from the
// model, then the hand-written wait, start-session, logs, inject-fault,
// create-join-token, describe-recovery and describe-job-goodput.

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "hpod/base/duration.h"
#include "hpod/cli/args_internal.h"

namespace hpod::cli::internal {
namespace {

using api::Shape;
using api::ShapeType;

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

}  // namespace

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

// `aws ssm start-session` flags where they overlap (--target, --reason, which is
// accepted and ignored), plus --command for hpod's non-interactive mode and
// --user for a shell as a cluster user.
Status ParseStartSessionArgs(const std::vector<std::string>& words, bool help, Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(
      bool help_word,
      ParseSimpleArgs(
          words, {{"--target", true}, {"--command", true}, {"--user", true}, {"--reason", true}},
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
  if (values.count("--user") != 0) inv.session_request["User"] = values["--user"];
  return OkStatus();
}

// The friendly form of HpodInjectFault; it becomes that operation's request, so
// output, --query and errors work as for `hpod hpod-inject-fault`.
Status ParseInjectFaultArgs(const std::vector<std::string>& words, bool help, Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(bool help_word, ParseSimpleArgs(words,
                                                        {{"--cluster-name", true},
                                                         {"--node-id", true},
                                                         {"--kind", true},
                                                         {"--seconds", true},
                                                         {"--xid-code", true}},
                                                        values));
  if (help || help_word) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = "inject-fault";
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(RequireOptions(values, {"--cluster-name", "--node-id", "--kind"}));
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodInjectFault");
  const api::Member* kind = op == nullptr ? nullptr : op->input->FindMember("Kind");
  if (kind == nullptr) return InternalError("the model has no HpodInjectFault operation");
  // The choices are the model's enum, the one list of fault kinds.
  const std::vector<std::string>& kinds = kind->shape->enum_values;
  const std::string& k = values["--kind"];
  if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) {
    std::string list;
    for (const auto& c : kinds) list += (list.empty() ? "'" : ", '") + c + "'";
    return UsageError("argument --kind: Invalid choice: '" + k + "' (choose from " + list + ")");
  }
  Json params = {
      {"ClusterName", values["--cluster-name"]}, {"NodeId", values["--node-id"]}, {"Kind", k}};
  for (const auto& [flag, member] :
       {std::pair<std::string, std::string>{"--seconds", "Seconds"}, {"--xid-code", "XidCode"}}) {
    if (values.count(flag) == 0) continue;
    std::optional<int64_t> n = ParseInt(values[flag]);
    if (!n.has_value()) {
      return UsageError("argument " + flag + ": invalid int value: '" + values[flag] + "'");
    }
    params[member] = *n;
  }
  if (k == "partition" && !params.contains("Seconds")) {
    return UsageError("--kind partition needs --seconds N: how long the node's link stays down");
  }
  if (k == "gpu-xid" && !params.contains("XidCode")) {
    return UsageError("--kind gpu-xid needs --xid-code N: the Xid to report, e.g. 79");
  }
  inv.kind = Invocation::Kind::kOperation;
  inv.operation = op;
  inv.params = std::move(params);
  return OkStatus();
}

StatusOr<int64_t> ParseDurationSeconds(std::string_view option, std::string_view value,
                                       int64_t min_s, int64_t max_s) {
  // base's parser (hpodd's flags use it too); here its refusal is a usage error.
  StatusOr<int64_t> seconds = hpod::ParseDurationSeconds(option, value, min_s, max_s);
  if (!seconds.ok()) return UsageError(std::string(seconds.status().message()));
  return seconds;
}

// The friendly form of HpodCreateJoinToken (admin); it becomes that operation's
// request, so errors and --output json|table work as for
// `hpod hpod-create-join-token`. Unless the whole response is asked for
// (--output json or table given on the command line, or --query), only the
// JoinToken is printed, so that TOKEN=$(hpod create-join-token) works whatever
// AWS_DEFAULT_OUTPUT or the profile say.
Status ParseCreateJoinTokenArgs(const std::vector<std::string>& words, bool help, Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(bool help_word, ParseSimpleArgs(words,
                                                        {{"--pool", true},
                                                         {"--ttl", true},
                                                         {"--uses", true},
                                                         {"--description", true},
                                                         {"--instance-type", true}},
                                                        values));
  if (help || help_word) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = "create-join-token";
    return OkStatus();
  }
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodCreateJoinToken");
  const api::Member* ttl = op == nullptr ? nullptr : op->input->FindMember("TtlSeconds");
  if (ttl == nullptr) return InternalError("the model has no HpodCreateJoinToken operation");
  Json params = Json::object();
  if (values.count("--pool") != 0) params["Pool"] = values["--pool"];
  if (values.count("--ttl") != 0) {
    // The bounds are the model's, the one place the token lifetime is limited.
    HPOD_ASSIGN_OR_RETURN(
        int64_t seconds,
        ParseDurationSeconds("--ttl", values["--ttl"], ttl->shape->min.value_or(1),
                             ttl->shape->max.value_or(std::numeric_limits<int64_t>::max())));
    params["TtlSeconds"] = seconds;
  }
  if (values.count("--uses") != 0) {
    std::optional<int64_t> n = ParseInt(values["--uses"]);
    if (!n.has_value()) {
      return UsageError("argument --uses: invalid int value: '" + values["--uses"] + "'");
    }
    params["Uses"] = *n;  // its range is checked against the model before sending
  }
  if (values.count("--description") != 0) params["Description"] = values["--description"];
  // Checked against the model's enum before sending, as every member is.
  if (values.count("--instance-type") != 0) params["InstanceType"] = values["--instance-type"];
  inv.kind = Invocation::Kind::kOperation;
  inv.operation = op;
  inv.params = std::move(params);
  const std::optional<std::string>& output = inv.globals.config.output;
  if (!inv.globals.query.has_value() && (!output.has_value() || *output == "text")) {
    inv.bare_member = "JoinToken";
  }
  return OkStatus();
}

Status ParseDescribeJobGoodputArgs(const std::vector<std::string>& words, bool help,
                                   Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(
      bool help_word,
      ParseSimpleArgs(words, {{"--cluster-name", true}, {"--job-id", true}}, values));
  if (help || help_word) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = "describe-job-goodput";
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(RequireOptions(values, {"--cluster-name", "--job-id"}));
  inv.kind = Invocation::Kind::kDescribeJobGoodput;
  inv.cluster_name = values["--cluster-name"];
  inv.job_id = values["--job-id"];
  return OkStatus();
}

Status ParseDescribeRecoveryArgs(const std::vector<std::string>& words, bool help,
                                 Invocation& inv) {
  std::map<std::string, std::string> values;
  HPOD_ASSIGN_OR_RETURN(
      bool help_word,
      ParseSimpleArgs(
          words, {{"--cluster-name", true}, {"--recovery-id", true}, {"--node-id", true}}, values));
  if (help || help_word) {
    inv.kind = Invocation::Kind::kHelp;
    inv.help_topic = "describe-recovery";
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(RequireOptions(values, {"--cluster-name"}));
  if ((values.count("--recovery-id") != 0) == (values.count("--node-id") != 0)) {
    return UsageError(
        "describe-recovery needs one of --recovery-id rcv-... or --node-id i-... (that node's "
        "latest recovery)");
  }
  inv.kind = Invocation::Kind::kDescribeRecovery;
  inv.cluster_name = values["--cluster-name"];
  inv.recovery_id = values["--recovery-id"];
  inv.node_id = values["--node-id"];
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

}  // namespace hpod::cli::internal
