// The command line's entry point: global options, verb dispatch and names. The
// values of members are parsed in args_values.cc, each command's options in
// args_commands.cc.

#include "hpod/cli/args.h"

#include <algorithm>
#include <array>
#include <regex>

#include "hpod/cli/args_internal.h"
#include "hpod/cli/slurm_nodes.h"

namespace hpod::cli {

using internal::CheckChoice;
using internal::IsOption;
using internal::ParseInt;

namespace {

constexpr std::string_view kUsageMarker = "hpod.cli.UsageError";

// --- global options --------------------------------------------------------------

enum class GlobalArg { kNone, kValue, kOptionalValue };

struct GlobalSpec {
  std::string_view name;
  GlobalArg arg;
};

constexpr GlobalSpec kGlobals[] = {
    {"--endpoint-url", GlobalArg::kValue},
    {"--ca-bundle", GlobalArg::kValue},
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
    if (name == "--ca-bundle") g.config.ca_bundle = value;
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

// hpod's own operations that also answer to their name without `hpod-`.
constexpr std::array<std::string_view, 8> kFriendlyVerbs = {
    "get-caller-identity", "list-training-runs", "get-training-metrics", "list-hosts",
    "describe-host",       "release-host",       "retire-host",          "revoke-host"};

std::string VerbChoices() {
  std::vector<std::string> verbs;
  for (const api::Operation* op : api::ServiceModel::Get().operations()) {
    verbs.push_back(XformName(op->name));
  }
  verbs.push_back("wait");
  verbs.push_back("start-session");
  verbs.push_back("logs");
  verbs.push_back("inject-fault");
  verbs.push_back("create-join-token");
  verbs.push_back("describe-recovery");
  verbs.push_back("describe-job-goodput");
  for (std::string_view v : kFriendlyVerbs) verbs.emplace_back(v);
  std::sort(verbs.begin(), verbs.end());
  std::string out;
  for (const auto& v : verbs) out += "\n  " + v;
  return out;
}

}  // namespace

namespace internal {

bool IsOption(const std::string& word) { return word.size() > 2 && word.rfind("--", 0) == 0; }

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

}  // namespace internal

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
    HPOD_RETURN_IF_ERROR(internal::ParseWaitArgs(rest, inv));
    return inv;
  }
  if (verb == "start-session") {
    HPOD_RETURN_IF_ERROR(internal::ParseStartSessionArgs(rest, help, inv));
    return inv;
  }
  if (verb == "logs") {
    HPOD_RETURN_IF_ERROR(internal::ParseLogsArgs(rest, help, inv));
    return inv;
  }
  if (verb == "inject-fault") {
    HPOD_RETURN_IF_ERROR(internal::ParseInjectFaultArgs(rest, help, inv));
    return inv;
  }
  if (verb == "create-join-token") {
    HPOD_RETURN_IF_ERROR(internal::ParseCreateJoinTokenArgs(rest, help, inv));
    return inv;
  }
  if (verb == "describe-job-goodput") {
    HPOD_RETURN_IF_ERROR(internal::ParseDescribeJobGoodputArgs(rest, help, inv));
    return inv;
  }
  if (verb == "describe-recovery") {
    HPOD_RETURN_IF_ERROR(internal::ParseDescribeRecoveryArgs(rest, help, inv));
    return inv;
  }
  // Generated verbs of hpod's own operations under friendlier names:
  // `get-caller-identity` (as `aws sts get-caller-identity`) is HpodGetCallerIdentity,
  // `list-training-runs` and `get-training-metrics` the training operations, and
  // the host verbs (list-hosts, describe-host, ...) the Hpod...Host operations.
  const bool friendly = std::find(kFriendlyVerbs.begin(), kFriendlyVerbs.end(), verb) !=
                        kFriendlyVerbs.end();
  inv.operation = FindOperationByVerb(friendly ? "hpod-" + verb : verb);
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
    inv.help_topic = XformName(inv.operation->name);
    return inv;
  }
  inv.kind = Invocation::Kind::kOperation;
  if (inv.operation->name == "ListClusterNodes") inv.with_slurm = TakeWithSlurmFlag(rest);
  HPOD_RETURN_IF_ERROR(internal::ParseOperationArgs(rest, env, inv));
  HPOD_RETURN_IF_ERROR(CheckWithSlurm(inv));
  return inv;
}

}  // namespace hpod::cli
