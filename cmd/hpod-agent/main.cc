// hpod-agent: the node agent. Flags → AgentOptions → Agent::Run (PROTOCOL.md).
// Exit codes: 0 after SIGTERM/SIGINT, 78 (EX_CONFIG) for a bad config file or a node
// credential hpodd refuses.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>

#include "hpod/agent/agent.h"
#include "hpod/agent/agent_options.h"
#include "hpod/base/clock.h"
#include "hpod/base/logging.h"
#include "hpod/base/signals.h"

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

  // The stop signals are read by a watcher thread, never by a handler
  // (hpod/base/signals.h); blocked here, before the agent starts any thread.
  hpod::BlockSignals({SIGTERM, SIGINT});
  signal(SIGPIPE, SIG_IGN);

  hpod::agent::Agent agent(*options, hpod::RealClock::Get());
  spdlog::default_logger()->sinks().push_back(agent.MakeLogSink());
  std::atomic<bool> stopping{false};
  auto watcher = hpod::SignalWatcher::Start({SIGTERM, SIGINT}, [&](int sig) {
    if (stopping.exchange(true)) return;  // a burst of them stops the agent once
    spdlog::info("received {}, stopping", hpod::SignalName(sig));
    agent.Stop();
  });
  if (!watcher.ok()) {
    spdlog::error("{}", watcher.status().message());
    return 1;
  }
  return agent.Run();
}
