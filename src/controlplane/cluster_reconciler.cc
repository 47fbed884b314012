#include "hpod/controlplane/cluster_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/ids.h"

namespace hpod::controlplane {

using store::ClusterRecord;
using store::GroupRecord;
using store::NodeRecord;

namespace {

constexpr char kNoProvider[] =
    "hpodd has no node provider configured, so no instance can be launched";
constexpr char kNoCapacity[] =
    "We currently do not have sufficient capacity for the requested instance type(s). Please try "
    "again.";

std::vector<NodeRecord> NodesOf(const std::vector<NodeRecord>& nodes, const std::string& group) {
  std::vector<NodeRecord> out;
  for (const auto& n : nodes) {
    if (n.group_name == group) out.push_back(n);
  }
  return out;
}

bool GroupConverged(const GroupRecord& g, const std::vector<NodeRecord>& nodes) {
  if (g.deleting) return false;
  int running = 0;
  for (const auto& n : nodes) {
    if (n.group_name != g.name) continue;
    if (n.remove || n.status != "Running") return false;
    ++running;
  }
  return running == g.target_count;
}

}  // namespace

std::string ProvisioningFailureMessage(const std::string& instance_id, const std::string& why) {
  return "Instance " + instance_id + " failed to provision with the following error: \"" + why +
         "\" Note that multiple instances may be impacted.";
}

struct ClusterReconciler::Observation {
  std::string instance_id;
  bool gone = false;                  // terminated and forgotten: delete the row
  bool launched = false;              // Launch acknowledged in this pass
  std::optional<std::string> status;  // new ClusterInstanceStatus, if observed
  std::string message;
  std::string private_ip;
  std::string hostname;
};

ClusterReconciler::ClusterReconciler(store::Store& store, provider::Provider* provider,
                                     const Clock& clock, const ControlPlaneOptions& options,
                                     std::function<std::string(const std::string&)> bootstrap_token,
                                     SlurmAgents* slurm_agents)
    : store_(store),
      provider_(provider),
      clock_(clock),
      options_(options),
      bootstrap_token_(std::move(bootstrap_token)),
      slurm_agents_(slurm_agents) {}

WorkQueue::Result ClusterReconciler::Reconcile(const std::string& cluster_id) {
  Status s = PlanNodes(cluster_id);
  if (s.code() == StatusCode::kNotFound) return {OkStatus(), {}};  // deleted
  if (!s.ok()) return {s, {}};
  bool slurm_busy = false;
  auto observations = ActOnNodes(cluster_id, &slurm_busy);
  if (!observations.ok()) {
    if (observations.status().code() == StatusCode::kNotFound) return {OkStatus(), {}};
    return {observations.status(), {}};
  }
  auto converged = RecordAndRollUp(cluster_id, *observations);
  if (!converged.ok()) {
    if (converged.status().code() == StatusCode::kNotFound) return {OkStatus(), {}};
    return {converged.status(), {}};
  }
  // A converged cluster is revisited by the daemon's periodic resync; one still
  // converging is polled.
  return {OkStatus(),
          *converged && !slurm_busy ? std::chrono::milliseconds(0) : options_.poll_interval};
}

// Phase 1: write intents. Decides which nodes should exist (creating rows for
// missing ones) and which should go (marking them), from a fresh read inside the
// transaction so a concurrent handler's change is never overwritten.
Status ClusterReconciler::PlanNodes(const std::string& cluster_id) {
  return store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(ClusterRecord c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));
    auto mark_remove = [&](NodeRecord n) -> Status {
      if (n.remove) return OkStatus();
      n.remove = true;
      return tx.PutNode(n);
    };
    if (c.status == "Deleting" || c.status == "Failed") {
      for (const auto& n : nodes) HPOD_RETURN_IF_ERROR(mark_remove(n));
      return OkStatus();
    }
    for (const GroupRecord& g : groups) {
      std::vector<NodeRecord> mine = NodesOf(nodes, g.name);
      if (g.deleting) {
        for (const auto& n : mine) HPOD_RETURN_IF_ERROR(mark_remove(n));
        continue;
      }
      std::vector<NodeRecord> live;
      std::set<int> used_ordinals;
      for (const auto& n : mine) {
        used_ordinals.insert(n.ordinal);
        if (!n.remove && n.status != "Failure") live.push_back(n);
      }
      int have = static_cast<int>(live.size());
      // A failed node is not replaced here: while provisioning is all-or-nothing
      // the roll-up below fails (or rolls back) the operation instead, and on an
      // InService cluster replacing a node is node recovery's decision.
      bool has_failed = false;
      for (const auto& n : mine) has_failed |= (!n.remove && n.status == "Failure");
      if (have < g.target_count && !has_failed) {
        int ordinal = 1;
        for (int i = have; i < g.target_count; ++i) {
          while (used_ordinals.count(ordinal)) ++ordinal;
          used_ordinals.insert(ordinal);
          NodeRecord n;
          n.instance_id = NewInstanceId();
          n.cluster_id = c.id;
          n.group_name = g.name;
          n.ordinal = ordinal;
          n.status = "Pending";
          n.launch_time = clock_.NowEpochSeconds();
          n.logical_id = NewNodeLogicalId(g.name + "-" + std::to_string(ordinal));
          n.created_generation = c.generation;
          HPOD_RETURN_IF_ERROR(tx.PutNode(n));
          HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, NodeSubject(g.name, n.instance_id),
                                           EventLevel::kInfo,
                                           "Instance " + g.name + "-" + std::to_string(ordinal) +
                                               " is Pending: launch requested"));
        }
      } else if (have > g.target_count) {
        // Scale down: drop the newest first, not-yet-running before running.
        std::sort(live.begin(), live.end(), [](const NodeRecord& a, const NodeRecord& b) {
          bool ar = a.status == "Running", br = b.status == "Running";
          if (ar != br) return !ar;
          return a.ordinal > b.ordinal;
        });
        for (int i = 0; i < have - g.target_count; ++i) {
          HPOD_RETURN_IF_ERROR(mark_remove(live[i]));
        }
      }
    }
    return OkStatus();
  });
}

// Phase 2: provider calls, outside any transaction.
StatusOr<std::vector<ClusterReconciler::Observation>> ClusterReconciler::ActOnNodes(
    const std::string& cluster_id, bool* slurm_busy) {
  ClusterRecord c;
  std::vector<GroupRecord> groups;
  std::vector<NodeRecord> nodes;
  std::map<std::string, store::AgentRecord> agents;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto list, tx.ListAgents(cluster_id));
    for (auto& a : list) agents[a.instance_id] = std::move(a);
    return OkStatus();
  }));
  const bool agents_decide = provider_ != nullptr && provider_->RunsAgents();
  const bool winding_down = c.status == "Deleting" || c.status == "Failed";
  std::optional<SlurmPlan> plan;
  std::optional<SlurmNodesReport> report;
  {
    // Removal clocks live as long as this cluster's node rows marked for removal.
    std::lock_guard<std::mutex> lock(removals_mu_);
    auto& clocks = removals_[cluster_id];
    std::erase_if(clocks, [&](const auto& entry) {
      return std::none_of(nodes.begin(), nodes.end(), [&](const NodeRecord& n) {
        return n.remove && n.instance_id == entry.first;
      });
    });
    if (clocks.empty()) removals_.erase(cluster_id);
  }
  if (agents_decide && slurm_agents_ != nullptr && !winding_down) {
    report = slurm_agents_->SlurmNodes(cluster_id);
    // A node leaves Slurm in two steps: drained while still in slurm.conf, then
    // dropped from it (see ReadyToTerminate).
    std::set<std::string> draining;
    for (const auto& n : nodes) {
      const slurm::SlurmNodeState* s = report ? report->Find(n.hostname) : nullptr;
      if (n.remove && s != nullptr && !s->Drained() &&
          !RemovalTimedOut(cluster_id, n.instance_id)) {
        draining.insert(n.instance_id);
      }
    }
    auto p = BuildSlurmPlan(store_, cluster_id, options_.slurm, draining);
    if (!p.ok()) return p.status();
    plan = std::move(*p);
  }
  std::map<std::string, const GroupRecord*> gmap;
  for (const auto& g : groups) gmap[g.name] = &g;

  std::vector<Observation> out;
  std::vector<std::string> to_drain;
  Status transient = OkStatus();
  for (const NodeRecord& n : nodes) {
    Observation o;
    o.instance_id = n.instance_id;
    if (n.remove) {
      SlurmWaitDone(n.instance_id);
      if (provider_ == nullptr) {
        o.gone = true;
      } else if (plan && !ReadyToTerminate(*plan, n, report, &to_drain)) {
        *slurm_busy = true;
        o.status = "ShuttingDown";
      } else {
        // Terminate even when `launched` is false: a crash may have come between
        // an accepted Launch and recording it.
        if (Status s = provider_->Terminate(n.instance_id); !s.ok()) {
          transient = s;
          continue;
        }
        auto d = provider_->Describe(n.instance_id);
        if (!d.ok() && d.status().code() == StatusCode::kNotFound) {
          o.gone = true;
        } else if (!d.ok()) {
          transient = d.status();
          continue;
        } else if (d->state == provider::NodeState::kTerminated) {
          o.gone = true;
        } else {
          o.status = "ShuttingDown";
        }
      }
      out.push_back(o);
      continue;
    }
    if (n.status == "Failure") continue;  // stays until removed
    if (!n.launched) {
      if (provider_ == nullptr) {
        o.status = "Failure";
        o.message = kNoProvider;
        out.push_back(o);
        continue;
      }
      provider::LaunchSpec spec;
      spec.instance_id = n.instance_id;
      spec.cluster_id = c.id;
      spec.cluster_name = c.name;
      spec.cluster_arn = c.arn;
      spec.group_name = n.group_name;
      spec.instance_name = n.group_name + "-" + std::to_string(n.ordinal);
      auto git = gmap.find(n.group_name);
      if (git != gmap.end()) {
        spec.group_spec = git->second->spec;
        spec.instance_type = git->second->spec.value("InstanceType", "");
      }
      if (bootstrap_token_) spec.bootstrap_token = bootstrap_token_(n.instance_id);
      Status s = provider_->Launch(spec);
      if (s.code() == StatusCode::kResourceExhausted) {
        o.status = "Failure";
        o.message = kNoCapacity;
      } else if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kAborted) {
        transient = s;
        continue;
      } else if (!s.ok()) {
        o.status = "Failure";
        o.message = s.message();
      } else {
        o.launched = true;
      }
      out.push_back(o);
      continue;
    }
    auto d = provider_ ? provider_->Describe(n.instance_id)
                       : StatusOr<provider::NodeObservation>(NotFoundError("no provider"));
    if (!d.ok() && d.status().code() != StatusCode::kNotFound) {
      transient = d.status();
      continue;
    }
    if (!d.ok()) {
      o.status = "Failure";
      o.message = "The instance no longer exists at the provider";
    } else {
      o.private_ip = d->private_ip;
      o.hostname = d->hostname;
      switch (d->state) {
        case provider::NodeState::kPending:
          o.status = "Pending";
          break;
        case provider::NodeState::kRunning:
          o.status = "Running";
          if (agents_decide) {
            // The machine is up; the node is Running once its lifecycle scripts
            // succeeded, as on HyperPod.
            auto a = agents.find(n.instance_id);
            double age = clock_.NowEpochSeconds() - n.launch_time;
            if (a != agents.end() && a->second.lifecycle_state == "Succeeded") {
              o.status = "Running";
              if (plan && plan->mode == SlurmPlan::Mode::kError && n.status != "Running") {
                o.status = "Failure";
                o.message = plan->error;
              } else if (plan && plan->mode == SlurmPlan::Mode::kWaiting) {
                if (n.status != "Running") o.status = "Pending";
              } else if (plan && plan->mode == SlurmPlan::Mode::kSlurm) {
                // Running only once the node's part of Slurm is up, as the user
                // will use it right away.
                bool up = plan->Ready() && SyncSlurm(*plan, n, report, slurm_busy);
                if (!up && n.status != "Running") o.status = "Pending";
              }
              if (plan && o.status == "Pending") {
                // Bounded, so a cluster never sits in Creating for good.
                if (auto why = SlurmWaitExpired(*plan, n)) {
                  o.status = "Failure";
                  o.message = *why;
                }
              } else {
                SlurmWaitDone(n.instance_id);
              }
            } else if (a != agents.end() && a->second.lifecycle_state == "Failed") {
              o.status = "Failure";
              o.message = a->second.lifecycle_message;
            } else if (a == agents.end() && n.status == "Pending" &&
                       age > options_.agent_register_timeout.count()) {
              o.status = "Failure";
              o.message = "The hpod agent on the instance did not register with hpodd within " +
                          std::to_string(options_.agent_register_timeout.count()) +
                          " seconds (see `hpod logs --stream Agent` and the node's "
                          "node-init.log)";
            } else if (n.status == "Running") {
              o.status = "Running";  // a running node whose agent reconnects stays Running
            } else {
              o.status = "Pending";
            }
          }
          break;
        case provider::NodeState::kFailed:
          o.status = "Failure";
          o.message = d->message;
          break;
        case provider::NodeState::kTerminating:
        case provider::NodeState::kTerminated:
          o.status = "Failure";
          o.message = "The instance was terminated outside hpod";
          break;
      }
      if (o.message.empty()) o.message = d->message;
    }
    out.push_back(o);
  }
  if (plan) Drain(*plan, to_drain);
  // Record what was learnt even when some calls failed; the failure requeues.
  if (!transient.ok()) {
    auto recorded = RecordAndRollUp(cluster_id, out);
    if (!recorded.ok()) return recorded.status();
    return transient;
  }
  return out;
}

bool ClusterReconciler::SyncSlurm(const SlurmPlan& plan, const NodeRecord& n,
                                  const std::optional<SlurmNodesReport>& report, bool* slurm_busy) {
  auto role = plan.role_of.find(n.instance_id);
  if (role == plan.role_of.end()) return false;  // no address yet
  nlohmann::json state = slurm_agents_->SlurmState(n.instance_id);
  bool current = state.is_object() && state.value("conf_hash", "") == plan.conf_hash;
  if (!current && role->second != slurm::NodeRole::kController) {
    // Workers and login nodes wait for slurmctld to run this configuration: a
    // configless slurmd that starts earlier fails to fetch it and retries only a
    // second later, and one the controller does not know yet is refused.
    nlohmann::json ctl = slurm_agents_->SlurmState(plan.controller_instance);
    if (!ctl.is_object() || ctl.value("conf_hash", "") != plan.conf_hash ||
        ctl.value("daemon", "") != "running") {
      *slurm_busy = true;
      return false;
    }
  }
  if (!current) {
    *slurm_busy = true;
    // Resent on every pass until the agent reports the new hash (it applies the
    // same message idempotently).
    slurm_agents_->Send(n.instance_id, SlurmMessage(plan, n, options_.slurm));
    return false;
  }
  if (state.value("daemon", "") != "running") return false;
  if (role->second != slurm::NodeRole::kCompute) return true;
  const slurm::SlurmNodeState* s = report ? report->Find(n.hostname) : nullptr;
  if (report && report->reporter != plan.controller_instance) s = nullptr;
  return s != nullptr && s->Registered();
}

bool ClusterReconciler::RemovalTimedOut(const std::string& cluster_id,
                                        const std::string& instance_id) {
  const auto now = clock_.SteadyNow();
  std::lock_guard<std::mutex> lock(removals_mu_);
  auto started = removals_[cluster_id].emplace(instance_id, now).first->second;
  return now - started > options_.slurm.remove_timeout;
}

std::optional<std::string> ClusterReconciler::SlurmWaitExpired(const SlurmPlan& plan,
                                                               const NodeRecord& n) {
  const auto now = clock_.SteadyNow();
  std::chrono::steady_clock::time_point since;
  {
    std::lock_guard<std::mutex> lock(removals_mu_);
    since = slurm_waits_.emplace(n.instance_id, now).first->second;
  }
  if (now - since <= options_.slurm.ready_timeout) return std::nullopt;
  SlurmWaitDone(n.instance_id);
  std::string limit = std::to_string(options_.slurm.ready_timeout.count()) + " s";
  if (plan.mode == SlurmPlan::Mode::kWaiting) {
    return "hpodd did not learn the cluster's Slurm roles within " + limit +
           " of the lifecycle scripts succeeding (no provisioning_parameters.json report)";
  }
  std::string detail;
  if (slurm_agents_ != nullptr) {
    nlohmann::json state = slurm_agents_->SlurmState(n.instance_id);
    if (state.is_object()) detail = state.value("message", "");
  }
  return "Slurm on the instance did not come up within " + limit +
         (detail.empty() ? std::string(" (its slurmd did not register with slurmctld; see "
                                       "/var/log/slurm on the node)")
                         : ": " + detail);
}

void ClusterReconciler::SlurmWaitDone(const std::string& instance_id) {
  std::lock_guard<std::mutex> lock(removals_mu_);
  slurm_waits_.erase(instance_id);
}

bool ClusterReconciler::ReadyToTerminate(const SlurmPlan& plan, const NodeRecord& n,
                                         const std::optional<SlurmNodesReport>& report,
                                         std::vector<std::string>* to_drain) {
  if (plan.mode != SlurmPlan::Mode::kSlurm || n.hostname.empty()) return true;
  const slurm::SlurmNodeState* s = report ? report->Find(n.hostname) : nullptr;
  // Without the controller's view (hpodd just restarted, the controller's agent is
  // reconnecting) hpod cannot tell whether Slurm still has the node: wait for it.
  const bool unknown = !report && !plan.controller_instance.empty();
  if (s == nullptr && !unknown) return true;  // not (or no longer) in Slurm
  if (RemovalTimedOut(n.cluster_id, n.instance_id)) {
    spdlog::warn("{} is still in Slurm {} s after its removal began; terminating it anyway",
                 n.hostname, options_.slurm.remove_timeout.count());
    return true;
  }
  // Drain first, so nothing new lands on it; once drained, the plan leaves it out
  // of slurm.conf and the controller's restart removes it from Slurm.
  if (s != nullptr && !s->Drained()) to_drain->push_back(n.hostname);
  return false;
}

void ClusterReconciler::Drain(const SlurmPlan& plan, const std::vector<std::string>& names) {
  if (names.empty() || plan.controller_instance.empty()) return;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  // One command for all of them, briefly bounded: this runs on a reconcile
  // worker, and the next pass retries whatever the node table still shows.
  auto r = slurm_agents_->Run(
      plan.controller_instance,
      {"env", std::string("SLURM_CONF=") + slurm::kConfDir + "/slurm.conf", "scontrol", "update",
       "nodename=" + list, "state=drain", "reason=hpod: removing the node from the cluster"},
      std::chrono::seconds(3));
  if (!r.ok() || r->exit_code != 0) {
    spdlog::warn("draining {}: {}", list,
                 r.ok() ? r->stderr_data : std::string(r.status().message()));
  }
}

// Phase 3: record observations, then roll node states up into group and cluster
// status. Returns whether the cluster has converged.
StatusOr<bool> ClusterReconciler::RecordAndRollUp(const std::string& cluster_id,
                                                  const std::vector<Observation>& observations) {
  bool converged = false;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(ClusterRecord c, tx.GetCluster(cluster_id));
    for (const Observation& o : observations) {
      auto current = tx.GetNode(cluster_id, o.instance_id);
      if (!current.ok()) continue;  // deleted meanwhile
      NodeRecord n = *current;
      if (o.gone) {
        HPOD_RETURN_IF_ERROR(tx.DeleteNode(n.instance_id));
        HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, NodeSubject(n.group_name, n.instance_id),
                                         EventLevel::kInfo, "Instance terminated"));
        continue;
      }
      bool changed = false;
      if (o.launched && !n.launched) {
        n.launched = true;
        changed = true;
      }
      if (!o.private_ip.empty() && o.private_ip != n.private_ip) {
        n.private_ip = o.private_ip;
        n.hostname = o.hostname.empty() ? HostnameFromIp(o.private_ip) : o.hostname;
        changed = true;
      }
      // A node marked for removal only moves towards ShuttingDown.
      std::string next = o.status.value_or(n.status);
      if (n.remove && next != "ShuttingDown") next = n.status;
      if (next != n.status || (o.status && o.message != n.message && next == "Failure")) {
        std::string from = n.status;
        n.status = next;
        n.message = o.message;
        changed = true;
        EventLevel level = next == "Failure" ? EventLevel::kError : EventLevel::kInfo;
        std::string text = "Instance status changed from " + from + " to " + next;
        if (!o.message.empty()) text += ": " + o.message;
        HPOD_RETURN_IF_ERROR(
            RecordEvent(tx, clock_, c, NodeSubject(n.group_name, n.instance_id), level, text));
      }
      if (changed) HPOD_RETURN_IF_ERROR(tx.PutNode(n));
    }

    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));

    if (c.status == "Deleting") {
      if (nodes.empty()) {
        spdlog::info("cluster {} ({}) deleted", c.name, c.id);
        HPOD_RETURN_IF_ERROR(tx.DeleteCluster(c.id));
        converged = true;
      }
      return OkStatus();
    }
    // Groups being deleted disappear once their last node is gone.
    for (auto it = groups.begin(); it != groups.end();) {
      if (it->deleting && NodesOf(nodes, it->name).empty()) {
        HPOD_RETURN_IF_ERROR(tx.DeleteGroup(c.id, it->name));
        HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, GroupSubject(it->name), EventLevel::kInfo,
                                         "Instance group deleted"));
        it = groups.erase(it);
      } else {
        ++it;
      }
    }
    auto set_group_status = [&](GroupRecord& g, const std::string& status) -> Status {
      if (g.status == status) return OkStatus();
      std::string from = g.status;
      g.status = status;
      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
      return RecordEvent(tx, clock_, c, GroupSubject(g.name), EventLevel::kInfo,
                         "Instance group status changed from " + from + " to " + status);
    };
    auto set_cluster_status = [&](const std::string& status, EventLevel level,
                                  const std::string& why) -> Status {
      if (c.status == status) return OkStatus();
      std::string from = c.status;
      c.status = status;
      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
      std::string text = "Cluster status changed from " + from + " to " + status;
      if (!why.empty()) text += ": " + why;
      return RecordEvent(tx, clock_, c, ClusterSubject(), level, text);
    };

    const NodeRecord* failed = nullptr;
    for (const auto& n : nodes) {
      if (!n.remove && n.status == "Failure" &&
          (c.status == "Creating" || n.created_generation == c.generation)) {
        failed = &n;
        break;
      }
    }
    bool all_converged = true;
    for (const auto& g : groups) all_converged &= GroupConverged(g, nodes);
    bool nothing_pending =
        std::none_of(nodes.begin(), nodes.end(), [](const NodeRecord& n) { return n.remove; });

    if (c.status == "Creating" && failed != nullptr) {
      c.failure_message = ProvisioningFailureMessage(failed->instance_id, failed->message);
      for (auto& g : groups) HPOD_RETURN_IF_ERROR(set_group_status(g, "Failed"));
      HPOD_RETURN_IF_ERROR(set_cluster_status("Failed", EventLevel::kError, c.failure_message));
      // Cleanup of the nodes happens in the next pass (Failed → remove all).
      return OkStatus();
    }
    if (c.status == "Updating" && failed != nullptr) {
      c.failure_message = ProvisioningFailureMessage(failed->instance_id, failed->message);
      for (auto& g : groups) {
        if (g.previous_target_count < 0) {
          g.deleting = true;
          g.status = "Deleting";
        } else {
          g.target_count = g.previous_target_count;
          g.deleting = false;
        }
        HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
      }
      for (auto n : nodes) {
        if (n.created_generation == c.generation && !n.remove) {
          n.remove = true;
          HPOD_RETURN_IF_ERROR(tx.PutNode(n));
        }
      }
      return set_cluster_status("RollingBack", EventLevel::kError, c.failure_message);
    }
    if ((c.status == "Creating" || c.status == "Updating" || c.status == "RollingBack") &&
        all_converged && nothing_pending) {
      for (auto& g : groups) {
        g.previous_target_count = -1;
        HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
        HPOD_RETURN_IF_ERROR(set_group_status(g, "InService"));
      }
      HPOD_RETURN_IF_ERROR(set_cluster_status("InService", EventLevel::kInfo, ""));
    }
    converged = (c.status == "InService" && all_converged && nothing_pending) ||
                (c.status == "Failed" && nodes.empty());
    return OkStatus();
  }));
  return converged;
}

}  // namespace hpod::controlplane
