// hpod-agent: the node agent. Flags → AgentOptions → Agent::Run (PROTOCOL.md).
//   hpod-agent --config FILE                     a node the provider configured
//   hpod-agent join --server URL --token TOKEN   a machine joining over the network
//   hpod-agent join [--foreground]               the same machine, once joined
//                                                (hpod-agent.service runs this)
// Exit codes: 0 after SIGTERM/SIGINT, or once a first join handed the agent to
// hpod-agent.service (service_handoff.h); 1 when that hand-off failed; 78
// (EX_CONFIG) for a bad config file, a refused join or a node credential (or
// certificate) hpodd refuses. A configured network agent retries a join hpodd
// cannot take now (unreachable, overloaded) instead of exiting.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "hpod/agent/agent.h"
#include "hpod/agent/agent_options.h"
#include "hpod/agent/join.h"
#include "hpod/agent/machine_facts.h"
#include "hpod/agent/service_handoff.h"
#include "hpod/agent/systemctl_shim.h"
#include "hpod/agent/systemd_handover.h"
#include "hpod/agent/systemd_unit.h"
#include "hpod/base/backoff.h"
#include "hpod/base/clock.h"
#include "hpod/base/logging.h"
#include "hpod/base/signals.h"

namespace {

using hpod::agent::kExitConfig;

// The joined state for `server`, joining first when the state dir has none.
hpod::StatusOr<hpod::agent::JoinedState> EnsureJoined(const std::string& server,
                                                      const std::string& token,
                                                      const std::string& state_dir,
                                                      const std::string& machine_id_file,
                                                      const std::string& instance_type) {
  auto state = hpod::agent::LoadJoinedState(state_dir);
  if (state.ok()) {
    if (!server.empty() && state->server != server && state->server + "/" != server) {
      return hpod::FailedPreconditionError(
          state_dir + " holds a join to " + state->server + ", not " + server +
          "; use another --state-dir, or remove " + state_dir + "/join.json to join anew");
    }
    spdlog::info("already joined {} as host {}", state->server, state->host_id);
    return state;
  }
  if (state.status().code() != hpod::StatusCode::kNotFound) return state.status();
  if (token.empty()) {
    return hpod::FailedPreconditionError("this machine has not joined hpodd yet (no " + state_dir +
                                         "/join.json) and has no join token to join with");
  }
  hpod::agent::FactsOptions fo;
  if (!machine_id_file.empty()) fo.machine_id_file = machine_id_file;
  HPOD_ASSIGN_OR_RETURN(nlohmann::json facts, hpod::agent::CollectMachineFacts(fo));
  hpod::agent::JoinOptions jo;
  jo.server = server;
  jo.token = token;
  jo.state_dir = state_dir;
  jo.facts = std::move(facts);
  jo.instance_type = instance_type;
  HPOD_ASSIGN_OR_RETURN(auto joined, hpod::agent::JoinHpodd(jo));
  spdlog::info("joined {} as host {} of pool {}{}", joined.server, joined.host_id, joined.pool,
               joined.instance_id.empty() ? "" : " for node " + joined.instance_id);
  return joined;
}

// Runs `run` until it returns, stopping it on SIGTERM/SIGINT.
int RunUntilSignal(const std::function<int()>& run, const std::function<void()>& stop) {
  std::atomic<bool> stopping{false};
  auto watcher = hpod::SignalWatcher::Start({SIGTERM, SIGINT}, [&](int sig) {
    if (stopping.exchange(true)) return;  // a burst of them stops the agent once
    spdlog::info("received {}, stopping", hpod::SignalName(sig));
    stop();
  });
  if (!watcher.ok()) {
    spdlog::error("{}", watcher.status().message());
    return 1;
  }
  return run();
}

}  // namespace

int main(int argc, char** argv) {
  // Linked as systemctl/journalctl on a node without systemd (systemctl_shim.h).
  if (hpod::agent::IsSystemctlName(argv[0])) {
    const char* socket = std::getenv("HPOD_AGENT_SOCKET");
    return hpod::agent::SystemctlShimMain(argc, argv,
                                          socket ? socket : hpod::agent::kLocalSocketPath);
  }
  // What a pool host's handed units run (systemd_handover.h, systemd_unit.h).
  if (argc >= 2 && std::string_view(argv[1]) == "systemd-unit") {
    return hpod::agent::SystemdUnitMain(argc, argv);
  }
  CLI::App app{"hpod-agent: the hpod node agent"};
  std::string config_path = "/var/lib/hpod-agent/agent.json";
  std::string log_level = "info";
  app.add_option("--config", config_path, "agent config file (JSON, written by the provider)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  std::string machine_id_file;
  app.add_option("--machine-id-file", machine_id_file,
                 "where the machine id is read at a join (default /etc/machine-id)");

  CLI::App* join = app.add_subcommand(
      "join",
      "join hpodd over the network with a join token (hpod create-join-token), then run as "
      "this machine's agent");
  std::string server, token, instance_type, state_dir = "/var/lib/hpod-agent";
  // Not required once joined: the state dir remembers hpodd's address (the
  // packaged unit runs `hpod-agent join` with neither server nor token).
  join->add_option("--server", server,
                   "hpodd's agent address, https://HOST:PORT (--agent-listen); needed only for "
                   "the first join");
  bool foreground = false;
  join->add_flag("--foreground", foreground,
                 "keep running in the foreground after a first join, even where systemd could "
                 "run the agent (hpod-agent.service)");
  // Not required: a machine that joined restarts with `hpod-agent join --server URL`
  // (its state dir holds its key and certificate; the token was spent).
  join->add_option("--token", token,
                   "the join token (hpod create-join-token); needed only for the first join");
  join->add_option("--instance-type", instance_type,
                   "the instance type this machine serves as (ml.c5.2xlarge, ml.g5.12xlarge, ...); "
                   "not needed when the token names one (it must agree); hpodd checks it "
                   "against the machine's CPUs, memory and GPUs");
  std::string reboot_command = "systemctl reboot";
  join->add_option("--reboot-command", reboot_command,
                   "what a pool host runs (bash -c) when hpodd reboots it")
      ->capture_default_str();
  join->add_option("--state-dir", state_dir,
                   "where the agent keeps its key, certificate and state (default "
                   "/var/lib/hpod-agent)");
  CLI11_PARSE(app, argc, argv);

  hpod::InitLogging(hpod::LoggingOptions{log_level, "", "hpod-agent"});
  // The stop signals are read by a watcher thread, never by a handler
  // (hpod/base/signals.h); blocked here, before the agent starts any thread.
  hpod::BlockSignals({SIGTERM, SIGINT});
  signal(SIGPIPE, SIG_IGN);

  hpod::agent::AgentOptions options;
  if (join->parsed()) {
    // Only a state dir without a join is a first join; a damaged one says so
    // (EnsureJoined), rather than asking for a token it does not need.
    auto previous = hpod::agent::LoadJoinedState(state_dir);
    const bool first_join =
        !previous.ok() && previous.status().code() == hpod::StatusCode::kNotFound;
    if (first_join && server.empty()) {
      std::fprintf(stderr,
                   "hpod-agent join: %s has not joined hpodd yet; give --server "
                   "https://HOST:PORT and --token TOKEN\n",
                   state_dir.c_str());
      return kExitConfig;
    }
    auto joined = EnsureJoined(server, token, state_dir, machine_id_file, instance_type);
    if (!joined.ok()) {
      spdlog::error("{}", joined.status().message());
      std::fprintf(stderr, "hpod-agent join: %s\n", std::string(joined.status().message()).c_str());
      return kExitConfig;
    }
    hpod::agent::ServiceHandoff handoff;
    if (first_join && !foreground && hpod::agent::ShouldHandOff(handoff, state_dir)) {
      // The unit runs the agent from now on (service_handoff.h).
      if (hpod::Status s = hpod::agent::HandOff(handoff); !s.ok()) {
        std::fprintf(stderr,
                     "hpod-agent join: joined as host %s, but %s; start it with `systemctl "
                     "enable --now hpod-agent`\n",
                     joined->host_id.c_str(), std::string(s.message()).c_str());
        return 1;
      }
      std::printf(
          "joined %s as host %s (pool %s); hpod-agent.service runs the agent from now "
          "on: systemctl status hpod-agent, journalctl -u hpod-agent\n",
          joined->server.c_str(), joined->host_id.c_str(), joined->pool.c_str());
      return 0;
    }
    if (joined->instance_id.empty()) {
      std::atomic<bool> stopped{false};
      return RunUntilSignal(
          [&] {
            hpod::agent::PoolHostOptions pool;
            pool.reboot_command = reboot_command;
            // systemd runs this machine: its Slurm and munge units go to the
            // node agent while a node is served (systemd_handover.h).
            if (hpod::agent::SystemdRunsThisMachine())
              pool.systemd_unit_dir = "/etc/systemd/system";
            hpod::Status s = hpod::agent::RunSpareHost(
                *joined, state_dir, [&] { return stopped.load(); }, pool);
            if (s.ok()) return 0;
            spdlog::error("{}", s.message());
            return kExitConfig;
          },
          [&] { stopped = true; });
    }
    options.instance_id = joined->instance_id;
    options.endpoint = joined->server;
    options.state_dir = state_dir;
  } else {
    auto loaded = hpod::agent::LoadAgentConfig(config_path);
    if (!loaded.ok()) {
      spdlog::error("{}", loaded.status().message());
      return kExitConfig;
    }
    options = *loaded;
    if (options.endpoint.rfind("https://", 0) == 0) {
      // A network agent the provider configured: it joins with the token the
      // provider minted for this launch, exactly as a machine of the user would.
      // While hpodd cannot take the join (not reachable yet, or busy with
      // thousands of machines joining at once: kUnavailable) it tries again,
      // with jitter so that they do not all come back together; a refusal
      // (a spent or revoked token, another hpodd) ends it.
      auto join = [&] {
        return EnsureJoined(options.endpoint, options.join_token, options.state_dir,
                            machine_id_file.empty() ? options.machine_id_file : machine_id_file,
                            /*instance_type=*/"");
      };
      hpod::Backoff backoff(
          {.initial = std::chrono::seconds(1), .max = std::chrono::seconds(60), .jitter = true});
      auto joined = join();
      while (!joined.ok() && joined.status().code() == hpod::StatusCode::kUnavailable) {
        const std::chrono::milliseconds wait = backoff.Next();
        spdlog::warn("{}; joining again in {:.1f} s", joined.status().message(),
                     wait.count() / 1000.0);
        std::this_thread::sleep_for(wait);
        joined = join();
      }
      if (!joined.ok()) {
        spdlog::error("{}", joined.status().message());
        return kExitConfig;
      }
      if (joined->instance_id != options.instance_id) {
        spdlog::error("this host joined as {} for node '{}', but its config is for {}",
                      joined->host_id, joined->instance_id, options.instance_id);
        return kExitConfig;
      }
    }
  }

  hpod::agent::Agent agent(options, hpod::RealClock::Get());
  spdlog::default_logger()->sinks().push_back(agent.MakeLogSink());
  return RunUntilSignal([&] { return agent.Run(); }, [&] { agent.Stop(); });
}
