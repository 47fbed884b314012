// How the ranks of a distributed hpod-train run find each other and agree.
//
// 1. ResolveWorld: rank, world size and the master (rank 0's host) come from
//    flags (--rank --world-size --master-addr --master-port) or, under srun,
//    from Slurm: SLURM_PROCID, SLURM_STEP_NUM_TASKS (SLURM_NTASKS),
//    SLURM_LOCALID, and the master is the first host of the job's *current*
//    node list, asked of `scontrol show job` + `scontrol show hostnames` and
//    never read from SLURM_JOB_NODELIST, which a job whose node was replaced
//    still carries stale (HyperPod's documented rule). No flags and no srun
//    step: a world of one.
// 2. JoinWorld: rank 0 serves the store (store.h) on the master port; every
//    rank connects, publishes what the run must agree on, waits for all the
//    others, and compares: a rank that never arrives, two processes claiming
//    one rank, or ranks started with different options (model, batch size,
//    seed, data, world size, ...) are one-line errors before any step runs,
//    on every rank. Then the communicator connects every pair.
//
// Thread contract: free functions; a JoinedWorld is owned by one thread (its
// store is thread-safe, its communicator is not).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/comm/communicator.h"
#include "hpod/train/comm/store.h"

namespace hpod::train::comm {

inline constexpr uint16_t kDefaultMasterPort = 29500;

// What the command line says (unset: -1 / empty / 0).
struct WorldFlags {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  std::string master_addr;
  int master_port = 0;
};

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string master_addr;  // rank 0's host (name or IP)
  uint16_t master_port = kDefaultMasterPort;
  // Keys of this attempt: "<job>.<step>.<restart>" under Slurm, "local"
  // otherwise, so a straggler of an earlier attempt never joins this one.
  std::string run_id = "local";
  std::string source = "single process";  // "slurm job 42 step 0", "flags"
};

// The environment and a command runner, as seams for tests.
using EnvLookup = std::function<const char*(const char*)>;
// Runs argv and returns its stdout, or an error naming the command.
using CommandRunner = std::function<StatusOr<std::string>(const std::vector<std::string>& argv)>;

// Flags win over Slurm; a partial set of flags is an InvalidArgument naming
// what is missing. InvalidArgument for malformed SLURM_* values;
// FailedPrecondition when scontrol cannot tell the job's nodes.
StatusOr<World> ResolveWorld(const WorldFlags& flags, const EnvLookup& env,
                             const CommandRunner& run);
// The same with the process environment and base's subprocess runner.
StatusOr<World> ResolveWorld(const WorldFlags& flags);

// "ip-10-77-1-[11-13],ip-10-77-2-5" is expanded by scontrol; this parses the
// NodeList= field out of `scontrol show job` output ("" when absent).
std::string ParseJobNodeList(const std::string& show_job);

struct JoinOptions {
  // For the rendezvous (every rank arriving) and for connecting the mesh.
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
  // The default of every collective.
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(60)};
  // "gloo" or "nccl" (the GPU of the local rank).
  std::string backend = "gloo";
};

// A rank's view of the joined world.
struct JoinedWorld {
  World world;
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only
  std::unique_ptr<Store> store;
  std::unique_ptr<Communicator> comm;
  std::string prefix;                   // store keys of this run
  std::vector<std::string> peer_names;  // "rank 2 (ip-10-77-1-13)" by rank
  std::string hostname;                 // this rank's address for the transport
  // A second connection to the store (e.g. for a checkpoint writer thread).
  StatusOr<std::unique_ptr<Store>> ConnectStore() const;
};

// Agreement over `store` (ranks as threads use a shared HashStore): publishes
// `agree` (a JSON object of fields that must be equal on every rank) with this
// rank's host and pid, waits for every rank and compares. Fills peer names.
Status Agree(Store& store, const std::string& prefix, const World& world,
             const std::string& hostname, const nlohmann::json& agree,
             std::chrono::milliseconds timeout, std::vector<std::string>* peer_names);

// Serves (rank 0) or reaches the store, Agree()s, and connects the gloo
// communicator. For a world of one: no store, a self communicator.
StatusOr<JoinedWorld> JoinWorld(const World& world, const nlohmann::json& agree,
                                const JoinOptions& options);

// The local IPv4 address this host uses to reach `host` (a UDP connect; no
// packet is sent). The transport binds to it, so peers reach it too.
StatusOr<std::string> LocalAddressFacing(const std::string& host);

}  // namespace hpod::train::comm
