#include "hpod/agent/commands.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/crypto.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {

using Json = nlohmann::json;

namespace {

Json Result(const std::string& id, int exit_code, std::string out, std::string err, bool timed_out,
            std::string error) {
  return api::agentproto::CommandResult{id,        exit_code,       std::move(out), std::move(err),
                                        timed_out, std::move(error)}
      .ToJson();
}

}  // namespace

std::string ShippedProgram(const std::string& name, const std::string& self,
                           const std::string& state_dir) {
  namespace fs = std::filesystem;
  if (name.rfind("hpod-", 0) != 0 || name.find('/') != std::string::npos) return name;
  if (!state_dir.empty() && ::access((fs::path(state_dir) / name).c_str(), X_OK) == 0) {
    return (fs::path(state_dir) / name).string();
  }
  std::error_code ec;
  fs::path me = self.empty() ? fs::read_symlink("/proc/self/exe", ec) : fs::path(self);
  if (ec) return name;
  // Installed side by side (bin/), or in the build tree (build/cmd/<name>/<name>).
  for (const fs::path& p :
       {me.parent_path() / name, me.parent_path().parent_path() / name / name}) {
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return name;
}

std::map<std::string, std::string> RunningSoftware(const std::string& state_dir,
                                                   const std::string& self) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path me = self.empty() ? fs::read_symlink("/proc/self/exe", ec) : fs::path(self);
  std::map<std::string, std::string> out;
  auto add = [&](const std::string& name, const fs::path& path) {
    if (path.empty() || out.count(name)) return;
    auto digest = Sha256FileHex(path.string());
    if (digest.ok()) out[name] = *digest;
  };
  // /proc/self/exe names the file this process runs even when a node sees it
  // under another path (hpod-node-init binds it on /run/hpod-node-program).
  add("hpod-agent", self.empty() ? fs::path("/proc/self/exe") : me);
  for (const char* name : {"hpod-container", "hpod-deep-check"}) {
    const std::string found = ShippedProgram(name, ec ? "" : me.string(), state_dir);
    if (found.find('/') != std::string::npos) add(name, found);
  }
  for (const fs::path& p :
       {state_dir.empty() ? fs::path() : fs::path(state_dir) / "spank_hpod.so",
        ec ? fs::path() : me.parent_path() / "spank_hpod.so",
        ec ? fs::path() : me.parent_path().parent_path() / "lib" / "hpod" / "spank_hpod.so"}) {
    if (!p.empty() && fs::exists(p)) {
      add("spank_hpod.so", p);
      break;
    }
  }
  return out;
}

CommandRequest ParseCommandRequest(const Json& message) {
  CommandRequest request;
  auto command = api::agentproto::Command::FromJson(message);
  if (!command.ok()) {
    if (auto it = message.find("id"); it != message.end() && it->is_string()) request.id = *it;
    request.parse_error = std::string(command.status().message());
    return request;
  }
  request.id = std::move(command->id);
  request.argv = std::move(command->argv);
  request.env = std::move(command->env);
  request.cwd = std::move(command->cwd);
  request.timeout = std::chrono::milliseconds(command->timeout_ms);
  return request;
}

CommandRunner::CommandRunner(CommandRunnerOptions options, std::function<void(Json)> reply)
    : options_(options), reply_(std::move(reply)) {
  for (int i = 0; i < std::max(1, options_.max_concurrent); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

CommandRunner::~CommandRunner() {
  Shutdown();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void CommandRunner::Submit(CommandRequest request) {
  {
    MutexLock lock(mu_);
    if (!stopping_ && queue_.size() < static_cast<size_t>(options_.max_queued)) {
      queue_.push_back(std::move(request));
      cv_.notify_one();
      return;
    }
  }
  reply_(Result(request.id, -1, "", "", false, "the agent is busy or stopping; try again"));
}

void CommandRunner::Shutdown() {
  std::deque<CommandRequest> dropped;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  for (const auto& request : dropped) {
    reply_(Result(request.id, -1, "", "", false, "the agent is stopping"));
  }
}

void CommandRunner::Work() {
  while (true) {
    CommandRequest request;
    {
      MutexLock lock(mu_);
      lock.Wait(cv_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    reply_(Execute(request));
  }
}

Json CommandRunner::Execute(const CommandRequest& request) const {
  if (!request.parse_error.empty()) {
    return Result(request.id, -1, "", "", false, "malformed command: " + request.parse_error);
  }
  if (request.argv.empty()) {
    return Result(request.id, -1, "", "", false, "command has no argv");
  }
  SubprocessOptions run;
  run.argv = request.argv;
  run.argv[0] = ShippedProgram(run.argv[0], "", options_.state_dir);
  run.env = request.env;
  run.cwd = request.cwd;
  run.timeout = request.timeout.count() <= 0 || request.timeout > options_.max_timeout
                    ? options_.max_timeout
                    : request.timeout;
  run.max_captured_bytes = options_.max_output_bytes;
  auto result = RunCommand(run);
  if (!result.ok()) {
    spdlog::warn("command {} could not start: {}", request.id, result.status().message());
    return Result(request.id, -1, "", "", false, result.status().message());
  }
  return Result(request.id, result->exit_code, result->stdout_data, result->stderr_data,
                result->timed_out, "");
}

}  // namespace hpod::agent
