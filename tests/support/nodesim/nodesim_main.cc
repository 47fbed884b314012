// hpod-nodesim: N simulated nodes' agents in one process, for scale tests and
// benchmarks of hpodd (issue 30). Test-only, like hpodd-fake, and run beside it:
//
//   HPOD_FAKE_AGENT_DIR=/tmp/a HPOD_FAKE_PENDING_MS=0 hpodd-fake --provider fake ... &
//   hpod-nodesim --agent-dir /tmp/a
//
// With HPOD_FAKE_AGENT_URL=https://127.0.0.1:PORT as well, the nodes are network
// agents: each joins with its launch's join token (the real agent's JoinHpodd, on
// a small pool of threads: --join-threads) and keeps its certificate on a disk
// of its own under --state-dir, then speaks over mutual TLS.
//
// Every node the fake provider launches leaves its agent config in the agent dir
// (FakeProviderOptions::agent_dir); the simulator starts a SimAgent for it (a
// real channel to hpodd's agent socket: sim_agent.h), restarts it when a reboot
// rewrites the config and stops it when the node terminates. All agents share one
// I/O thread (http::WebSocketSwarm), so that at 10,000 nodes the machine's cores
// go to hpodd, which is what is measured.
//
// Control: one command per line on stdin; each answer is one JSON line on stdout
// (as are the simulator's events: a refused agent, a fault applied).
//   stats                         counters, agents, connected, silent
//   silence ID[,ID...]            the agent hangs: nothing goes out, the socket stays
//   unsilence ID[,ID...]
//   disconnect ID[,ID...]         the socket drops; the agent reconnects with backoff
//   kill ID[,ID...]               the socket drops for good (a dead machine)
//   fail ID[,ID...] CHECK [VERDICT]   a failing health check (VERDICT: Replace,
//                                 Reboot, Healthy; "ok" heals it)
//   flap ID[,ID...] MS            disconnect every MS milliseconds (0 stops)
//   late ID[,ID...] MS            no heartbeat for MS milliseconds, counted as the
//                                 simulator's own gap (as when its thread is busy)
//   gaps ID[,ID...]               each agent's last heartbeat gaps over 5 s, [start,
//                                 end] in epoch seconds (a node gone: its last ones)
//   quit
// IDs are instance ids or hostnames.

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim_agent.h"

namespace hpod::nodesim {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::atomic<bool> g_stop{false};

// Threads that run blocking work (network agents' joins) off the I/O thread.
//
// Thread contract: Run is thread-safe; the destructor drops work not started and
// joins the threads (a join in progress ends within its own timeout).
class BlockingPool {
 public:
  explicit BlockingPool(int threads) {
    for (int i = 0; i < threads; i++) {
      threads_.emplace_back([this] {
        // Below the I/O thread: thousands of joins' key generation and TLS
        // handshakes must not delay the heartbeats of the agents already up (a
        // gap the simulator makes reads to hpodd as a hung node).
        setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
        pthread_setname_np(pthread_self(), "sim-join");  // the benchmark reads threads' CPU by name
        Loop();
      });
    }
  }
  ~BlockingPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      work_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Run(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      work_.push_back(std::move(work));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !work_.empty(); });
        if (stopping_) return;
        next = std::move(work_.front());
        work_.pop_front();
      }
      next();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                   // guarded by mu_
  std::deque<std::function<void()>> work_;  // guarded by mu_
  std::vector<std::thread> threads_;
};

class Simulator final : public SimWorld {
 public:
  Simulator(std::string agent_dir, std::string state_dir, std::chrono::milliseconds lifecycle_delay,
            uint64_t seed, int join_threads)
      : agent_dir_(std::move(agent_dir)),
        state_dir_(std::move(state_dir)),
        lifecycle_delay_(lifecycle_delay),
        rng_(seed),
        pool_(join_threads) {}

  http::WebSocketSwarm& swarm() override { return swarm_; }
  SlurmSim& slurm(const std::string& cluster_id) override { return slurm_[cluster_id]; }
  SimCounters& counters() override { return counters_; }
  std::mt19937_64& rng() override { return rng_; }
  std::chrono::milliseconds lifecycle_delay() const override { return lifecycle_delay_; }
  const std::string& state_dir() const override { return state_dir_; }
  void Blocking(std::function<void()> work) override { pool_.Run(std::move(work)); }
  void Event(const Json& event) override {
    std::lock_guard<std::mutex> lock(out_mu_);
    std::fputs((event.dump() + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

  // The agent config `name` in the agent dir appeared or changed (on the I/O thread).
  void Seen(const std::string& name) {
    std::ifstream f(fs::path(agent_dir_) / name);
    auto config = NodeConfig::FromJson(Json::parse(f, nullptr, false));
    if (!config) return;  // gone again, or not an agent config
    auto it = agents_.find(config->instance_id);
    if (it == agents_.end()) {
      auto agent = std::make_shared<SimAgent>(*this, *config);
      agents_.emplace(config->instance_id, agent);
      by_host_[config->hostname] = config->instance_id;
      agent->Start();
    } else if (it->second->config().boot != config->boot) {
      it->second->Reboot(config->boot);
    }
  }

  // The node terminated: its config went.
  void Gone(const std::string& name) {
    std::string id = fs::path(name).stem().string();
    auto it = agents_.find(id);
    if (it == agents_.end()) return;
    it->second->Stop();
    if (!it->second->long_gaps().empty()) past_gaps_[id] = it->second->long_gaps();
    auto host = by_host_.find(it->second->config().hostname);
    if (host != by_host_.end() && host->second == id) by_host_.erase(host);
    agents_.erase(it);
  }

  void ScanAll() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(agent_dir_, ec)) {
      if (e.path().extension() == ".json") Seen(e.path().filename().string());
    }
  }

  // One control line (on the I/O thread).
  void Control(const std::string& line) {
    std::istringstream in(line);
    std::string verb, ids;
    in >> verb >> ids;
    if (verb.empty()) return;
    if (verb == "stats") return Event({{"stats", Stats()}});
    if (verb == "quit") {
      g_stop = true;
      return;
    }
    std::vector<std::shared_ptr<SimAgent>> targets;
    std::vector<std::string> unknown;
    Json gaps = Json::object();
    std::stringstream list(ids);
    for (std::string id; std::getline(list, id, ',');) {
      if (auto h = by_host_.find(id); h != by_host_.end()) id = h->second;
      auto it = agents_.find(id);
      auto past = past_gaps_.find(id);
      if (verb == "gaps" && (it != agents_.end() || past != past_gaps_.end())) {
        gaps[id] = it != agents_.end() ? it->second->long_gaps() : past->second;
      } else if (it == agents_.end()) {
        unknown.push_back(id);
      } else {
        targets.push_back(it->second);
      }
    }
    if (verb == "gaps") return Event({{"reply", verb}, {"ok", unknown.empty()}, {"gaps", gaps}});
    std::string arg1, arg2;
    in >> arg1 >> arg2;
    bool known = true;
    for (auto& a : targets) {
      if (verb == "silence") {
        a->Silence(true);
      } else if (verb == "unsilence") {
        a->Silence(false);
      } else if (verb == "disconnect") {
        a->Disconnect();
      } else if (verb == "kill") {
        a->Kill();
      } else if (verb == "fail" && !arg1.empty()) {
        a->FailCheck(arg1, arg2.empty() ? "Replace" : arg2);
      } else if (verb == "late" && !arg1.empty()) {
        a->Late(std::chrono::milliseconds(std::atoll(arg1.c_str())));
      } else if (verb == "flap" && !arg1.empty()) {
        a->Flap(std::chrono::milliseconds(std::atoll(arg1.c_str())));
      } else {
        known = false;
      }
    }
    Event({{"reply", verb},
           {"ok", known && unknown.empty()},
           {"applied", targets.size()},
           {"unknown", unknown}});
  }

  Json Stats() const {
    size_t connected = 0, silent = 0, succeeded = 0;
    for (const auto& [id, a] : agents_) {
      connected += a->connected();
      silent += a->silent();
      succeeded += a->lifecycle_state() == "Succeeded";
    }
    return {{"agents", agents_.size()},
            {"connected", connected},
            {"silent", silent},
            {"lifecycle_succeeded", succeeded},
            {"connects", counters_.connects},
            {"refusals", counters_.refusals},
            {"closes", counters_.closes},
            {"sent", counters_.sent},
            {"received", counters_.received},
            {"commands", counters_.commands},
            {"errors", counters_.errors},
            {"heartbeats", counters_.heartbeats},
            {"max_heartbeat_gap_ms", counters_.max_heartbeat_gap_ms},
            {"heartbeat_gaps_over_5s", counters_.heartbeat_gaps_over_5s},
            {"connect_failures", counters_.connect_failures},
            {"joins", counters_.joins},
            {"join_failures", counters_.join_failures},
            {"join_retries", counters_.join_retries},
            {"join_retry_reasons", counters_.join_retry_reasons},
            {"max_join_ms", counters_.max_join_ms},
            {"failure_reasons", counters_.failure_reasons},
            {"received_by_type", counters_.received_by_type},
            {"received_bytes_by_type", counters_.received_bytes_by_type}};
  }

  void StopAll() {
    for (auto& [id, a] : agents_) a->Stop();
    agents_.clear();
  }

 private:
  const std::string agent_dir_;
  const std::string state_dir_;
  const std::chrono::milliseconds lifecycle_delay_;
  // Everything below on the I/O thread only (Event's lock aside).
  http::WebSocketSwarm swarm_;
  std::map<std::string, SlurmSim> slurm_;
  std::map<std::string, std::shared_ptr<SimAgent>> agents_;
  std::map<std::string, std::string> by_host_;
  // Agents gone (their nodes terminated) that had long heartbeat gaps: those gaps.
  std::map<std::string, std::deque<std::pair<double, double>>> past_gaps_;
  SimCounters counters_;
  std::mt19937_64 rng_;
  std::mutex out_mu_;
  // Last: destroyed (its threads joined) before the swarm its work posts to.
  BlockingPool pool_;
};

// Posts the agent dir's changes to the I/O thread until g_stop.
void WatchDir(Simulator& sim, int fd) {
  alignas(inotify_event) char buf[64 * 1024];
  while (!g_stop) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) continue;
    for (char* at = buf; at < buf + n;) {
      auto* e = reinterpret_cast<inotify_event*>(at);
      at += sizeof(inotify_event) + e->len;
      if (e->len == 0) continue;
      std::string name = e->name;
      if (fs::path(name).extension() != ".json") continue;  // WriteFileAtomic's temp files
      if (e->mask & (IN_MOVED_TO | IN_CLOSE_WRITE)) {
        sim.swarm().Post([&sim, name] { sim.Seen(name); });
      } else if (e->mask & (IN_DELETE | IN_MOVED_FROM)) {
        sim.swarm().Post([&sim, name] { sim.Gone(name); });
      }
    }
  }
}

}  // namespace
}  // namespace hpod::nodesim

int main(int argc, char** argv) {
  using hpod::nodesim::Simulator;
  CLI::App app{"hpod-nodesim: simulated node agents for hpodd-fake (tests and benchmarks)"};
  std::string agent_dir;
  int lifecycle_ms = 0;
  uint64_t seed = 1;
  std::string state_dir;
  int join_threads = 4;
  app.add_option("--agent-dir", agent_dir, "hpodd-fake's HPOD_FAKE_AGENT_DIR")->required();
  app.add_option("--state-dir", state_dir,
                 "Where each simulated node keeps its disk (a network agent's certificate); "
                 "default: AGENT_DIR/state");
  app.add_option("--join-threads", join_threads,
                 "Network agents' joins run at once (each is the real agent's blocking join)")
      ->check(CLI::Range(1, 64));
  app.add_option("--lifecycle-ms", lifecycle_ms, "How long each node's lifecycle scripts run")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", seed, "Seed of the jitter (heartbeat phases, reconnect backoff)");
  CLI11_PARSE(app, argc, argv);

  std::error_code ec;
  std::filesystem::create_directories(agent_dir, ec);
  if (state_dir.empty()) state_dir = (std::filesystem::path(agent_dir) / "state").string();
  std::filesystem::create_directories(state_dir, ec);
  int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, agent_dir.c_str(),
                                  IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM) < 0) {
    std::fprintf(stderr, "hpod-nodesim: cannot watch %s: %s\n", agent_dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, [](int) { hpod::nodesim::g_stop = true; });
  signal(SIGINT, [](int) { hpod::nodesim::g_stop = true; });

  auto sim = std::make_unique<Simulator>(
      agent_dir, state_dir, std::chrono::milliseconds(lifecycle_ms), seed, join_threads);
  sim->swarm().Post([] { pthread_setname_np(pthread_self(), "sim-io"); });
  std::thread watcher([&] { hpod::nodesim::WatchDir(*sim, fd); });
  // Configs written before the watch began.
  sim->swarm().Post([&] { sim->ScanAll(); });
  sim->Event({{"event", "ready"}, {"agent_dir", agent_dir}});

  // stdin on a thread of its own: a line at a time to the I/O thread. read(2),
  // not std::cin: a stream's buffer would hold lines that poll(2) cannot see.
  std::thread control([&] {
    std::string pending;
    char buf[4096];
    while (!hpod::nodesim::g_stop) {
      pollfd p{0, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      ssize_t n = read(0, buf, sizeof buf);
      if (n <= 0) break;  // EOF: keep running until a signal
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        sim->swarm().Post([&sim, line] { sim->Control(line); });
      }
    }
  });
  while (!hpod::nodesim::g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  watcher.join();
  control.join();
  std::atomic<bool> stopped{false};
  sim->swarm().Post([&] {
    sim->StopAll();
    stopped = true;
  });
  while (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  sim.reset();
  close(fd);
  return 0;
}
