#pragma once

// Deep health checks (docs/node-health.md, "Deep health checks"): InstanceStress
// and InstanceConnectivity, run on nodes before they take work
// (OnStartDeepHealthChecks of an instance group, for each node it launches) or
// when asked (StartClusterHealthCheck, for Running nodes).
//
// - A node's check is a record kept as a cluster setting (DeepCheckSetting),
//   removed with the cluster: Requested → Running → Passed | Failed.
// - The node concern's gate (GateDeepChecks) keeps a node whose check is due or
//   running in DeepHealthCheckInProgress instead of Running, so a cluster is not
//   InService, nor a recovery done, before its new nodes passed.
// - DeepHealthChecker, a thread of its own (a run takes seconds; the reconcile
//   workers must not wait on it), takes every due node of a cluster into one
//   run: it holds the Slurm nodes in a maintenance reservation
//   (hpod-deep-health) and waits for their jobs to end, runs hpod-deep-check on
//   each node through its agent (stress on each at once; connectivity on all
//   of them together), ends the reservation and writes each node's result, with
//   events. A node that failed gets a Replace recovery (the controller a Reboot,
//   as every recovery of it), through the same path as any health verdict.
// - Level-triggered: a run that hpodd did not finish (a restart) is taken again
//   on the next pass; the reservation's fixed name means a new run replaces a
//   left-over one.
//
// Thread contract: the free functions are safe anywhere; DeepHealthChecker's
// methods may be called from any thread (Pass runs one pass at a time).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/node_reconciler.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

inline constexpr char kDeepCheckRequested[] = "Requested";
inline constexpr char kDeepCheckRunning[] = "InProgress";
inline constexpr char kDeepCheckPassed[] = "Passed";
inline constexpr char kDeepCheckFailed[] = "Failed";
inline constexpr char kDeepHealthReservation[] = "hpod-deep-health";

std::string DeepCheckPrefix(const std::string& cluster_id);
std::string DeepCheckSetting(const std::string& cluster_id, const std::string& instance_id);

struct DeepCheck {
  std::string instance_id;
  std::vector<std::string> checks;  // InstanceStress, InstanceConnectivity
  std::string state = kDeepCheckRequested;
  std::string origin;  // OnStartDeepHealthChecks | StartClusterHealthCheck
  std::string run;     // the run that took it
  double requested = 0, started = 0, finished = 0;    // epoch seconds
  std::string message;                                // where it stands, or what it found
  nlohmann::json results = nlohmann::json::object();  // check → {passed, message, detail}

  bool Active() const { return state == kDeepCheckRequested || state == kDeepCheckRunning; }
  nlohmann::json ToJson() const;
  static DeepCheck FromJson(const std::string& instance_id, const nlohmann::json& j);
};

// A cluster's records by instance id (unreadable ones are skipped).
StatusOr<std::map<std::string, DeepCheck>> LoadDeepChecks(store::ReadTx& tx,
                                                          const std::string& cluster_id);
Status PutDeepCheck(store::WriteTx& tx, const std::string& cluster_id, const DeepCheck& check);

// The group's OnStartDeepHealthChecks (empty when none).
std::vector<std::string> OnStartChecks(const store::GroupRecord& group);

// The node concern's gate: a change that would make a node Running keeps it in
// DeepHealthCheckInProgress while its record is due or running, or while it is
// new (not Running before) in a group with OnStartDeepHealthChecks and has no
// record yet.
void GateDeepChecks(const std::vector<store::GroupRecord>& groups,
                    const std::vector<store::NodeRecord>& nodes,
                    const std::map<std::string, DeepCheck>& checks,
                    std::vector<NodeChange>* changes);

struct DeepHealthOptions {
  std::chrono::milliseconds poll{1000};
  int stress_seconds = 5;
  // The program the agents run (found beside hpod-agent, or on the node's PATH).
  std::string program = "hpod-deep-check";
  int rendezvous_port = 29650;
  int iperf_port = 5301;
  // How long a run waits for jobs on its reserved nodes to end.
  std::chrono::seconds job_wait{3600};
};

class DeepHealthChecker {
 public:
  using RunFn = std::function<StatusOr<CommandResult>(const std::string& instance_id,
                                                      const std::vector<std::string>& argv,
                                                      std::chrono::milliseconds timeout)>;
  // `run` runs argv as root on a node through its agent; `wake` is called with
  // a cluster id after results were written.
  DeepHealthChecker(store::Store& store, const Clock& clock, DeepHealthOptions options, RunFn run,
                    std::function<void(const std::string&)> wake);
  ~DeepHealthChecker();

  void Start();
  void Stop();

  // One pass over every cluster: each runs its due checks (public for tests).
  Status Pass();
  Status RunCluster(const std::string& cluster_id);

 private:
  void Loop();

  store::Store& store_;
  const Clock& clock_;
  const DeepHealthOptions options_;
  const RunFn run_;
  const std::function<void(const std::string&)> wake_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
  Mutex pass_mu_;  // one pass at a time
};

}  // namespace hpod::controlplane
