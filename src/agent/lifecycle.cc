#include "hpod/agent/lifecycle.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "hpod/agent/fs_util.h"
#include "hpod/base/crypto.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string StringField(const Json& obj, const char* name) {
  auto it = obj.find(name);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

// The scripts hpodd sent (LifecycleSpec::files) into `dir`, as a fetch would
// leave them. Paths are relative and stay inside `dir`.
Status WriteSentFiles(const LifecycleSpec& spec, const std::string& dir) {
  for (const auto& [rel, content] : spec.files) {
    const fs::path p = fs::path(rel).lexically_normal();
    if (rel.empty() || p.is_absolute() || p.empty() || *p.begin() == "..") {
      return FailedPreconditionError("hpodd sent a lifecycle file outside its directory: " + rel);
    }
    HPOD_RETURN_IF_ERROR(WriteFileAtomic((fs::path(dir) / p).string(), content,
                                         spec.executable.count(rel) ? 0755 : 0644));
  }
  if (!spec.files.count(spec.on_create)) {
    return FailedPreconditionError("No " + spec.on_create + " under " + spec.source_uri);
  }
  return OkStatus();
}

LifecycleStatus Failed(int exit_code, std::string message) {
  return LifecycleStatus{api::LifecycleState::kFailed, exit_code, std::move(message)};
}

}  // namespace

StatusOr<std::optional<LifecycleSpec>> LifecycleSpecFrom(
    const std::optional<api::agentproto::LifecycleConfig>& lifecycle) {
  if (!lifecycle) return std::optional<LifecycleSpec>();
  LifecycleSpec spec;
  spec.source_uri = lifecycle->source_s3_uri;
  spec.on_create = lifecycle->on_create;
  if (spec.source_uri.empty()) return InvalidArgumentError("lifecycle: missing source_s3_uri");
  if (spec.on_create.empty()) return InvalidArgumentError("lifecycle: missing on_create");
  spec.timeout = std::chrono::seconds(std::max<int64_t>(1, lifecycle->timeout_s));
  spec.files = lifecycle->files;
  spec.executable.insert(lifecycle->executable.begin(), lifecycle->executable.end());
  if (lifecycle->s3) {
    S3Access s3;
    s3.endpoint = lifecycle->s3->endpoint;
    if (!lifecycle->s3->region.empty()) s3.region = lifecycle->s3->region;
    s3.access_key_id = lifecycle->s3->access_key_id;
    s3.secret_access_key = lifecycle->s3->secret_access_key;
    s3.unix_socket = lifecycle->s3->unix_socket;
    spec.s3 = std::move(s3);
  }
  return std::optional<LifecycleSpec>(std::move(spec));
}

StatusOr<std::optional<LifecycleSpec>> ParseLifecycleSpec(const Json& lifecycle) {
  if (lifecycle.is_null()) return std::optional<LifecycleSpec>();
  HPOD_ASSIGN_OR_RETURN(auto config, api::agentproto::LifecycleConfig::FromJson(lifecycle));
  return LifecycleSpecFrom(config);
}

Json LifecycleStatus::ToJson() const { return wire().ToJson(); }

LifecycleRunner::LifecycleRunner(LifecycleRunnerOptions options, const Clock& clock,
                                 StatusCallback on_status, LogCallback on_log)
    : options_(std::move(options)),
      clock_(clock),
      on_status_(std::move(on_status)),
      on_log_(std::move(on_log)) {}

std::string LifecycleRunner::resource_config_path() const {
  return (fs::path(options_.config_dir) / "resource_config.json").string();
}

Status LifecycleRunner::LoadState() {
  auto text = ReadFile((fs::path(options_.state_dir) / "lifecycle.json").string());
  if (!text.ok()) {
    return text.status().code() == StatusCode::kNotFound ? OkStatus() : text.status();
  }
  Json doc = Json::parse(*text, nullptr, false);
  if (!doc.is_object()) return DataLossError("lifecycle.json is not a JSON object");
  LifecycleStatus loaded;
  // An unknown state is no finished one: the script runs again, as below.
  loaded.state = api::Parse<api::LifecycleState>(StringField(doc, "state"))
                     .value_or(api::LifecycleState::kNotStarted);
  loaded.message = StringField(doc, "message");
  if (auto it = doc.find("exit_code"); it != doc.end() && it->is_number_integer()) {
    loaded.exit_code = it->get<int>();
  }
  if (!loaded.finished()) loaded = LifecycleStatus{};  // interrupted: run again
  MutexLock lock(mu_);
  status_ = loaded;
  return OkStatus();
}

LifecycleStatus LifecycleRunner::status() const {
  MutexLock lock(mu_);
  return status_;
}

void LifecycleRunner::SetStatus(LifecycleStatus status) {
  {
    MutexLock lock(mu_);
    status_ = status;
  }
  Json doc = status.ToJson();
  Status written =
      WriteFileAtomic((fs::path(options_.state_dir) / "lifecycle.json").string(), doc.dump(), 0644);
  if (!written.ok()) spdlog::error("persisting lifecycle state: {}", written.ToString());
  if (on_status_) on_status_(status);
}

void LifecycleRunner::EmitLog(std::string_view data) {
  if (!on_log_) return;
  for (size_t i = 0; i < data.size(); i += options_.max_log_chunk) {
    on_log_(data.substr(i, options_.max_log_chunk));
  }
}

LifecycleStatus LifecycleRunner::Run(const std::optional<LifecycleSpec>& spec,
                                     const Json& resource_config, const Json& provisioning) {
  // The platform writes resource_config.json before any script runs, and again on a
  // restarted agent: scripts may be re-run by hand and must find it.
  Status written = WriteFileAtomic(resource_config_path(), resource_config.dump(2) + "\n", 0644);
  if (LifecycleStatus current = status(); current.finished()) {
    spdlog::info("lifecycle already {} on this node; not running it again",
                 api::Name(current.state));
    return current;
  }
  if (!written.ok()) {
    LifecycleStatus failed =
        Failed(-1, "Could not write " + resource_config_path() + ": " + written.message());
    SetStatus(failed);
    return failed;
  }
  if (!spec.has_value()) {
    LifecycleStatus done{api::LifecycleState::kSucceeded, 0, "no lifecycle configuration"};
    SetStatus(done);
    return done;
  }
  SetStatus(LifecycleStatus{api::LifecycleState::kRunning, 0, ""});
  LifecycleStatus outcome = Execute(*spec, provisioning);
  SetStatus(outcome);
  return outcome;
}

LifecycleStatus LifecycleRunner::Execute(const LifecycleSpec& spec, const Json& provisioning) {
  const fs::path src =
      fs::path(options_.lifecycle_root) /
      ("sagemaker-lifecycle-" + RandomString(12, "abcdefghijklmnopqrstuvwxyz0123456789")) / "src";
  FetchOptions fetch;
  fetch.source_uri = spec.source_uri;
  fetch.on_create = spec.on_create;
  fetch.s3 = spec.s3;
  spdlog::info("fetching lifecycle scripts from {} to {}", spec.source_uri, src.string());
  Status fetched = spec.files.empty() ? FetchSource(fetch, src.string(), clock_)
                                      : WriteSentFiles(spec, src.string());
  if (!fetched.ok()) {
    spdlog::error("lifecycle fetch failed: {}", fetched.message());
    return Failed(-1, fetched.code() == StatusCode::kFailedPrecondition
                          ? fetched.message()
                          : "Could not fetch " + spec.source_uri + ": " + fetched.message());
  }

  std::error_code ec;
  const fs::path params = src / "provisioning_parameters.json";
  const fs::path params_dest = fs::path(options_.config_dir) / "provisioning_parameters.json";
  if (fs::is_regular_file(params, ec)) {
    auto text = ReadFile(params.string());
    Status copied = text.ok() ? WriteFileAtomic(params_dest.string(), *text, 0644) : text.status();
    if (!copied.ok())
      return Failed(-1, "Could not copy provisioning_parameters.json: " + copied.message());
  } else if (provisioning.is_object() && !provisioning.empty()) {
    Status copied = WriteFileAtomic(params_dest.string(), provisioning.dump(2) + "\n", 0644);
    if (!copied.ok())
      return Failed(-1, "Could not write provisioning_parameters.json: " + copied.message());
  }

  if (options_.before_script && !options_.before_script()) {
    return LifecycleStatus{api::LifecycleState::kNotStarted, 0, "the agent stopped first"};
  }
  const fs::path script = src / spec.on_create;
  fs::permissions(script, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
  // A script without "#!" cannot be exec'd directly; bash runs it, as a user would.
  std::vector<std::string> argv = {script.string()};
  if (auto head = ReadFile(script.string()); head.ok() && head->rfind("#!", 0) != 0) {
    argv = {"/bin/bash", script.string()};
  }

  std::ofstream log_file((fs::path(options_.state_dir) / "lifecycle.log").string(),
                         std::ios::binary | std::ios::app);
  SubprocessOptions run;
  run.argv = argv;
  run.cwd = src.string();
  run.env["SAGEMAKER_RESOURCE_CONFIG_PATH"] = resource_config_path();
  run.timeout = spec.timeout;
  run.kill_grace = options_.kill_grace;
  run.merge_stderr = true;
  run.on_stdout = [&](std::string_view chunk) {
    log_file.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    log_file.flush();
    EmitLog(chunk);
  };
  spdlog::info("running lifecycle script {} (timeout {} s)", spec.on_create, spec.timeout.count());
  auto result = RunCommand(run);
  if (!result.ok()) {
    return Failed(-1, "Lifecycle script " + spec.on_create +
                          " could not be started: " + result.status().message());
  }
  if (result->timed_out) {
    return Failed(result->exit_code, "Lifecycle script " + spec.on_create + " timed out after " +
                                         std::to_string(spec.timeout.count()) + " s");
  }
  if (result->exit_code != 0) {
    return Failed(result->exit_code, "Lifecycle script " + spec.on_create + " exited with code " +
                                         std::to_string(result->exit_code));
  }
  return LifecycleStatus{api::LifecycleState::kSucceeded, 0,
                         "Lifecycle script " + spec.on_create + " succeeded"};
}

}  // namespace hpod::agent
