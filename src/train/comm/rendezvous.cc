#include "hpod/train/comm/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "fmt/format.h"
#include "hpod/base/hostlist.h"
#include "hpod/base/subprocess.h"
#include "hpod/train/comm/gloo_communicator.h"
#include "hpod/train/comm/nccl_communicator.h"

namespace hpod::train::comm {
namespace {

// A non-negative integer from the environment; nullopt when unset.
StatusOr<std::optional<int64_t>> EnvInt(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::optional<int64_t>();
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < 0 || x > (1 << 30)) {
    return InvalidArgumentError(fmt::format("{}={} is not a non-negative integer", name, v));
  }
  return std::optional<int64_t>(x);
}

std::string Env(const EnvLookup& env, const char* name, const std::string& fallback = "") {
  const char* v = env(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string Seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", ms.count() / 1000.0);
}

// The first host of the job's current node list. Where Slurm's commands are not
// installed (a container image without Slurm, run by `srun --container-image`),
// the first host of the step's own list, which every rank of the step shares.
StatusOr<std::string> SlurmMaster(const std::string& job_id, const EnvLookup& env,
                                  const CommandRunner& run) {
  auto shown = run({"scontrol", "show", "job", job_id});
  const std::string step_nodes = Env(env, "SLURM_STEP_NODELIST");
  if (!shown.ok() && shown.status().code() == StatusCode::kNotFound && !step_nodes.empty()) {
    auto hosts = ExpandHostlist(step_nodes);
    if (hosts.ok() && !hosts->empty()) return hosts->front();
  }
  if (!shown.ok()) {
    return FailedPreconditionError(
        fmt::format("cannot tell job {}'s nodes for the rendezvous master: {}; pass --master-addr",
                    job_id, shown.status().message()));
  }
  const std::string list = ParseJobNodeList(*shown);
  if (list.empty() || list == "(null)") {
    return FailedPreconditionError(
        fmt::format("`scontrol show job {}` has no NodeList; pass --master-addr", job_id));
  }
  auto hosts = run({"scontrol", "show", "hostnames", list});
  if (!hosts.ok()) {
    return FailedPreconditionError(fmt::format("cannot expand job {}'s node list {}: {}", job_id,
                                               list, hosts.status().message()));
  }
  std::string first = hosts->substr(0, hosts->find('\n'));
  while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.pop_back();
  if (first.empty()) {
    return FailedPreconditionError(
        fmt::format("job {}'s node list {} expands to nothing", job_id, list));
  }
  return first;
}

StatusOr<std::string> RunForOutput(const std::vector<std::string>& argv) {
  SubprocessOptions o;
  o.argv = argv;
  o.timeout = std::chrono::seconds(30);
  HPOD_ASSIGN_OR_RETURN(SubprocessResult r, RunCommand(o));
  if (r.exit_code != 0) {
    std::string err = r.stderr_data.substr(0, r.stderr_data.find('\n'));
    return UnavailableError(fmt::format("`{}` exited {}{}", fmt::join(argv, " "), r.exit_code,
                                        err.empty() ? "" : ": " + err));
  }
  return r.stdout_data;
}

}  // namespace

std::string ParseJobNodeList(const std::string& show_job) {
  static const std::regex re(R"((^|\s)NodeList=(\S+))");
  std::smatch m;
  return std::regex_search(show_job, m, re) ? m[2].str() : "";
}

StatusOr<World> ResolveWorld(const WorldFlags& f, const EnvLookup& env, const CommandRunner& run) {
  World w;
  const bool any_flag = f.rank >= 0 || f.world_size >= 0 || !f.master_addr.empty();
  HPOD_ASSIGN_OR_RETURN(auto env_port, EnvInt(env, "MASTER_PORT"));
  const int port = f.master_port > 0 ? f.master_port
                   : env_port        ? static_cast<int>(*env_port)
                                     : kDefaultMasterPort;
  if (port <= 0 || port > 65535) {
    return InvalidArgumentError(fmt::format("master port {} is outside 1..65535", port));
  }
  w.master_port = static_cast<uint16_t>(port);
  if (any_flag) {
    if (f.rank < 0 || f.world_size < 1 || (f.world_size > 1 && f.master_addr.empty())) {
      return InvalidArgumentError(
          "outside Slurm, a distributed run needs --rank, --world-size and --master-addr together "
          "(and the same --master-port on every rank)");
    }
    if (f.rank >= f.world_size) {
      return InvalidArgumentError(
          fmt::format("--rank {} must be below --world-size {}", f.rank, f.world_size));
    }
    w.rank = f.rank;
    w.size = f.world_size;
    w.local_rank = f.local_rank >= 0 ? f.local_rank : 0;
    w.master_addr = f.master_addr.empty() ? "127.0.0.1" : f.master_addr;
    w.source = "flags";
    w.run_id = Env(env, "HPOD_RUN_ID", "local");
    return w;
  }
  // Only an srun step is distributed: a batch script sees SLURM_NTASKS of
  // the whole allocation while it is one process.
  const std::string step = Env(env, "SLURM_STEP_ID", Env(env, "SLURM_STEPID"));
  HPOD_ASSIGN_OR_RETURN(auto procid, EnvInt(env, "SLURM_PROCID"));
  if (step.empty() || !procid) return w;
  HPOD_ASSIGN_OR_RETURN(auto ntasks, EnvInt(env, "SLURM_STEP_NUM_TASKS"));
  if (!ntasks) {
    HPOD_ASSIGN_OR_RETURN(ntasks, EnvInt(env, "SLURM_NTASKS"));
  }
  HPOD_ASSIGN_OR_RETURN(auto localid, EnvInt(env, "SLURM_LOCALID"));
  if (!ntasks || *ntasks < 1 || *procid >= *ntasks) {
    return InvalidArgumentError(
        fmt::format("Slurm step with SLURM_PROCID={} but {} tasks", *procid, ntasks ? *ntasks : 0));
  }
  w.rank = static_cast<int>(*procid);
  w.size = static_cast<int>(*ntasks);
  w.local_rank = localid ? static_cast<int>(*localid) : 0;
  const std::string job = Env(env, "SLURM_JOB_ID", Env(env, "SLURM_JOBID"));
  w.run_id =
      fmt::format("{}.{}.{}.{}", job.empty() ? "nojob" : job, step,
                  Env(env, "SLURM_RESTART_COUNT", "0"), Env(env, "HPOD_AUTO_RESUME_ATTEMPT", "0"));
  w.source = fmt::format("slurm job {} step {}", job, step);
  if (w.size == 1) return w;
  if (job.empty()) return InvalidArgumentError("a Slurm step without SLURM_JOB_ID");
  HPOD_ASSIGN_OR_RETURN(w.master_addr, SlurmMaster(job, env, run));
  return w;
}

StatusOr<World> ResolveWorld(const WorldFlags& flags) {
  return ResolveWorld(
      flags, [](const char* n) { return std::getenv(n); }, RunForOutput);
}

StatusOr<std::string> LocalAddressFacing(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int e = getaddrinfo(host.c_str(), "9", &hints, &res); e != 0) {
    return UnavailableError(
        fmt::format("cannot resolve the rendezvous master {}: {}", host, gai_strerror(e)));
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  Status st = OkStatus();
  std::string ip;
  if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    st = UnavailableError(
        fmt::format("no route to the rendezvous master {}: {}", host, std::strerror(errno)));
  } else {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf));
    ip = buf;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  HPOD_RETURN_IF_ERROR(st);
  return ip;
}

namespace {

// A rendezvous abort carries the giving-up rank's status: "<code>:<message>".
std::string ToAbort(const Status& st) {
  return std::to_string(static_cast<int>(st.code())) + ":" + st.message();
}
Status FromAbort(const std::string& value) {
  const size_t colon = value.find(':');
  const int code = colon == std::string::npos ? 0 : std::atoi(value.substr(0, colon).c_str());
  std::string message = colon == std::string::npos ? value : value.substr(colon + 1);
  return code == static_cast<int>(StatusCode::kFailedPrecondition)
             ? FailedPreconditionError(std::move(message))
             : DeadlineExceededError(std::move(message));
}

// The agreement itself; Agree() below adds the goodbye that keeps rank 0's
// store up until the others have read why the run cannot start.
Status AgreeOnce(Store& store, const std::string& prefix, const World& world,
                 const std::string& hostname, const nlohmann::json& agree,
                 std::chrono::milliseconds timeout, std::vector<std::string>* peer_names) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const nlohmann::json me = {{"host", std::string(host)},
                             {"address", hostname},
                             {"pid", static_cast<int64_t>(getpid())},
                             {"world_size", world.size},
                             {"agree", agree}};
  const std::string key = PrefixedKey(prefix, "rank/" + std::to_string(world.rank));
  HPOD_RETURN_IF_ERROR(store.Set(key, me.dump()));

  std::vector<std::string> keys, missing;
  for (int r = 0; r < world.size; ++r) {
    keys.push_back(PrefixedKey(prefix, "rank/" + std::to_string(r)));
  }
  // The first rank to give up says why to the others (whose waits end at
  // once with its reason), so every rank prints the one line that matters.
  const std::string abort_key = PrefixedKey(prefix, "abort");
  Status waited = store.Wait(keys, timeout, &missing, abort_key);
  if (waited.code() == StatusCode::kAborted) return FromAbort(waited.message());
  if (waited.code() == StatusCode::kDeadlineExceeded) {
    std::vector<std::string> ranks;
    for (const auto& k : missing) ranks.push_back(k.substr(k.rfind('/') + 1));
    Status gave_up = DeadlineExceededError(
        fmt::format("rank{} {} of {} never arrived at the rendezvous (master {}:{}) within {}",
                    ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "), world.size,
                    world.master_addr, world.master_port, Seconds(timeout)));
    (void)store.Set(abort_key, ToAbort(gave_up));
    return gave_up;
  }
  HPOD_RETURN_IF_ERROR(waited);

  std::vector<nlohmann::json> all(world.size);
  for (int r = 0; r < world.size; ++r) {
    HPOD_ASSIGN_OR_RETURN(std::string v, store.Get(keys[r], timeout));
    all[r] = nlohmann::json::parse(v, nullptr, false);
    if (!all[r].is_object())
      return DataLossError(fmt::format("rank {}'s rendezvous record is not JSON", r));
  }
  // Two processes that were both told to be this rank: the key holds the
  // other one's record (the later Set wins, so one of them sees it).
  if (all[world.rank]["pid"] != me["pid"] || all[world.rank]["host"] != me["host"]) {
    return FailedPreconditionError(fmt::format(
        "two processes claim rank {}: pid {} on {} and pid {} on {}; give each process its own "
        "--rank",
        world.rank, me["pid"].get<int64_t>(), me["host"].get<std::string>(),
        all[world.rank].value("pid", int64_t{0}), all[world.rank].value("host", std::string())));
  }
  if (peer_names != nullptr) {
    peer_names->clear();
    for (int r = 0; r < world.size; ++r) {
      peer_names->push_back(fmt::format("rank {} ({})", r, all[r].value("host", std::string("?"))));
    }
  }
  // Everything rank 0 says must agree, field by field (world_size first).
  for (int r = 1; r < world.size; ++r) {
    if (all[r]["world_size"] != all[0]["world_size"]) {
      return FailedPreconditionError(
          fmt::format("ranks disagree on world_size: rank 0 has {}, rank {} has {}",
                      all[0]["world_size"].dump(), r, all[r]["world_size"].dump()));
    }
    const nlohmann::json& a = all[0]["agree"];
    const nlohmann::json& b = all[r]["agree"];
    for (auto it = a.begin(); it != a.end(); ++it) {
      const auto other = b.find(it.key());
      const std::string theirs = other == b.end() ? "nothing" : other->dump();
      if (other == b.end() || *other != it.value()) {
        std::string mine = it.value().dump();
        if (mine.size() > 200) mine = mine.substr(0, 200) + "...";
        std::string them = theirs.size() > 200 ? theirs.substr(0, 200) + "..." : theirs;
        return FailedPreconditionError(fmt::format(
            "ranks disagree on {}: rank 0 has {}, rank {} has {}; start every rank with the same "
            "options",
            it.key(), mine, r, them));
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status Agree(Store& store, const std::string& prefix, const World& world,
             const std::string& hostname, const nlohmann::json& agree,
             std::chrono::milliseconds timeout, std::vector<std::string>* peer_names) {
  Status st = AgreeOnce(store, prefix, world, hostname, agree, timeout, peer_names);
  if (st.ok()) return st;
  // Every rank finds a disagreement itself, but rank 0 may find it first: if
  // it exited at once, its store would go before the others read the records
  // and they would report a closed connection instead of the reason. So the
  // others say goodbye, and rank 0 waits (briefly) for those that arrived.
  const auto key = [&](const std::string& what, int r) {
    return PrefixedKey(prefix, what + "/" + std::to_string(r));
  };
  if (world.rank != 0) {
    (void)store.Set(key("left", world.rank), "");
    return st;
  }
  (void)store.Set(PrefixedKey(prefix, "abort"), ToAbort(st));
  std::vector<std::string> arrived;
  for (int r = 1; r < world.size; ++r) {
    auto has = store.Check(key("rank", r));
    if (has.ok() && *has) arrived.push_back(key("left", r));
  }
  (void)store.Wait(arrived, std::chrono::seconds(5), nullptr, "");
  return st;
}

StatusOr<std::unique_ptr<Store>> JoinedWorld::ConnectStore() const {
  HPOD_ASSIGN_OR_RETURN(auto s, TcpStore::Connect(world.master_addr, world.master_port,
                                                  std::chrono::seconds(60), "rank 0"));
  return std::unique_ptr<Store>(std::move(s));
}

StatusOr<JoinedWorld> JoinWorld(const World& world, const nlohmann::json& agree,
                                const JoinOptions& options) {
  JoinedWorld j;
  j.world = world;
  j.prefix = "hpod-train/" + world.run_id;
  if (world.size == 1) {
    j.comm = MakeSelfCommunicator();
    j.peer_names = {"rank 0"};
    return j;
  }
  HPOD_ASSIGN_OR_RETURN(j.hostname, LocalAddressFacing(world.master_addr));
  if (world.rank == 0) {
    HPOD_ASSIGN_OR_RETURN(j.server, TcpStoreServer::Start("0.0.0.0", world.master_port));
  }
  HPOD_ASSIGN_OR_RETURN(auto client, TcpStore::Connect(world.master_addr, world.master_port,
                                                       options.rendezvous_timeout, "rank 0"));
  j.store = std::move(client);
  HPOD_RETURN_IF_ERROR(Agree(*j.store, j.prefix, world, j.hostname, agree,
                             options.rendezvous_timeout, &j.peer_names));
  if (options.backend == "nccl") {
    NcclOptions n;
    n.rank = world.rank;
    n.size = world.size;
    n.device = world.local_rank;
    n.timeout = options.collective_timeout;
    n.prefix = j.prefix;
    HPOD_ASSIGN_OR_RETURN(j.comm, ConnectNccl(*j.store, n));
    return j;
  }
  GlooOptions g;
  g.rank = world.rank;
  g.size = world.size;
  g.hostname = j.hostname;
  g.timeout = options.collective_timeout;
  g.prefix = j.prefix;
  g.peer_names = j.peer_names;
  g.failure_store = j.store.get();  // outlives the communicator (JoinedWorld's order)
  HPOD_ASSIGN_OR_RETURN(j.comm, ConnectGloo(*j.store, g));
  return j;
}

}  // namespace hpod::train::comm
