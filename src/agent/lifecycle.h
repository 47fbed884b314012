#pragma once

// Runs a node's lifecycle configuration the way HyperPod does (reference contract
// §10): fetch the whole SourceS3Uri prefix to <lifecycle_root>/sagemaker-lifecycle-
// <id>/src/, write <config_dir>/resource_config.json (and provisioning_parameters.
// json), make OnCreate executable and run it as the agent's user (root) with cwd =
// that src dir and SAGEMAKER_RESOURCE_CONFIG_PATH set, under a timeout. Output goes
// to a callback (the agent forwards it as `log` frames, stream LifecycleConfig) and
// is appended to <state_dir>/lifecycle.log.
//
// The outcome is kept in <state_dir>/lifecycle.json: a script that finished
// (Succeeded or Failed) on this node disk is never run again, even after an agent
// restart; one interrupted while Running runs again.
//
// Thread contract: Run is called from one thread at a time; status() is thread-safe.

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "hpod/agent/source_fetch.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/api/states.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::agent {

// The `lifecycle` member of hpodd's config message.
struct LifecycleSpec {
  std::string source_uri;  // "source_s3_uri"
  std::string on_create;
  std::chrono::seconds timeout{1800};
  std::optional<S3Access> s3;
  // The scripts themselves, when hpodd sent them (a file:// source of hpodd's
  // that this node cannot see): relative path → content; then nothing is fetched.
  std::map<std::string, std::string> files;
  std::set<std::string> executable;
};

// The config message's `lifecycle` as the runner takes it: nullopt → nullopt, meaning
// the group has no LifeCycleConfig. kInvalidArgument when source_s3_uri or
// on_create is empty.
StatusOr<std::optional<LifecycleSpec>> LifecycleSpecFrom(
    const std::optional<api::agentproto::LifecycleConfig>& lifecycle);
// The same from the JSON of `lifecycle` (null or absent → nullopt); kInvalidArgument
// naming the field for a malformed object.
StatusOr<std::optional<LifecycleSpec>> ParseLifecycleSpec(const nlohmann::json& lifecycle);

struct LifecycleStatus {
  // On the wire and in lifecycle.json by its name: "NotStarted" | "Running" |
  // "Succeeded" | "Failed" (PROTOCOL.md).
  api::LifecycleState state = api::LifecycleState::kNotStarted;
  int exit_code = 0;  // the script's exit code; -1 when it did not run
  std::string message;

  bool finished() const {
    return state == api::LifecycleState::kSucceeded || state == api::LifecycleState::kFailed;
  }
  // {"state":…,"exit_code":…,"message":…} (also the lifecycle.json format)
  nlohmann::json ToJson() const;
  // As the protocol carries it (hello, heartbeat, the lifecycle message).
  api::agentproto::LifecycleState wire() const {
    return {api::NameString(state), exit_code, message};
  }
  bool operator==(const LifecycleStatus&) const = default;
};

struct LifecycleRunnerOptions {
  std::string config_dir = "/opt/ml/config";
  std::string lifecycle_root = "/tmp";
  std::string state_dir;
  // Output chunks passed to the log callback are at most this long (the protocol's
  // limit for one `log` frame).
  size_t max_log_chunk = 64 * 1024;
  // Between SIGTERM and SIGKILL of a script's process group on timeout.
  std::chrono::milliseconds kill_grace{5000};
  // Called once the source is fetched and provisioning_parameters.json is in
  // place, just before the script starts (the agent reports the parameters and
  // waits for its slurm.conf there, as HyperPod's agent writes it first). false:
  // the script does not run and the state is NotStarted again (run next time).
  std::function<bool()> before_script;
};

class LifecycleRunner {
 public:
  using StatusCallback = std::function<void(const LifecycleStatus&)>;
  using LogCallback = std::function<void(std::string_view chunk)>;

  // `on_status` is called on each state change (Running, then Succeeded/Failed),
  // `on_log` with output chunks; both from the thread calling Run.
  LifecycleRunner(LifecycleRunnerOptions options, const Clock& clock, StatusCallback on_status,
                  LogCallback on_log);

  // Reads <state_dir>/lifecycle.json if present. A state left Running (the agent
  // died mid-run) becomes NotStarted so the script runs again.
  Status LoadState();

  LifecycleStatus status() const;

  // Writes resource_config.json (verbatim) and runs the configuration unless it
  // already finished on this disk; returns the final status. `provisioning` (the
  // config message's `provisioning`, may be null) is written as
  // provisioning_parameters.json only when the source has none.
  LifecycleStatus Run(const std::optional<LifecycleSpec>& spec,
                      const nlohmann::json& resource_config, const nlohmann::json& provisioning);

  std::string resource_config_path() const;

 private:
  void SetStatus(LifecycleStatus status);
  LifecycleStatus Execute(const LifecycleSpec& spec, const nlohmann::json& provisioning);
  void EmitLog(std::string_view data);

  const LifecycleRunnerOptions options_;
  const Clock& clock_;
  const StatusCallback on_status_;
  const LogCallback on_log_;
  mutable Mutex mu_;
  LifecycleStatus status_ GUARDED_BY(mu_);
};

}  // namespace hpod::agent
