// hpod-deep-check: the deep health checks of one node, as hpodd runs them
// through the node's agent (StartClusterHealthCheck, OnStartDeepHealthChecks;
// docs/node-health.md):
//   hpod-deep-check stress [--seconds 5] [--dir /var/tmp] ...
//   hpod-deep-check connectivity --rank R --world N --master ADDR --port P
//                                [--names h0,h1,...]
// Prints one JSON object on stdout: {"check": ..., "passed": ..., "message": ...,
// "detail": ...} for stress; for connectivity rank 0 prints the check's verdict
// with "failures" by rank, the other ranks {"rank": R}. Exit 0 when the check
// ran (its verdict says whether the node passed), 1 when it could not run (the
// JSON's "error" says why, and "missing_tool" is true when the node lacks
// stress-ng or iperf3), 2 for bad flags.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hpod/agent/health/stress_check.h"
#include "hpod/train/comm/connectivity_check.h"
#include "hpod/train/comm/rendezvous.h"

namespace {

using json = nlohmann::json;

int Print(const json& j, int code) {
  std::printf("%s\n", j.dump().c_str());
  return code;
}

// A check that could not run; from the checks, kFailedPrecondition is a tool the
// node lacks.
int Error(const char* check, int rank, const hpod::Status& s, bool from_check = true) {
  json j = {{"check", check},
            {"error", s.message()},
            {"missing_tool", from_check && s.code() == hpod::StatusCode::kFailedPrecondition}};
  if (rank >= 0) j["rank"] = rank;
  return Print(j, 1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpod-deep-check: a node's deep health checks (docs/node-health.md)"};
  app.require_subcommand(1);

  hpod::agent::health::StressOptions so;
  CLI::App* stress = app.add_subcommand("stress", "InstanceStress: CPU, memory and disk");
  stress->add_option("--seconds", so.seconds, "How long stress-ng runs")
      ->check(CLI::Range(1, 3600));
  stress->add_option("--dir", so.dir, "Where the disk stressor writes");
  stress->add_option("--memory", so.memory, "Memory the vm stressor allocates (stress-ng size)");
  stress->add_option("--disk", so.disk, "Bytes the disk stressor writes (stress-ng size)");
  stress->add_option("--cpu-workers", so.cpu_workers, "CPU stressors (0: one per CPU)");
  stress->add_option("--min-cpu-rate", so.min_cpu_rate, "Minimum bogo-ops/s per CPU stressor");
  stress->add_option("--min-vm-rate", so.min_vm_rate, "Minimum bogo-ops/s of the vm stressor");
  stress->add_option("--min-hdd-rate", so.min_hdd_rate, "Minimum bogo-ops/s of the hdd stressor");

  hpod::train::comm::ConnectivityOptions co;
  hpod::train::comm::World world;
  int port = 0;
  std::string names;
  CLI::App* conn =
      app.add_subcommand("connectivity", "InstanceConnectivity: links and collectives");
  conn->add_option("--rank", world.rank)->required()->check(CLI::NonNegativeNumber);
  conn->add_option("--world", world.size)->required()->check(CLI::PositiveNumber);
  conn->add_option("--master", world.master_addr, "Rank 0's address")->required();
  conn->add_option("--port", port, "Rank 0's rendezvous port")
      ->required()
      ->check(CLI::Range(1, 65535));
  conn->add_option("--names", names, "Comma-separated names of the ranks, for messages");
  conn->add_option("--iperf-port", co.iperf_port, "Rank R's iperf3 server listens on this + R");
  conn->add_option("--iperf-seconds", co.iperf_seconds)->check(CLI::Range(1, 60));
  conn->add_option("--min-link-ratio", co.min_link_ratio);
  conn->add_option("--min-busbw-ratio", co.min_busbw_ratio);
  conn->add_option("--max-latency-ms", co.max_latency_ms);

  CLI11_PARSE(app, argc, argv);

  if (stress->parsed()) {
    auto v = hpod::agent::health::RunStressCheck(so);
    if (!v.ok()) return Error("InstanceStress", -1, v.status());
    return Print({{"check", "InstanceStress"},
                  {"passed", v->passed},
                  {"message", v->message},
                  {"detail", v->detail}},
                 0);
  }
  world.master_port = static_cast<uint16_t>(port);
  world.run_id = "deep-check";
  if (!names.empty()) {
    std::stringstream ss(names);
    std::string name;
    while (std::getline(ss, name, ',')) co.names.push_back(name);
  }
  hpod::train::comm::JoinOptions jo;
  jo.rendezvous_timeout = std::chrono::seconds(30);
  jo.collective_timeout = std::chrono::seconds(60);
  auto joined = hpod::train::comm::JoinWorld(world, {{"check", "InstanceConnectivity"}}, jo);
  if (!joined.ok()) return Error("InstanceConnectivity", world.rank, joined.status(), false);
  auto v = hpod::train::comm::RunConnectivityCheck(*joined, co);
  if (!v.ok()) return Error("InstanceConnectivity", world.rank, v.status());
  if (world.rank != 0) return Print({{"check", "InstanceConnectivity"}, {"rank", world.rank}}, 0);
  return Print({{"check", "InstanceConnectivity"},
                {"rank", 0},
                {"failures", v->failures},
                {"message", v->summary},
                {"detail", v->detail}},
               0);
}
