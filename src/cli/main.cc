#include "hpod/cli/main.h"

#include <chrono>

#include "hpod/api/model.h"
#include "hpod/cli/args.h"
#include "hpod/cli/help.h"
#include "hpod/cli/job_goodput.h"
#include "hpod/cli/logs.h"
#include "hpod/cli/output.h"
#include "hpod/cli/params.h"
#include "hpod/cli/recovery.h"
#include "hpod/cli/session.h"
#include "hpod/cli/slurm_nodes.h"
#include "hpod/cli/wait.h"

#ifndef HPOD_VERSION
#define HPOD_VERSION "0.0.0"
#endif

namespace hpod::cli {
namespace {

constexpr std::string_view kUsage =
    "usage: hpod [options] <command> [parameters]\n"
    "To see help text, you can run:\n"
    "\n"
    "  hpod help\n"
    "  hpod <command> help\n";

// Like the AWS CLI: an empty line, then the message.
int Fail(std::ostream& err, int code, const std::string& message) {
  err << "\n" << message << "\n";
  return code;
}

int FailParse(std::ostream& err, const Status& status) {
  if (IsUsageError(status)) {
    err << kUsage << "\nhpod: error: " << status.message() << "\n";
    return kExitUsage;
  }
  return Fail(err, kExitUsage, status.message());
}

std::chrono::milliseconds TimeoutFrom(const std::optional<int64_t>& seconds) {
  // The CLI's 0 means "no timeout"; a day stands in for that so that every call
  // stays bounded.
  int64_t s = seconds.value_or(60);
  return std::chrono::milliseconds(s == 0 ? int64_t{86400000} : s * 1000);
}

// Everything a resolved invocation needs to talk to the service, in dependency
// order (the transport outlives the client that uses it). Thread contract: owned
// and used by one Run() call.
struct Session {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<ApiClient> client;
};

int RunOperation(const Invocation& inv, const Settings& settings, OutputFormat format,
                 Session& session, const Runtime& rt) {
  const api::Operation& op = *inv.operation;
  FormatRequest fmt;
  fmt.format = format;
  fmt.query = inv.query.has_value() ? &*inv.query : nullptr;
  fmt.title = op.name;
  fmt.table.terminal_width = rt.terminal_width;
  if (inv.with_slurm) {
    Status done = ListClusterNodesWithSlurm(*session.client, inv.params, inv.pagination.page_size,
                                            fmt, *rt.out, *rt.err);
    if (!done.ok()) {
      return Fail(*rt.err, done.aws_type().empty() ? kExitOther : kExitService, done.message());
    }
    return kExitOk;
  }
  if (inv.paginate) {
    StatusOr<PaginatedResult> result = Paginate(*session.client, op, inv.params, inv.pagination);
    if (!result.ok()) {
      return Fail(*rt.err, result.status().aws_type().empty() ? kExitOther : kExitService,
                  result.status().message());
    }
    PaginatedOutput output{result->pages, op.paginator->result_keys, result->merged,
                           result->resume_token};
    *rt.out << FormatPaginated(fmt, output);
    return kExitOk;
  }
  StatusOr<Json> response = session.client->Call(op, inv.params);
  if (!response.ok()) {
    return Fail(*rt.err, response.status().aws_type().empty() ? kExitOther : kExitService,
                response.status().message());
  }
  if (!inv.bare_member.empty()) {
    // One string for a script to capture (create-join-token's JoinToken).
    auto it = response->find(inv.bare_member);
    if (it == response->end() || !it->is_string()) {
      return Fail(*rt.err, kExitOther,
                  "The " + op.name + " response has no " + inv.bare_member + " string");
    }
    *rt.out << it->get<std::string>() << "\n";
    return kExitOk;
  }
  *rt.out << FormatResponse(fmt, *response);
  return kExitOk;
}

int RunParsed(const Invocation& inv, const Runtime& rt) {
  std::ostream& out = *rt.out;
  std::ostream& err = *rt.err;
  switch (inv.kind) {
    case Invocation::Kind::kVersion:
      out << VersionString() << "\n";
      return kExitOk;
    case Invocation::Kind::kHelp:
      if (inv.help_topic.empty()) {
        out << TopLevelHelp();
      } else if (inv.help_topic == "start-session") {
        out << StartSessionHelp();
      } else if (inv.help_topic == "logs") {
        out << LogsHelp();
      } else if (inv.help_topic == "inject-fault") {
        out << InjectFaultHelp();
      } else if (inv.help_topic == "create-join-token") {
        out << CreateJoinTokenHelp();
      } else if (inv.help_topic == "describe-job-goodput") {
        out << DescribeJobGoodputHelp();
      } else if (inv.help_topic == "describe-recovery") {
        out << DescribeRecoveryHelp();
      } else if (inv.help_topic.rfind("wait", 0) == 0) {
        out << WaitHelp(inv.help_topic.size() > 5 ? inv.help_topic.substr(5) : "");
      } else if (const api::Operation* op = FindOperationByVerb(inv.help_topic)) {
        out << OperationHelp(*op);
      }
      return kExitOk;
    default:
      break;
  }
  if (inv.kind == Invocation::Kind::kOperation && inv.skeleton == "input") {
    // Printed before any configuration is read, as the CLI does.
    out << Skeleton(*inv.operation->input, false).dump(4) << "\n";
    return kExitOk;
  }

  StatusOr<Settings> settings = ResolveSettings(inv.globals.config, rt.env);
  if (!settings.ok()) return Fail(err, kExitConfig, settings.status().message());
  StatusOr<OutputFormat> format = ParseOutputFormat(settings->output);
  if (!format.ok()) return Fail(err, kExitConfig, format.status().message());
  if (settings->region.empty()) {
    return Fail(err, kExitConfig,
                "You must specify a region. You can also configure your region by running "
                "\"aws configure\".");
  }
  if (!http::ParseUrl(settings->endpoint_url + "/").ok()) {
    return Fail(err, kExitOther, "Invalid endpoint: " + settings->endpoint_url);
  }
  if (inv.kind == Invocation::Kind::kOperation) {
    Status valid = ValidateParams(*inv.operation->input, inv.params);
    if (!valid.ok()) return Fail(err, kExitUsage, valid.message());
    if (inv.skeleton == "output") {
      FormatRequest fmt{*format,
                        inv.query.has_value() ? &*inv.query : nullptr,
                        inv.operation->name,
                        {rt.terminal_width}};
      Json sample = ParseResponse(*inv.operation->output, Skeleton(*inv.operation->output, true));
      out << FormatResponse(fmt, sample);
      return kExitOk;
    }
  }

  if (inv.kind == Invocation::Kind::kStartSession) {
    const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodStartSession");
    if (op == nullptr) return Fail(err, kExitOther, "the model has no HpodStartSession operation");
    Status valid = ValidateParams(*op->input, inv.session_request);
    if (!valid.ok()) return Fail(err, kExitUsage, valid.message());
  }
  if (inv.kind == Invocation::Kind::kLogs) {
    const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodGetNodeLogs");
    if (op == nullptr) return Fail(err, kExitOther, "the model has no HpodGetNodeLogs operation");
    Json params = {{"ClusterName", inv.cluster_name}, {"NodeId", inv.node_id}};
    Status valid = ValidateParams(*op->input, params);
    if (!valid.ok()) return Fail(err, kExitUsage, valid.message());
  }

  ApiClientOptions options;
  options.endpoint_url = settings->endpoint_url;
  options.region = settings->region;
  options.max_attempts = settings->max_attempts;
  options.user_agent = VersionString();
  options.random = rt.random;
  if (inv.globals.debug) options.debug = &err;
  if (!inv.globals.no_sign_request) {
    StatusOr<ResolvedCredentials> creds =
        ResolveCredentials(*settings, inv.globals.config.profile.has_value(), rt.env);
    if (!creds.ok()) return Fail(err, kExitConfig, creds.status().message());
    options.credentials = creds->credentials;
    if (options.debug != nullptr) {
      err << "[debug] credentials from " << creds->source << "\n";
    }
  }
  if (options.debug != nullptr) {
    err << "[debug] " << VersionString() << "; profile " << settings->profile << ", region "
        << settings->region << ", endpoint " << settings->endpoint_url << ", max attempts "
        << settings->max_attempts
        << (settings->ca_bundle.empty() ? "" : ", CA bundle " + settings->ca_bundle) << "\n";
  }

  http::ClientOptions http_options;
  http_options.connect_timeout = TimeoutFrom(inv.globals.connect_timeout_s);
  http_options.timeout = TimeoutFrom(inv.globals.read_timeout_s);
  http_options.ca_file = settings->ca_bundle;
  RealSleeper real_sleeper;
  const Clock& clock = rt.clock != nullptr ? *rt.clock : RealClock::Get();
  Sleeper& sleeper = rt.sleeper != nullptr ? *rt.sleeper : real_sleeper;
  Session session;
  session.transport =
      rt.make_transport ? rt.make_transport(http_options) : NewHttpTransport(http_options);
  session.client = std::make_unique<ApiClient>(options, *session.transport, clock, sleeper);

  if (inv.kind == Invocation::Kind::kWait) {
    WaitOptions wait;
    wait.waiter = inv.waiter;
    wait.cluster_name = inv.cluster_name;
    wait.timeout = inv.wait_timeout.value_or(DefaultWaitTimeout(inv.waiter));
    if (inv.wait_delay.has_value()) wait.delay = *inv.wait_delay;
    wait.live = rt.stderr_is_tty;
    Status done = WaitForCluster(*session.client, wait, clock, sleeper, err);
    if (!done.ok()) return Fail(err, kExitOther, done.message());
    return kExitOk;
  }
  if (inv.kind == Invocation::Kind::kStartSession) {
    if (!rt.make_session_connector) return Fail(err, kExitOther, "Sessions are not supported here");
    StartSessionOptions start;
    start.target = inv.session_request.value("Target", std::string());
    if (inv.session_request.contains("Command")) {
      start.command = inv.session_request["Command"].get<std::string>();
    }
    if (inv.session_request.contains("User")) {
      start.user = inv.session_request["User"].get<std::string>();
    }
    start.endpoint_url = settings->endpoint_url;
    SessionIo io;
    io.stdin_fd = rt.stdin_fd;
    io.stdout_fd = rt.stdout_fd;
    io.stdin_is_tty = rt.stdin_is_tty;
    io.err = &err;
    io.connect = rt.make_session_connector(http_options);
    io.poll_interval = rt.session_poll_interval;
    // The session writes to the stdout fd directly; nothing buffered may follow it.
    out.flush();
    StatusOr<int> code = RunStartSession(*session.client, start, io);
    if (!code.ok()) {
      return Fail(err, code.status().aws_type().empty() ? kExitOther : kExitService,
                  code.status().message());
    }
    return *code;
  }
  if (inv.kind == Invocation::Kind::kLogs) {
    LogsOptions logs;
    logs.cluster_name = inv.cluster_name;
    logs.node_id = inv.node_id;
    logs.stream = inv.log_stream;
    logs.follow = inv.follow;
    logs.max_calls = rt.logs_max_calls;
    Status done = FollowNodeLogs(*session.client, logs, sleeper, out);
    if (!done.ok()) {
      return Fail(err, done.aws_type().empty() ? kExitOther : kExitService, done.message());
    }
    return kExitOk;
  }
  if (inv.kind == Invocation::Kind::kDescribeJobGoodput) {
    DescribeJobGoodputOptions o{inv.cluster_name, inv.job_id, *format};
    Status done = DescribeJobGoodput(*session.client, o, out);
    if (!done.ok()) {
      return Fail(err, done.aws_type().empty() ? kExitOther : kExitService, done.message());
    }
    return kExitOk;
  }
  if (inv.kind == Invocation::Kind::kDescribeRecovery) {
    DescribeRecoveryOptions o{inv.cluster_name, inv.recovery_id, inv.node_id, *format};
    Status done = DescribeRecovery(*session.client, o, out);
    if (!done.ok()) {
      return Fail(err, done.aws_type().empty() ? kExitOther : kExitService, done.message());
    }
    return kExitOk;
  }
  return RunOperation(inv, *settings, *format, session, rt);
}

}  // namespace

std::string VersionString() {
  const api::ServiceModel& model = api::ServiceModel::Get();
  std::string source = model.source().substr(0, model.source().find(' ', 9));
  return std::string("hpod-cli/") + HPOD_VERSION + " (SageMaker " + model.api_version() +
         ", model from " + source + ")";
}

int Run(const std::vector<std::string>& args, const Runtime& runtime) {
  StatusOr<Invocation> inv = ParseCommandLine(args, runtime.env);
  if (!inv.ok()) return FailParse(*runtime.err, inv.status());
  int code = RunParsed(*inv, runtime);
  runtime.out->flush();
  return code;
}

}  // namespace hpod::cli
