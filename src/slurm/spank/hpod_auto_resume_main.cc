// hpod-auto-resume: the auto-resume supervisor around any command, without the SPANK
// plugin. For tests and debugging:
//   hpod-auto-resume --max-attempts 2 --job-id 12 --nodes 'n[1-3]' -- ./train.sh
// flags -> SupervisorSetup -> Supervise(); exit code: the command's final one, 2 for
// bad usage.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/slurm/spank/agent_client.h"
#include "hpod/slurm/spank/environment.h"
#include "hpod/base/hostlist.h"
#include "hpod/slurm/spank/options.h"
#include "hpod/slurm/spank/step_runner.h"
#include "hpod/slurm/spank/supervisor.h"

namespace {

using namespace hpod::spank;  // NOLINT: a main

constexpr char kUsage[] = R"(usage: hpod-auto-resume [options] -- <command> [args...]

Runs <command> as the step of an auto-resume supervisor, as `srun --auto-resume=N`
does: after each failed attempt it asks the hpod agent whether a node of the job
was recovered, waits for the recovery and runs the command again.

  --max-attempts N   retries after the first attempt, 0..100 (default 1)
  --job-id ID        the Slurm job (default $SLURM_JOB_ID)
  --nodes LIST       the job's nodes, a Slurm host list (default $SLURM_JOB_NODELIST)
  --socket PATH      the agent's socket (default $HPOD_AGENT_SOCKET or /run/hpod-agent/agent.sock)
  --grace-s S        re-ask a healthy verdict after a failure for S s (default 10)
  --timeout-s S      wait at most S s for a recovery (default 900)
  --poll-ms MS       poll the agent every MS ms while waiting (default 1000)
  --srun             <command> is an srun: add --overlap to it from the first retry on
  --help             this text
)";

int Usage(const std::string& why) {
  std::fprintf(stderr, "hpod-auto-resume: %s\n%s", why.c_str(), kUsage);
  return 2;
}

bool ParseSeconds(const char* s, long* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

// execve does not search PATH, and the search must happen before fork.
std::string Resolve(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t pos = 0;
  while (pos <= dirs.size()) {
    std::size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(pos, colon - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = colon + 1;
  }
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  // Writes to a closed pipe fail with EPIPE instead of ending the supervisor.
  signal(SIGPIPE, SIG_IGN);
  int max_attempts = 1;
  const char* job_id = nullptr;
  const char* nodes = nullptr;
  const char* socket_path = nullptr;
  long grace_s = -1, timeout_s = -1, poll_ms = -1;
  bool srun = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char** out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (a == "--") {
      ++i;
      break;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--srun") {
      srun = true;
    } else if (a == "--max-attempts") {
      if (!value(&v)) return Usage("--max-attempts needs a value");
      hpod::StatusOr<int> n = ParseAutoResume(v);
      if (!n.ok()) return Usage("--max-attempts " + std::string(v) + ": expected 0..100");
      max_attempts = *n;
    } else if (a == "--job-id") {
      if (!value(&job_id)) return Usage("--job-id needs a value");
    } else if (a == "--nodes") {
      if (!value(&nodes)) return Usage("--nodes needs a value");
    } else if (a == "--socket") {
      if (!value(&socket_path)) return Usage("--socket needs a value");
    } else if (a == "--grace-s" || a == "--timeout-s" || a == "--poll-ms") {
      long* out = a == "--grace-s" ? &grace_s : a == "--timeout-s" ? &timeout_s : &poll_ms;
      if (!value(&v) || !ParseSeconds(v, out)) return Usage(a + " needs a whole number");
    } else {
      return Usage("unknown option " + a);
    }
  }
  if (i >= argc) return Usage("no command after --");

  if (nodes != nullptr) {
    hpod::StatusOr<std::vector<std::string>> expanded = hpod::ExpandHostlist(nodes);
    if (!expanded.ok()) return Usage("--nodes: " + expanded.status().message());
  }
  // Flags stand in for the variables they replace, so that everything derived from
  // them (the ledger's name from the job id) follows.
  EnvLookup process = ProcessEnv();
  EnvLookup env = [&](std::string_view name) -> std::optional<std::string> {
    if (name == "SLURM_JOB_ID" && job_id != nullptr) return job_id;
    if (name == "SLURM_JOB_NODELIST" && nodes != nullptr) return nodes;
    if (name == kAgentSocketEnv && socket_path != nullptr) return socket_path;
    return process(name);
  };
  SupervisorSetup setup = SetupFromEnv(max_attempts, env);
  StderrOutput out;
  for (const auto& w : setup.warnings) out.Line(w);
  SupervisorConfig& config = setup.config;
  if (grace_s >= 0) config.grace = std::chrono::seconds(grace_s);
  if (timeout_s >= 0) config.recovery_timeout = std::chrono::seconds(timeout_s);
  if (poll_ms > 0) config.poll_interval = std::chrono::milliseconds(poll_ms);
  if (!setup.ledger_dir.empty()) mkdir(setup.ledger_dir.c_str(), 0755);

  setup.runner.argv.assign(argv + i, argv + argc);
  setup.runner.executable = Resolve(setup.runner.argv[0]);
  setup.runner.overlap_on_retry = srun;
  ForkExecRunner runner(setup.runner);
  UnixSocketAgentClient agent(UnixSocketAgentClient::Options{.socket_path = setup.agent_socket});
  RealSleeper sleeper;
  return Supervise(config, agent, runner, hpod::RealClock::Get(), sleeper, out);
}
