#pragma once

// Runs hpodd's `command` messages on the node (as root): several at once, each with
// its own timeout, answering with a `command_result` message.
//
// Thread contract: CommandRunner is thread-safe; the reply callback is called from
// the runner's worker threads (concurrently) and must be thread-safe.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/thread_annotations.h"

namespace hpod::agent {

struct CommandRequest {
  std::string id;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;
  std::chrono::milliseconds timeout{30000};
  // Set when the message was malformed (says which field): the runner answers with it.
  std::string parse_error;
};

// The path of a program shipped with the agent (a name beginning with "hpod-",
// such as hpod-deep-check): in `state_dir` (where a provider whose nodes cannot
// see the agent's own directory copies it), beside `self` (default: this
// executable) or in the build tree beside it; any other name, or one not found
// there, is returned as it is (looked up in PATH).
std::string ShippedProgram(const std::string& name, const std::string& self = "",
                           const std::string& state_dir = "");

// The programs this agent runs, for hello's `software` (api/software_image.h):
// itself (`self`, default /proc/self/exe) as hpod-agent, hpod-container and
// hpod-deep-check where ShippedProgram finds them, and spank_hpod.so in
// `state_dir`, beside `self` or in <self>/../lib/hpod (the package's place).
// A program not found is left out; the digests are read from the files now.
std::map<std::string, std::string> RunningSoftware(const std::string& state_dir,
                                                   const std::string& self = "");

// Parses a `command` message (api::agentproto::Command); on a malformed one returns
// a request with parse_error set, no argv and whatever id could be read (the runner
// answers it with the error, so hpodd's caller is not left waiting).
CommandRequest ParseCommandRequest(const nlohmann::json& message);

struct CommandRunnerOptions {
  int max_concurrent = 8;
  // Requests waiting for a free slot beyond this are answered at once with an error.
  int max_queued = 64;
  // stdout and stderr are each cut at this size in the reply.
  size_t max_output_bytes = 1024 * 1024;
  // A request without a timeout (or a longer one) gets this one: nothing runs
  // unbounded on the node.
  std::chrono::milliseconds max_timeout{std::chrono::hours(1)};
  // The agent's state directory, where shipped programs may be (ShippedProgram).
  std::string state_dir;
};

class CommandRunner {
 public:
  // `reply` receives each `command_result` message.
  CommandRunner(CommandRunnerOptions options, std::function<void(nlohmann::json)> reply);
  // Shutdown() then joins the workers.
  ~CommandRunner();

  // Queues the command (never blocks).
  void Submit(CommandRequest request);

  // Stops taking work and waits until running commands finish (each is bounded by
  // its timeout); queued ones are answered with an error.
  void Shutdown();

  // The reply for `request` run to completion (used by the workers; public for tests).
  nlohmann::json Execute(const CommandRequest& request) const;

 private:
  void Work();

  const CommandRunnerOptions options_;
  const std::function<void(nlohmann::json)> reply_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<CommandRequest> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace hpod::agent
