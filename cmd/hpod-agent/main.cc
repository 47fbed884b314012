// hpod-agent: the node agent. Flags → AgentOptions → Agent::Run (PROTOCOL.md).
// Exit codes: 0 after SIGTERM/SIGINT, 78 (EX_CONFIG) for a bad config file or a node
// credential hpodd refuses.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "hpod/agent/agent.h"
#include "hpod/agent/agent_options.h"
#include "hpod/base/clock.h"
#include "hpod/base/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"hpod-agent: the hpod node agent"};
  std::string config_path = "/var/lib/hpod-agent/agent.json";
  std::string log_level = "info";
  app.add_option("--config", config_path, "agent config file (JSON, written by the provider)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);

  hpod::InitLogging(hpod::LoggingOptions{log_level, "", "hpod-agent"});
  auto options = hpod::agent::LoadAgentConfig(config_path);
  if (!options.ok()) {
    spdlog::error("{}", options.status().message());
    return hpod::agent::kExitConfig;
  }

  // Block the stop signals in every thread; a dedicated thread waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  hpod::agent::Agent agent(*options, hpod::RealClock::Get());
  spdlog::default_logger()->sinks().push_back(agent.MakeLogSink());
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    }
    agent.Stop();
  });
  int code = agent.Run();
  // Wake the waiter if Run ended on its own (a refused credential).
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return code;
}
