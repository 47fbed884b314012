#pragma once

// Deep health checks (docs/node-health.md, "Deep health checks"): InstanceStress
// and InstanceConnectivity, run on nodes before they take work
// (OnStartDeepHealthChecks of an instance group, for each node it launches) or
// when asked (StartClusterHealthCheck, for Running nodes).
//
// - A node's check is a record kept as a cluster setting (DeepCheckSetting),
//   removed with the cluster: Requested → InProgress → Passed | Failed |
//   Unavailable, or back to Requested for another try (deep_health_run.cc).
// - The node concern's gate (GateDeepChecks) keeps a node whose check is due or
//   running in DeepHealthCheckInProgress instead of Running, so a cluster is not
//   InService, nor a recovery done, before its new nodes passed.
// - DeepHealthChecker, a thread of its own (a run takes seconds; the reconcile
//   workers must not wait on it), takes every due node of a cluster into one
//   run: it holds the Slurm compute nodes in a maintenance reservation
//   (hpod-deep-health; recorded as a setting first, so one left behind is
//   deleted on a later pass), returns while jobs still run on them and looks
//   again on the next pass, then runs hpod-deep-check on each node through its
//   agent (stress on each at once; connectivity on each group's nodes
//   together), ends the reservation and writes each node's result, with events
//   (deep_health_run.cc, deep_health_exec.h for what an answer means). A node
//   that failed gets a Replace recovery (the controller a Reboot, as every
//   recovery of it), through the same path as any health verdict.
// - Level-triggered: a run hpodd stopped in the middle writes nothing and is
//   taken again by the next hpodd, after a startup grace for the agents to
//   reconnect.
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
inline constexpr char kDeepCheckUnavailable[] = "Unavailable";
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
  nlohmann::json results = nlohmann::json::object();  // check → {outcome, message, detail}
  int attempts = 0;          // runs that said nothing of the node (deep_health_run.cc)
  int unjudged = 0;          // runs whose world did not form around another node
  double retry_after = 0;    // epoch seconds: not taken again before
  double waiting_since = 0;  // since when the run waits for Slurm jobs to end
  // Failed while replacing a node for a recovery in flight: the gate shows it in
  // Failure, so that recovery ends Failed rather than taking it for good.
  bool fail_node = false;

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
// record yet; and makes it Failure when its record says so (fail_node).
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
  std::chrono::milliseconds startup_grace{10000};
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

  // Start runs the first pass after `startup_grace` (agents reconnect to a new
  // hpodd meanwhile). RequestStop makes a run in flight end without writing
  // results (call it before the agents shut down); Stop also joins.
  void Start();
  void RequestStop();
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
