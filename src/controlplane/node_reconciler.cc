#include "hpod/controlplane/node_reconciler.h"

#include <algorithm>
#include <map>
#include <thread>

namespace hpod::controlplane {

using api::ClusterInstanceStatus;
using api::LifecycleState;
using store::ClusterRecord;
using store::GroupRecord;
using store::NodeRecord;

namespace {

constexpr char kNoProvider[] =
    "hpodd has no node provider configured, so no instance can be launched";
constexpr char kNoCapacity[] =
    "We currently do not have sufficient capacity for the requested instance type(s). Please try "
    "again.";

bool IsTransient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kAborted;
}

}  // namespace

api::NodePhase PhaseOf(const NodeRecord& n) {
  if (n.remove) return api::NodePhase::kRemoving;
  if (api::Is(n.status, ClusterInstanceStatus::kFailure)) return api::NodePhase::kFailed;
  if (!n.launched) return api::NodePhase::kToLaunch;
  if (api::Is(n.status, ClusterInstanceStatus::kRunning)) return api::NodePhase::kRunning;
  return api::NodePhase::kProvisioning;
}

NodeReconciler::NodeReconciler(provider::Provider* provider, const Clock& clock,
                               const ControlPlaneOptions& options,
                               std::function<std::string(const std::string&)> bootstrap_token,
                               SlurmReconciler& slurm)
    : provider_(provider),
      clock_(clock),
      options_(options),
      bootstrap_token_(std::move(bootstrap_token)),
      slurm_(slurm) {}

Status NodeReconciler::Act(const ClusterRecord& cluster, const std::vector<GroupRecord>& groups,
                           const std::vector<NodeRecord>& nodes,
                           const std::map<std::string, store::AgentRecord>& agents,
                           SlurmReconciler::Pass& slurm, const std::set<std::string>& held,
                           const std::map<std::string, std::string>& images,
                           std::vector<NodeChange>* changes) {
  std::map<std::string, const GroupRecord*> gmap;
  for (const auto& g : groups) gmap[g.name] = &g;
  Status transient = OkStatus();
  // Launches first, several at once: a provider call may take a while per node
  // (a cloud API, a machine to boot), and a replacement must not wait behind the
  // others. The provider is thread-safe; each launch writes only its own change.
  std::vector<const NodeRecord*> to_launch;
  const double now = clock_.NowEpochSeconds();
  for (const NodeRecord& n : nodes) {
    // A provisioning retry waits for its backoff (provisioning.h).
    if (!held.count(n.instance_id) && PhaseOf(n) == api::NodePhase::kToLaunch &&
        n.not_before <= now) {
      to_launch.push_back(&n);
    }
  }
  // Replacements (an address already chosen) go first, one by one: the provider
  // frees a failed node's address at its termination, and a new node launched
  // beside them must not take it.
  std::stable_partition(to_launch.begin(), to_launch.end(),
                        [](const NodeRecord* n) { return !n->private_ip.empty(); });
  const size_t preset = static_cast<size_t>(
      std::count_if(to_launch.begin(), to_launch.end(),
                    [](const NodeRecord* n) { return !n->private_ip.empty(); }));
  constexpr size_t kParallelLaunches = 8;
  for (size_t first = 0; first < to_launch.size();) {
    const size_t count = first < preset ? 1 : std::min(kParallelLaunches, to_launch.size() - first);
    std::vector<NodeChange> launched(count);
    std::vector<Status> results(count);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < count; ++i) {
      launched[i].instance_id = to_launch[first + i]->instance_id;
      auto launch = [&, i] {
        results[i] = Launch(cluster, gmap, images, *to_launch[first + i], &launched[i]);
      };
      if (count == 1) {
        launch();
      } else {
        threads.emplace_back(launch);
      }
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < count; ++i) {
      // A transient failure leaves the node as it was; the pass is retried.
      if (!results[i].ok()) {
        transient = results[i];
        continue;
      }
      changes->push_back(std::move(launched[i]));
    }
    first += count;
  }
  // A node waiting for capacity says how short its group is: "…: 2 of 3".
  std::map<std::string, const NodeRecord*> by_id;
  std::map<std::string, int> launched_of;
  for (const NodeRecord& n : nodes) {
    by_id[n.instance_id] = &n;
    if (!n.remove && n.launched) ++launched_of[n.group_name];
  }
  for (const NodeChange& c : *changes) {
    if (c.launched) ++launched_of[by_id.at(c.instance_id)->group_name];
  }
  for (NodeChange& c : *changes) {
    if (!c.waiting) continue;
    const std::string& group = by_id.at(c.instance_id)->group_name;
    if (auto g = gmap.find(group); g != gmap.end()) {
      c.message += ": " + std::to_string(launched_of[group]) + " of " +
                   std::to_string(g->second->target_count);
    }
  }
  for (const NodeRecord& n : nodes) {
    if (held.count(n.instance_id) || PhaseOf(n) == api::NodePhase::kToLaunch) continue;
    NodeChange change;
    change.instance_id = n.instance_id;
    Status s = OkStatus();
    switch (PhaseOf(n)) {
      case api::NodePhase::kRemoving:
        s = Remove(n, slurm, &change);
        break;
      case api::NodePhase::kFailed:
        continue;  // stays until removed or recovered (health_reconciler.h)
      case api::NodePhase::kToLaunch:
        continue;  // launched above
      case api::NodePhase::kProvisioning:
      case api::NodePhase::kRunning:
        s = Observe(n, agents, slurm, &change);
        break;
    }
    // A transient failure leaves the node as it was; the pass is retried.
    if (!s.ok()) {
      transient = s;
      continue;
    }
    changes->push_back(std::move(change));
  }
  return transient;
}

Status NodeReconciler::Remove(const NodeRecord& n, SlurmReconciler::Pass& slurm,
                              NodeChange* change) {
  slurm_.WaitDone(n.instance_id);
  if (provider_ == nullptr) {
    change->gone = true;
    return OkStatus();
  }
  if (!slurm_.ReadyToTerminate(slurm, n)) {
    change->status = ClusterInstanceStatus::kShuttingDown;
    return OkStatus();
  }
  // Terminate even when `launched` is false: a crash may have come between an
  // accepted Launch and recording it.
  HPOD_ASSIGN_OR_RETURN(bool gone, provider::TerminateAndCheckGone(*provider_, n.instance_id));
  if (gone) {
    change->gone = true;
  } else {
    change->status = ClusterInstanceStatus::kShuttingDown;
  }
  return OkStatus();
}

Status NodeReconciler::Launch(const ClusterRecord& cluster,
                              const std::map<std::string, const GroupRecord*>& groups,
                              const std::map<std::string, std::string>& images, const NodeRecord& n,
                              NodeChange* change) {
  if (provider_ == nullptr) {
    change->status = ClusterInstanceStatus::kFailure;
    change->message = kNoProvider;
    return OkStatus();
  }
  provider::LaunchSpec spec;
  spec.instance_id = n.instance_id;
  spec.cluster_id = cluster.id;
  spec.cluster_name = cluster.name;
  spec.cluster_arn = cluster.arn;
  spec.group_name = n.group_name;
  spec.instance_name = n.group_name + "-" + std::to_string(n.ordinal);
  auto git = groups.find(n.group_name);
  if (git != groups.end()) {
    spec.group_spec = git->second->spec;
    spec.instance_type = git->second->spec.value("InstanceType", "");
  }
  if (auto image = images.find(n.group_name); image != images.end()) {
    spec.image_id = image->second;
  }
  if (bootstrap_token_) spec.bootstrap_token = bootstrap_token_(n.instance_id);
  // Set before launch only for a replacement, which keeps the failed node's
  // address and so its hostname and Slurm NodeName, where the provider's nodes can
  // (NodeEnvironment::replacement_keeps_address); elsewhere the provider picks.
  if (provider_->Environment().replacement_keeps_address) spec.private_ip = n.private_ip;
  Status s = provider_->Launch(spec);
  if (s.code() == StatusCode::kResourceExhausted && provider_->CapacityArrives()) {
    // Capacity comes by itself (hosts joining a pool): the node waits, Pending,
    // and the launch is tried again on each pass; Act adds how short its group is.
    change->status = ClusterInstanceStatus::kPending;
    change->message = s.message();
    change->waiting = true;
  } else if (s.code() == StatusCode::kResourceExhausted) {
    change->status = ClusterInstanceStatus::kFailure;
    change->message = kNoCapacity;
  } else if (IsTransient(s)) {
    return s;
  } else if (!s.ok()) {
    change->status = ClusterInstanceStatus::kFailure;
    change->message = s.message();
  } else {
    change->launched = true;
  }
  return OkStatus();
}

Status NodeReconciler::Observe(const NodeRecord& n,
                               const std::map<std::string, store::AgentRecord>& agents,
                               SlurmReconciler::Pass& slurm, NodeChange* change) {
  auto d = provider_ ? provider_->Describe(n.instance_id)
                     : StatusOr<provider::NodeObservation>(NotFoundError("no provider"));
  if (!d.ok() && d.status().code() != StatusCode::kNotFound) return d.status();
  if (!d.ok()) {
    change->status = ClusterInstanceStatus::kFailure;
    change->message = "The instance no longer exists at the provider";
    return OkStatus();
  }
  change->private_ip = d->private_ip;
  change->hostname = d->hostname;
  switch (d->state) {
    case provider::NodeState::kPending:
      change->status = ClusterInstanceStatus::kPending;
      break;
    case provider::NodeState::kRunning:
      change->status = ClusterInstanceStatus::kRunning;
      if (AgentsDecide()) FromAgent(n, agents, slurm, change);
      break;
    case provider::NodeState::kFailed:
      change->status = ClusterInstanceStatus::kFailure;
      change->message = d->message;
      break;
    case provider::NodeState::kTerminating:
    case provider::NodeState::kTerminated:
      change->status = ClusterInstanceStatus::kFailure;
      change->message = "The instance was terminated outside hpod";
      break;
  }
  if (change->message.empty()) change->message = d->message;
  return OkStatus();
}

bool NodeReconciler::JoinedLately(const NodeRecord& n) const {
  if (!joined_at_) return false;
  std::optional<double> joined = joined_at_(n.instance_id);
  // A pool host joined long before this launch: the launch's deadline stands.
  return joined && *joined > n.launch_time &&
         clock_.NowEpochSeconds() - *joined <= options_.agent_register_timeout.count();
}

void NodeReconciler::FromAgent(const NodeRecord& n,
                               const std::map<std::string, store::AgentRecord>& agents,
                               SlurmReconciler::Pass& slurm, NodeChange* change) {
  using Mode = SlurmPlan::Mode;
  const bool was_running = api::Is(n.status, ClusterInstanceStatus::kRunning);
  // The machine is up; the node is Running once its lifecycle scripts succeeded,
  // as on HyperPod.
  auto a = agents.find(n.instance_id);
  std::optional<LifecycleState> lifecycle;
  if (a != agents.end()) lifecycle = api::Parse<LifecycleState>(a->second.lifecycle_state);
  double age = clock_.NowEpochSeconds() - n.launch_time;
  const std::optional<SlurmPlan>& plan = slurm.plan;
  if (a != agents.end() && lifecycle != LifecycleState::kSucceeded &&
      lifecycle != LifecycleState::kFailed && plan) {
    if (plan->mode == Mode::kError && !was_running) {
      // The roles cannot be worked out (provisioning_parameters.json): the node
      // fails now, not after a script that waits for a slurm.conf never coming.
      change->status = ClusterInstanceStatus::kFailure;
      change->message = plan->error;
      return;
    }
    // While its lifecycle scripts run, the node already gets its Slurm part (its
    // agent waits for it before the script starts: slurm.conf is in place first,
    // as on HyperPod); Slurm's daemons start once the scripts succeeded, or when
    // a script starts them with systemctl (PROTOCOL.md, slurm).
    if (plan->mode == Mode::kNone || plan->Ready()) slurm_.SyncNode(slurm, n);
  }
  if (lifecycle == LifecycleState::kSucceeded) {
    change->status = ClusterInstanceStatus::kRunning;
    if (plan && plan->mode == Mode::kError && !was_running) {
      change->status = ClusterInstanceStatus::kFailure;
      change->message = plan->error;
    } else if (plan && plan->mode == Mode::kWaiting) {
      if (!was_running) change->status = ClusterInstanceStatus::kPending;
    } else if (plan && plan->mode == Mode::kNone) {
      // Tells the node it has no Slurm; not awaited (a node without Slurm is
      // Running once its scripts succeeded).
      slurm_.SyncNode(slurm, n);
    } else if (plan && plan->mode == Mode::kSlurm) {
      // Running only once the node's part of Slurm is up, as the user will use it
      // right away.
      bool up = plan->Ready() && slurm_.SyncNode(slurm, n);
      if (!up && !was_running) change->status = ClusterInstanceStatus::kPending;
    }
    if (plan && change->status == ClusterInstanceStatus::kPending) {
      // Bounded, so a cluster never sits in Creating for good.
      if (auto why = slurm_.WaitExpired(slurm, n)) {
        change->status = ClusterInstanceStatus::kFailure;
        change->message = *why;
      }
    } else {
      slurm_.WaitDone(n.instance_id);
    }
  } else if (lifecycle == LifecycleState::kFailed) {
    change->status = ClusterInstanceStatus::kFailure;
    change->message = a->second.lifecycle_message;
  } else if (a == agents.end() && api::Is(n.status, ClusterInstanceStatus::kPending) &&
             age > options_.agent_register_timeout.count() && !JoinedLately(n)) {
    change->status = ClusterInstanceStatus::kFailure;
    change->message = "The hpod agent on the instance did not register with hpodd within " +
                      std::to_string(options_.agent_register_timeout.count()) +
                      " seconds (see `hpod logs --stream Agent` and the node's node-init.log)";
  } else if (was_running) {
    change->status = ClusterInstanceStatus::kRunning;  // a running node whose agent reconnects
  } else {
    change->status = ClusterInstanceStatus::kPending;
  }
}

}  // namespace hpod::controlplane
