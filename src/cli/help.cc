#include "hpod/cli/help.h"

#include <algorithm>
#include <vector>

#include "hpod/cli/args.h"
#include "hpod/cli/slurm_nodes.h"

namespace hpod::cli {
namespace {

using api::Shape;
using api::ShapeType;

bool IsComplexType(ShapeType t) {
  return t == ShapeType::kStructure || t == ShapeType::kList || t == ShapeType::kMap;
}

// awscli's ParamShorthandDocGen._shorthand_docs; nullopt = TooComplexError.
// Thread contract: one instance per call, used by one thread.
class ShorthandDoc {
 public:
  std::optional<std::string> Docs(const Shape& shape) {
    if (stack_.size() > 3) return std::nullopt;
    switch (shape.type) {
      case ShapeType::kStructure: {
        std::string inner;
        for (const auto& m : shape.members) {
          std::optional<std::string> part = MemberDocs(m.name, *m.shape);
          if (!part.has_value()) return std::nullopt;
          inner += (inner.empty() ? "" : ",") + *part;
        }
        return stack_.empty() ? inner : "{" + inner + "}";
      }
      case ShapeType::kList: {
        stack_.push_back(shape.member->name);
        std::optional<std::string> e = Docs(*shape.member);
        stack_.pop_back();
        if (!e.has_value()) return std::nullopt;
        if (IsComplexType(shape.member->type) || stack_.size() > 1)
          return "[" + *e + "," + *e + "]";
        return *e + "," + *e;
      }
      case ShapeType::kMap: {
        stack_.push_back(shape.value->name);
        std::optional<std::string> v = Docs(*shape.value);
        stack_.pop_back();
        if (!v.has_value()) return std::nullopt;
        std::string start = "KeyName1=" + *v + ",KeyName2=" + *v;
        if (!shape.key->enum_values.empty() && stack_.empty()) {
          start += "\n\nWhere valid key names are:\n";
          for (const auto& e : shape.key->enum_values) start += "  " + e + "\n";
        } else if (!stack_.empty()) {
          start = "{" + start + "}";
        }
        return start;
      }
      default:
        return std::string(api::ShapeTypeName(shape.type));
    }
  }

 private:
  std::optional<std::string> MemberDocs(const std::string& name, const Shape& shape) {
    if (std::count(stack_.begin(), stack_.end(), shape.name) > 0) {
      return name + "=( ... recursive ... )";
    }
    stack_.push_back(shape.name);
    std::optional<std::string> value = Docs(shape);
    stack_.pop_back();
    if (!value.has_value()) return std::nullopt;
    return name + "=" + *value;
  }

  std::vector<std::string> stack_;
};

std::string TypeDescription(const Shape& shape) {
  std::string t(api::ShapeTypeName(shape.type));
  if (shape.type == ShapeType::kList) t += " of " + TypeDescription(*shape.member);
  return t;
}

std::string Constraints(const Shape& shape) {
  std::string out;
  auto range = [&](std::string_view what) {
    if (!shape.min && !shape.max) return;
    out += std::string(what) + " ";
    out += shape.min ? std::to_string(*shape.min) : "";
    out += "..";
    out += shape.max ? std::to_string(*shape.max) : "";
  };
  switch (shape.type) {
    case ShapeType::kString:
      range("length");
      if (!shape.pattern.empty()) out += (out.empty() ? "" : ", ") + ("pattern " + shape.pattern);
      break;
    case ShapeType::kList:
      range("items");
      break;
    case ShapeType::kInteger:
    case ShapeType::kLong:
      range("range");
      break;
    case ShapeType::kTimestamp:
      out = "ISO 8601 (2023-11-26T15:20:11Z), a date, or epoch seconds";
      break;
    default:
      break;
  }
  return out;
}

bool SupportsShorthand(const Shape& shape) {
  if (shape.type == ShapeType::kList) return IsComplexType(shape.member->type);
  return shape.type == ShapeType::kStructure || shape.type == ShapeType::kMap;
}

}  // namespace

std::string ShorthandSyntax(const api::Shape& shape) {
  if (!SupportsShorthand(shape)) return "";
  ShorthandDoc doc;
  std::optional<std::string> out =
      shape.type == ShapeType::kList ? doc.Docs(*shape.member) : doc.Docs(shape);
  if (!out.has_value()) return "";
  return shape.type == ShapeType::kList ? *out + " ..." : *out;
}

std::string TopLevelHelp() {
  std::string out =
      "hpod: the command line of a self-hosted SageMaker HyperPod. It mirrors\n"
      "`aws sagemaker <command>` (AWS CLI v2) for the cluster operations.\n\n"
      "Usage:\n"
      "  hpod [options] <command> [parameters]\n"
      "  hpod wait <waiter> --cluster-name NAME [--timeout SECONDS] [--delay SECONDS]\n"
      "  hpod start-session --target sagemaker-cluster:<cluster-id>_<group>-<instance-id>\n"
      "                     [--command CMD]\n"
      "  hpod logs --cluster-name NAME --node-id ID [--stream LifecycleConfig|Agent] [--follow]\n"
      "  hpod inject-fault --cluster-name NAME --node-id ID --kind KIND [--seconds N]\n"
      "                    [--xid-code N]\n"
      "  hpod create-join-token [--pool NAME] [--ttl DURATION] [--uses N]\n"
      "                         [--description TEXT] [--instance-type ml.TYPE]\n"
      "  hpod describe-recovery --cluster-name NAME (--recovery-id ID | --node-id ID)\n"
      "  hpod describe-job-goodput --cluster-name NAME --job-id SLURM_JOB_ID\n"
      "  hpod help | hpod <command> help | hpod wait help\n\n"
      "Commands:\n";
  std::vector<std::pair<std::string, std::string>> verbs;
  for (const api::Operation* op : api::ServiceModel::Get().operations()) {
    verbs.emplace_back(XformName(op->name), op->name);
  }
  std::sort(verbs.begin(), verbs.end());
  for (const auto& [verb, name] : verbs) {
    out += "  " + verb + std::string(verb.size() < 30 ? 30 - verb.size() : 1, ' ') + name + "\n";
  }
  out += "  wait                          cluster-in-service | cluster-deleted\n";
  out += "  start-session                 a shell or a command on a node (aws ssm start-session)\n";
  out += "  logs                          a node's lifecycle-script or agent log\n";
  out += "  inject-fault                  break a node on purpose to test recovery (admin)\n";
  out += "  create-join-token             a token for a machine to join as a host (admin)\n";
  out += "  describe-recovery             one node recovery's timeline, step by step\n";
  out += "  describe-job-goodput          an --auto-resume job's goodput and its failures\n";
  out += "  get-caller-identity           your access key and its role (admin or user)\n";
  out += "  list-training-runs            TensorBoard and JSONL runs on the cluster's /fsx\n";
  out += "  get-training-metrics          one run's scalars (loss, lr, ...) by step\n";
  out += "  list-hosts                    the machines that joined: pool, type, state\n";
  out += "  describe-host                 one host: facts, state, history, what it serves\n";
  out += "  release-host                  a Quarantined or Retired host back to Spare (admin)\n";
  out += "  retire-host                   take a host out of service (admin)\n";
  out += "  revoke-host                   refuse a host's certificates at once (admin)\n\n";
  out +=
      "Global options (anywhere on the line):\n"
      "  --endpoint-url URL          default: $HPOD_ENDPOINT_URL, $AWS_ENDPOINT_URL_SAGEMAKER,\n"
      "                              $AWS_ENDPOINT_URL, profile endpoint_url, "
      "http://127.0.0.1:8450\n"
      "  --ca-bundle FILE            the CAs an https:// endpoint is verified against;\n"
      "                              default: $AWS_CA_BUNDLE, profile ca_bundle, the system's\n"
      "  --region REGION             default: $AWS_REGION, $AWS_DEFAULT_REGION, profile region\n"
      "  --profile NAME              default: $HPOD_PROFILE, $AWS_DEFAULT_PROFILE, $AWS_PROFILE,\n"
      "                              hpod (when `hpodd init` wrote it), default\n"
      "  --output json|text|table    default: $AWS_DEFAULT_OUTPUT, profile output, json\n"
      "  --query EXPR                a JMESPath SUBSET applied to the output: identifiers,\n"
      "                              a.b, [0], [1:3], [*], [], *, [?Status=='InService'],\n"
      "                              [a, b], {k: a}, |, @, `literals`, 'raw strings',\n"
      "                              ==, !=, <, <=, >, >=, &&, ||, !; no functions\n"
      "  --no-paginate               return the first page only\n"
      "  --no-sign-request           send unsigned requests\n"
      "  --cli-read-timeout SECONDS  default 60; 0 = no limit\n"
      "  --cli-connect-timeout SECONDS  default 60; 0 = no limit\n"
      "  --debug                     trace requests and responses to stderr (no secrets)\n"
      "  --version                   print the version\n"
      "  --color on|off|auto, --no-cli-pager  accepted for compatibility (no effect)\n\n"
      "Credentials and settings are read like the AWS CLI reads them: AWS_ACCESS_KEY_ID /\n"
      "AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, ~/.aws/credentials and ~/.aws/config\n"
      "(AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE), AWS_MAX_ATTEMPTS (default 3).\n\n"
      "Exit codes: 0 success, 252 bad command line or parameters, 253 configuration or\n"
      "credentials, 254 error returned by the service, 255 anything else (connection\n"
      "failure, waiter failure or timeout).\n";
  return out;
}

std::string OperationHelp(const api::Operation& op) {
  const Shape& input = *op.input;
  const std::string verb = XformName(op.name);
  const bool paginated = op.paginator.has_value();
  auto hidden = [&](const std::string& member) {
    return paginated && (member == op.paginator->input_token || member == op.paginator->limit_key);
  };
  std::string out = "NAME\n  " + verb + " (SageMaker " + op.name + ")\n\n";
  if (paginated) {
    out += "  " + verb + " is a paginated operation: hpod follows NextToken and merges\n  " +
           op.paginator->result_keys[0] + ". --no-paginate returns the first page only.\n\n";
  }
  out += "SYNOPSIS\n  hpod " + verb + "\n";
  for (const auto& m : input.members) {
    if (hidden(m.name)) continue;
    std::string flag = "--" + XformName(m.name);
    if (m.shape->type == ShapeType::kBoolean)
      flag += " | --no-" + XformName(m.name);
    else
      flag += " <value>";
    out += input.IsRequired(m.name) ? "    " + flag + "\n" : "    [" + flag + "]\n";
  }
  if (op.name == "ListClusterNodes") out += "    [--with-slurm]\n";
  out += "    [--cli-input-json <value>]\n    [--generate-cli-skeleton <value>]\n";
  if (paginated) {
    out += "    [--starting-token <value>]\n    [--page-size <value>]\n    [--max-items <value>]\n";
  }
  out += "\nOPTIONS\n";
  for (const auto& m : input.members) {
    if (hidden(m.name)) continue;
    const Shape& shape = *m.shape;
    std::string flag = "--" + XformName(m.name);
    if (shape.type == ShapeType::kBoolean) flag += " | --no-" + XformName(m.name);
    out += "  " + flag + " (" + TypeDescription(shape) + ")";
    if (input.IsRequired(m.name)) out += " [required]";
    out += "\n";
    std::string constraints = Constraints(shape);
    if (!constraints.empty()) out += "      " + constraints + "\n";
    if (!shape.enum_values.empty()) {
      std::string values;
      for (const auto& e : shape.enum_values) values += (values.empty() ? "" : " | ") + e;
      out += "      Possible values: " + values + "\n";
    }
    if (shape.type == ShapeType::kList && !IsComplexType(shape.member->type)) {
      out += "      Syntax: " + std::string(api::ShapeTypeName(shape.member->type)) + " " +
             std::string(api::ShapeTypeName(shape.member->type)) + " ...\n";
      if (!shape.member->enum_values.empty()) {
        std::string values;
        for (const auto& e : shape.member->enum_values) values += (values.empty() ? "" : " | ") + e;
        out += "      Possible values: " + values + "\n";
      }
    }
    std::string shorthand = ShorthandSyntax(shape);
    if (!shorthand.empty()) out += "      Shorthand syntax: " + shorthand + "\n";
    if (IsComplexType(shape.type)) {
      out += "      JSON syntax: see `hpod " + verb + " --generate-cli-skeleton`\n";
    }
  }
  out +=
      "  --cli-input-json (string)\n"
      "      The whole request as JSON (or file://path); flags given as well override its keys.\n"
      "  --generate-cli-skeleton (string) input | output\n"
      "      Print a request template (input, the default) or a sample response (output).\n";
  if (op.name == "ListClusterNodes") out += WithSlurmHelp();
  if (paginated) {
    out +=
        "  --starting-token (string)\n      The NextToken printed by an earlier --max-items "
        "call.\n"
        "  --page-size (integer)\n      Items per service call (sets " +
        op.paginator->limit_key +
        "); does not change the output.\n"
        "  --max-items (integer)\n      Items to print in total; prints a NextToken when more "
        "remain.\n";
  }
  out +=
      "\nValues: file://path reads a parameter from a file; see `hpod help` for global options.\n";
  return out;
}

std::string WaitHelp(std::string_view waiter) {
  std::string out =
      "NAME\n  wait - poll DescribeCluster every 2 seconds until a cluster reaches a state\n\n"
      "SYNOPSIS\n"
      "  hpod wait cluster-in-service --cluster-name NAME [--timeout SECONDS] [--delay SECONDS]\n"
      "  hpod wait cluster-deleted --cluster-name NAME [--timeout SECONDS] [--delay SECONDS]\n\n";
  if (waiter.empty() || waiter == "cluster-in-service") {
    out +=
        "cluster-in-service\n"
        "  Succeeds when ClusterStatus is InService. Fails (exit 255) with the cluster's\n"
        "  FailureMessage when it becomes Failed, or when it is being deleted.\n"
        "  --timeout default 7200 seconds.\n\n";
  }
  if (waiter.empty() || waiter == "cluster-deleted") {
    out +=
        "cluster-deleted\n"
        "  Succeeds when DescribeCluster answers ResourceNotFound. Fails (exit 255) when the\n"
        "  cluster turns Failed after Deleting. --timeout default 3600 seconds.\n\n";
  }
  out +=
      "Progress goes to stderr: one live line on a terminal (status, elapsed time, and\n"
      "CurrentCount/TargetCount per instance group), a line per change otherwise.\n"
      "A timeout exits with 255.\n";
  return out;
}

std::string StartSessionHelp() {
  return "NAME\n"
         "  start-session - a shell or one command on a cluster node, like `aws ssm\n"
         "  start-session` on a HyperPod node (hpod HpodStartSession + a WebSocket stream)\n\n"
         "SYNOPSIS\n"
         "  hpod start-session\n"
         "    --target <value>\n"
         "    [--command <value>]\n"
         "    [--user <value>]\n"
         "    [--reason <value>]\n\n"
         "OPTIONS\n"
         "  --target (string) [required]\n"
         "      sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id>, e.g.\n"
         "      sagemaker-cluster:a1b2c3d4e5f6_workers-i-0123456789abcdef0 (the cluster id is\n"
         "      the last part of the ClusterArn; see describe-cluster and list-cluster-nodes).\n"
         "  --command (string)\n"
         "      Run `bash -lc <command>` instead of an interactive login shell. Its output is\n"
         "      written to stdout as it comes; stdin is relayed when it is not a terminal.\n"
         "  --user (string)\n"
         "      Run as this user of the node (a login environment, its home as the working\n"
         "      directory) instead of root. Keys of the user role must name one.\n"
         "  --reason (string)\n"
         "      Accepted for compatibility with `aws ssm start-session`; not used.\n\n"
         "Without --command the session is interactive: a terminal stdin is put into raw\n"
         "mode (every key, Ctrl-C included, goes to the node) and the window size follows\n"
         "the local terminal. The session ends when the remote shell or command exits;\n"
         "hpod exits with its status. \"Starting session with SessionId: <id>\" and, for\n"
         "interactive sessions, \"Exiting session with sessionId: <id>.\" go to stderr.\n"
         "An error reported by the node, a refused or lost connection exit with 255.\n";
}

std::string LogsHelp() {
  return "NAME\n"
         "  logs - print a cluster node's log (hpod HpodGetNodeLogs)\n\n"
         "SYNOPSIS\n"
         "  hpod logs\n"
         "    --cluster-name <value>\n"
         "    --node-id <value>\n"
         "    [--stream <value>]\n"
         "    [--follow]\n\n"
         "OPTIONS\n"
         "  --cluster-name (string) [required]\n"
         "      The cluster's name or ARN.\n"
         "  --node-id (string) [required]\n"
         "      The instance id, e.g. i-0123456789abcdef0 (see list-cluster-nodes).\n"
         "  --stream (string)\n"
         "      Possible values: LifecycleConfig | Agent\n"
         "      LifecycleConfig (the default) is the output of the lifecycle scripts\n"
         "      (OnCreate); Agent is the node agent's own log.\n"
         "  --follow (boolean)\n"
         "      Keep printing new lines as they arrive (polls every second) until\n"
         "      interrupted with Ctrl-C.\n\n"
         "The log is printed as it is, without any formatting; --output and --query do\n"
         "not apply.\n";
}

std::string InjectFaultHelp() {
  return "NAME\n"
         "  inject-fault - break a cluster node on purpose, to test how the cluster recovers\n"
         "  (hpod HpodInjectFault; admin keys only; recorded as a node event)\n\n"
         "SYNOPSIS\n"
         "  hpod inject-fault\n"
         "    --cluster-name <value>\n"
         "    --node-id <value>\n"
         "    --kind <value>\n"
         "    [--seconds <value>]\n"
         "    [--xid-code <value>]\n\n"
         "OPTIONS\n"
         "  --cluster-name (string) [required]\n"
         "      The cluster's name or ARN.\n"
         "  --node-id (string) [required]\n"
         "      The instance id of a launched node, e.g. i-0123456789abcdef0.\n"
         "  --kind (string) [required]\n"
         "      kill-node    every process of the node at once\n"
         "      kill-agent   the node agent only\n"
         "      kill-slurmd  the node's slurmd only\n"
         "      partition    the node's network link down for --seconds, then up again\n"
         "      hang         every process of the node stopped (never resumed)\n"
         "      disk-full    the node's disk filled (needs hpodd --node-disk-mb)\n"
         "      gpu-xid      an NVIDIA Xid --xid-code in the node's kernel log and NVML\n"
         "      flag-file    \"1\" appended to the node's /var/run/sagemaker_healthcheck_status\n"
         "      cpu-throttle every process of the node held to 2% of one CPU (fails the\n"
         "                   InstanceStress deep health check)\n"
         "      slow-link    what the node sends shaped to 100 Mbit/s with tc (fails the\n"
         "                   InstanceConnectivity deep health check)\n"
         "  --seconds (integer)\n"
         "      1-3600; required with --kind partition.\n"
         "  --xid-code (integer)\n"
         "      1-1000; required with --kind gpu-xid (e.g. 79: GPU has fallen off the bus).\n\n"
         "Prints {NodeId, Kind, InjectedTime}. The same as `hpod hpod-inject-fault`.\n";
}

std::string CreateJoinTokenHelp() {
  return "NAME\n"
         "  create-join-token - a token with which a machine joins hpodd as a host\n"
         "  (hpod HpodCreateJoinToken; admin keys only)\n\n"
         "SYNOPSIS\n"
         "  hpod create-join-token\n"
         "    [--pool <value>]\n"
         "    [--ttl <value>]\n"
         "    [--uses <value>]\n"
         "    [--description <value>]\n"
         "    [--instance-type <value>]\n\n"
         "OPTIONS\n"
         "  --pool (string)\n"
         "      The pool the machine joins: lowercase letters, digits and '-', at most 63\n"
         "      characters. Default: default.\n"
         "  --ttl (duration)\n"
         "      How long the token can be used: 90s, 30m, 1h, 7d, 1h30m or plain seconds;\n"
         "      1s to 30d. Default: 1h.\n"
         "  --uses (integer)\n"
         "      How many machines may join with it, 1-100000. Default: 1.\n"
         "  --description (string)\n"
         "      A note kept with the token (at most 256 characters), shown by\n"
         "      hpod hpod-list-join-tokens.\n"
         "  --instance-type (string)\n"
         "      The instance type (ml.c5.2xlarge, ml.g5.12xlarge, ...) of the machines\n"
         "      that join with it; `hpod-agent join --instance-type` may then be left\n"
         "      out, and must agree when given.\n"
         "      hpodd refuses a machine whose CPUs, memory or GPU count do not fit it.\n\n"
         "The token carries the hash of hpodd's CA certificate (the machine checks that it\n"
         "talks to this hpodd before it sends anything), the token's id and a secret.\n"
         "hpodd keeps only the secret's hash, so the token is printed once and cannot be\n"
         "shown again. On the machine, run:\n\n"
         "  hpod-agent join --server https://HOST:PORT --token TOKEN --instance-type ml.TYPE\n\n"
         "Prints the token alone on one line, so that TOKEN=$(hpod create-join-token)\n"
         "works; --output text prints the same, and AWS_DEFAULT_OUTPUT or the profile's\n"
         "output setting do not change it. --output json or --output table prints the\n"
         "whole response {JoinToken, TokenId, Pool, Uses, ExpiresAt, InstanceType}; --query\n"
         "picks from it. The same request as\n"
         "`hpod hpod-create-join-token --ttl-seconds N`.\n\n"
         "Related:\n"
         "  hpod hpod-list-join-tokens                 the tokens, their uses left, expiry\n"
         "  hpod hpod-revoke-join-token --token-id ID  stop a token before it expires\n"
         "  hpod list-hosts [--pool NAME] [--state S]  the machines that joined\n"
         "  hpod describe-host --host-id ID            facts, state, history of one host\n"
         "  hpod revoke-host --host-id ID              revoke a host and its certificates\n";
}

std::string DescribeRecoveryHelp() {
  return "NAME\n"
         "  describe-recovery - one node recovery's timeline: what found the fault, each\n"
         "  step hpod took (marked in Slurm, drained, terminated or rebooted, launched,\n"
         "  lifecycle done, slurmd registered, resumed), when, and how long it took\n"
         "  (hpod HpodDescribeRecovery / HpodListRecoveries)\n\n"
         "SYNOPSIS\n"
         "  hpod describe-recovery\n"
         "    --cluster-name <value>\n"
         "    --recovery-id <value> | --node-id <value>\n\n"
         "OPTIONS\n"
         "  --cluster-name (string) [required]\n"
         "      The cluster's name or ARN.\n"
         "  --recovery-id (string)\n"
         "      rcv-... as events and `hpod hpod-list-recoveries` name it.\n"
         "  --node-id (string)\n"
         "      The latest recovery of this node (the failed node or its replacement).\n\n"
         "--output table (or text) prints a summary and one row per step with its time,\n"
         "the seconds since the fault was detected and the seconds the step took; json\n"
         "prints the Recovery object.\n";
}

std::string DescribeJobGoodputHelp() {
  return "NAME\n"
         "  describe-job-goodput - an --auto-resume job's goodput: useful step time over\n"
         "  wall time (from hpod-train's ledger), the steps re-run, and for each node\n"
         "  failure during the job the seconds of detection, replacement, restart,\n"
         "  rendezvous, checkpoint load and first step (hpod HpodDescribeJobGoodput)\n\n"
         "SYNOPSIS\n"
         "  hpod describe-job-goodput\n"
         "    --cluster-name <value>\n"
         "    --job-id <value>\n\n"
         "OPTIONS\n"
         "  --cluster-name (string) [required]\n"
         "      The cluster's name or ARN.\n"
         "  --job-id (string) [required]\n"
         "      The Slurm job id (sbatch's \"Submitted batch job N\").\n\n"
         "Only jobs run with --auto-resume report to hpod. --output table (or text)\n"
         "prints a summary and one row per failure; json the whole response.\n";
}

}  // namespace hpod::cli
