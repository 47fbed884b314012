#pragma once

// The hpod command line, derived from the service model the way the AWS CLI
// derives `aws sagemaker ...` from botocore's:
//
//   hpod [global options] <verb> [--member value ...] [global options]
//   hpod wait cluster-in-service|cluster-deleted --cluster-name NAME [--timeout S] [--delay S]
//   hpod start-session --target sagemaker-cluster:<id>_<group>-<instance> [--command CMD]
//   hpod logs --cluster-name NAME --node-id ID [--stream LifecycleConfig|Agent] [--follow]
//   hpod inject-fault --cluster-name NAME --node-id ID --kind KIND [--seconds N] [--xid-code N]
//        (HpodInjectFault's request, run as that operation: Kind kOperation)
//   hpod create-join-token [--pool NAME] [--ttl DURATION] [--uses N] [--description TEXT]
//        (HpodCreateJoinToken's request, Kind kOperation; prints the bare JoinToken
//        unless --output json|table or --query asks for the response)
//   hpod describe-recovery --cluster-name NAME (--recovery-id ID | --node-id ID)
//   hpod help | hpod <verb> help | hpod wait [<waiter>] help | hpod --version
//
// verb = XformName(operation) ("DescribeClusterNode" -> describe-cluster-node) and
// each input member is --XformName(member). Values are parsed by the member's shape:
// scalars from one word (integers strictly), lists from one or more words or JSON,
// structures and maps from JSON or AWS shorthand, any single value from file:// or
// fileb://; booleans are --flag / --no-flag. --cli-input-json supplies the whole
// request (explicit flags override its keys) and --generate-cli-skeleton prints a
// template. Paginated operations add --starting-token, --page-size and --max-items
// and keep --max-results / --next-token working (which turns auto-pagination off).
// A leading "sagemaker" word is accepted so that `aws sagemaker` lines paste as is.
//
// Thread contract: pure functions (file:// values are read from the filesystem).

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/api/model.h"
#include "hpod/base/status.h"
#include "hpod/cli/client.h"
#include "hpod/cli/config.h"
#include "hpod/cli/jmespath.h"

namespace hpod::cli {

// botocore's xform_name(name, '-'): "InstanceGroupsToDelete" -> "instance-groups-to-delete",
// "ClusterARNs" -> "cluster-arns".
std::string XformName(std::string_view name);

// The operation whose verb is `verb`, or null.
const api::Operation* FindOperationByVerb(std::string_view verb);

// Errors the AWS CLI's argparse layer reports (unknown option, missing or
// malformed argument, bad choice) are kInvalidArgument marked as usage errors:
// they are printed after the usage synopsis as "hpod: error: <message>". Other
// kInvalidArgument errors from ParseCommandLine ("Error parsing parameter ...",
// "Cannot specify --no-paginate ...") are printed on their own, like the CLI's
// ParamError. Both exit with 252.
Status UsageError(std::string message);
bool IsUsageError(const Status& status);

struct GlobalOptions {
  ConfigFlags config;  // --profile --region --output --endpoint-url --ca-bundle
  std::optional<std::string> query;  // --query (compiled into Invocation::query)
  bool no_sign_request = false;
  bool debug = false;
  bool no_paginate = false;
  // --cli-read-timeout / --cli-connect-timeout in seconds; 0 means no limit.
  std::optional<int64_t> read_timeout_s;
  std::optional<int64_t> connect_timeout_s;
};

enum class Waiter { kClusterInService, kClusterDeleted };
std::string_view WaiterName(Waiter waiter);  // "cluster-in-service"

struct Invocation {
  enum class Kind {
    kHelp,
    kVersion,
    kOperation,
    kWait,
    kStartSession,
    kLogs,
    kDescribeRecovery,
    kDescribeJobGoodput
  };
  Kind kind = Kind::kHelp;
  GlobalOptions globals;
  std::optional<Expression> query;

  // kHelp: "", a verb, "wait", "wait <waiter>", "start-session", "logs",
  // "inject-fault", "create-join-token" or "describe-recovery".
  std::string help_topic;

  // kOperation.
  const api::Operation* operation = nullptr;
  Json params = Json::object();  // the request, not yet validated
  bool paginate = false;         // follow NextToken (paginated op, no manual token args)
  PaginationOptions pagination;
  std::optional<std::string> skeleton;  // --generate-cli-skeleton: "input" | "output"
  bool with_slurm = false;              // list-cluster-nodes --with-slurm (slurm_nodes.h)
  // When set, the command prints only this string member of the response, alone on
  // its line, instead of formatting the response (create-join-token: "JoinToken").
  std::string bare_member;

  // kWait.
  Waiter waiter = Waiter::kClusterInService;
  std::string cluster_name;
  std::optional<std::chrono::seconds> wait_timeout;  // --timeout
  std::optional<std::chrono::seconds> wait_delay;    // --delay

  // kStartSession: HpodStartSession's request ({Target, Command?}), validated
  // against the model like an operation's.
  Json session_request = Json::object();

  // kLogs (cluster_name above is --cluster-name).
  std::string node_id;
  std::optional<std::string> log_stream;
  bool follow = false;

  // kDescribeRecovery (cluster_name, and node_id above when given instead).
  std::string recovery_id;
  std::string job_id;  // kDescribeJobGoodput
};

// Parses argv (without the program name). `env` expands ~ and $VARS in file://
// paths.
StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args, const Environment& env);

// Reads a file:// (text) or fileb:// (bytes) parameter; nullopt when `value` is
// neither. Errors read like the CLI's: "Unable to load paramfile file://x: [Errno 2]
// No such file or directory: 'x'".
StatusOr<std::optional<std::string>> LoadParamFile(std::string_view value, const Environment& env);

}  // namespace hpod::cli
