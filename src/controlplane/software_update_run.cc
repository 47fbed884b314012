// Rolling software updates: SoftwareUpdater::Step, one transaction per pass of
// the cluster's reconciler (software_update.h).
//
// Invariants:
// - at most one batch is under way; its recovery ids are written in the same
//   transaction as the recoveries, so a restart finds them;
// - a hostname is replaced at most once forward (`updated`) and once back
//   (`reverted`), whatever the recoveries' outcome, so a node that keeps failing
//   cannot hold the update in a loop;
// - the groups' desired image is what every replacement of theirs gets, so a
//   node that a health recovery replaces meanwhile comes back updated too.

#include <algorithm>
#include <set>

#include "hpod/api/states.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using nlohmann::json;

namespace {

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

const json* SizeConfig(const SoftwareUpdate& u, bool rollback) {
  auto policy = u.deployment.find("RollingUpdatePolicy");
  if (policy == u.deployment.end() || !policy->is_object()) return nullptr;
  if (rollback) {
    if (auto it = policy->find("RollbackMaximumBatchSize"); it != policy->end()) return &*it;
  }
  auto it = policy->find("MaximumBatchSize");
  return it == policy->end() ? nullptr : &*it;
}

// What `updated` and `reverted` hold: the logical node, which a replacement keeps
// (its hostname may change where addresses do not carry over: pool hosts).
std::string NodeKey(const store::NodeRecord& n) {
  return n.logical_id.empty() ? n.instance_id : n.logical_id;
}

std::string Describe(const std::string& image) {
  return image.empty() ? "their hosts' software" : image;
}

}  // namespace

StatusOr<bool> SoftwareUpdater::Step(const std::string& cluster_id) {
  bool active = false;  // a read first: most passes of most clusters have no update
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto u, LoadSoftwareUpdate(tx, cluster_id));
    active = u && u->Active();
    return OkStatus();
  }));
  if (!active) return false;
  bool wrote = false;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    wrote = false;
    HPOD_ASSIGN_OR_RETURN(auto loaded, LoadSoftwareUpdate(tx, cluster_id));
    if (!loaded || !loaded->Active()) return OkStatus();
    SoftwareUpdate u = *loaded;
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto images, LoadGroupImages(tx, c.id));
    const double now = clock_.NowEpochSeconds();
    const bool rolling_back = u.status == kUpdateRollingBack;
    wrote = true;  // every path below that returns OK writes

    // Ends the update: the groups keep `image_of(g)`, they and the cluster serve.
    auto finish = [&](const std::string& status, const std::string& message, EventLevel level,
                      const std::function<std::string(const std::string&)>& image_of) -> Status {
      u.status = status;
      u.message = message;
      u.ended = now;
      u.batch.clear();
      for (auto& g : groups) {
        if (!Has(u.groups, g.name)) continue;
        GroupImage image = images[g.name];
        image.current = image_of(g.name);
        image.desired.clear();
        HPOD_RETURN_IF_ERROR(PutGroupImage(tx, c.id, g.name, image));
        if (!g.deleting && api::Is(g.status, api::InstanceGroupStatus::kSystemUpdating)) {
          g.status = api::NameString(api::InstanceGroupStatus::kInService);
          HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
        }
      }
      HPOD_RETURN_IF_ERROR(PutSoftwareUpdate(tx, c.id, u));
      if (api::Is(c.status, api::ClusterStatus::kSystemUpdating)) {
        c.status = api::NameString(api::ClusterStatus::kInService);
        HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
      }
      return RecordEvent(tx, clock_, c, ClusterSubject(), level,
                         "Software update " + status + ": " + message);
    };
    // A batch failed: roll back what the update did when asked, else stop.
    auto fail = [&](const std::string& why) -> Status {
      u.failure = rolling_back ? u.failure + "; then the rollback failed: " + why : why;
      if (!rolling_back && u.AutoRollback() && !u.updated.empty()) {
        u.status = kUpdateRollingBack;
        u.message = why + "; rolling back the " + std::to_string(u.updated.size()) +
                    " node(s) it updated (" + kNodeHealthAlarm + ")";
        u.batch.clear();
        u.next_batch_at = now;
        for (const auto& g : u.groups) {
          GroupImage image = images[g];
          image.desired = u.previous[g];
          HPOD_RETURN_IF_ERROR(PutGroupImage(tx, c.id, g, image));
        }
        HPOD_RETURN_IF_ERROR(PutSoftwareUpdate(tx, c.id, u));
        return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kError,
                           "Software update " + std::string(kUpdateRollingBack) + ": " + u.message);
      }
      // The groups keep what they had; the nodes already updated keep theirs.
      return finish(kUpdateFailed, rolling_back ? "rollback failed: " + why : why,
                    EventLevel::kError, [&](const std::string& g) { return u.previous[g]; });
    };

    if (api::Is(c.status, api::ClusterStatus::kDeleting) ||
        api::Is(c.status, api::ClusterStatus::kFailed)) {
      u.status = kUpdateFailed;
      u.message = "the cluster is " + c.status;
      u.ended = now;
      return PutSoftwareUpdate(tx, c.id, u);
    }
    HPOD_ASSIGN_OR_RETURN(auto recoveries, tx.ListRecoveries(c.id));
    HPOD_ASSIGN_OR_RETURN(auto software, LoadNodeSoftware(tx, c.id));
    std::map<std::string, const store::RecoveryRecord*> by_id;
    for (const auto& r : recoveries) by_id[r.recovery_id] = &r;

    // The image a group's nodes should run now; "" when the update re-provisions
    // on the hosts' own software (a provider that ships no image).
    auto want_of = [&](const std::string& group) {
      return u.target.empty() ? std::string() : images[group].Launch();
    };
    if (!u.batch.empty()) {
      for (const auto& id : u.batch) {
        auto it = by_id.find(id);
        if (it != by_id.end() && RecoveryActive(*it->second)) {
          wrote = false;
          return OkStatus();  // the batch is under way
        }
      }
      std::vector<std::string> failures, done;
      for (const auto& id : u.batch) {
        auto it = by_id.find(id);
        if (it == by_id.end()) continue;  // gone with its nodes
        const store::RecoveryRecord& r = *it->second;
        // Cancelled: the node was removed meanwhile (scale-down, BatchDelete); the
        // user's decision, not the software's failure.
        if (r.status == kRecoveryCancelled) continue;
        if (r.status != kRecoverySucceeded) {
          failures.push_back(r.hostname + ": recovery " + r.recovery_id + " " + r.status);
          continue;
        }
        const std::string want = want_of(r.group_name);
        // A controller is rebooted in place; any other node is replaced.
        const std::string& now_running =
            r.replacement_id.empty() ? r.instance_id : r.replacement_id;
        auto reported = software.find(now_running);
        const std::string got = reported == software.end() ? "" : reported->second.image;
        if (!want.empty() && got != want) {
          failures.push_back(r.hostname + " runs " +
                             (got.empty() ? std::string("software it did not report") : got) +
                             ", not " + want);
          continue;
        }
        done.push_back(r.hostname);
        if (reported != software.end()) {  // LastSoftwareUpdateTime
          auto stored = tx.GetSetting(NodeSoftwareSetting(c.id, now_running));
          json j = stored.ok() ? json::parse(*stored, nullptr, false) : json();
          if (j.is_object()) {
            j["updated"] = now;
            HPOD_RETURN_IF_ERROR(tx.PutSetting(NodeSoftwareSetting(c.id, now_running), j.dump()));
          }
        }
      }
      ++u.batches;
      u.batch.clear();
      const std::string label = "batch " + std::to_string(u.batches);
      if (!failures.empty()) return fail(label + " failed: " + Join(failures));
      const int wait = u.deployment.value("WaitIntervalInSeconds", 0);
      u.next_batch_at = now + wait;
      u.message = label + " done: " + Join(done) + " run " +
                  Describe(rolling_back ? "their previous software" : u.target) +
                  (wait > 0 ? "; a next batch waits " + std::to_string(wait) + " s" : "");
      HPOD_RETURN_IF_ERROR(PutSoftwareUpdate(tx, c.id, u));
      return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kInfo,
                         "Software update: " + u.message);
    }

    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
      return a.group_name != b.group_name ? a.group_name < b.group_name : a.ordinal < b.ordinal;
    });
    std::set<std::string> recovering;  // instance ids and hostnames under a recovery
    for (const auto& r : recoveries) {
      if (!RecoveryActive(r)) continue;
      recovering.insert(r.instance_id);
      recovering.insert(r.replacement_id);
      recovering.insert(r.hostname);
    }
    // The controller is rebooted into its new image, never replaced (RequestRecovery).
    HPOD_ASSIGN_OR_RETURN(const std::string controller, ControllerGroup(tx, c.id, groups));
    std::vector<std::string> left_alone;  // nodes the update could not take
    for (const auto& group_name : u.groups) {
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& x) { return x.name == group_name; });
      if (g == groups.end() || g->deleting) continue;
      const std::string want = want_of(group_name);
      std::vector<const store::NodeRecord*> due;
      bool waiting = false;
      for (const auto& n : nodes) {
        if (n.group_name != group_name || n.remove) continue;
        auto s = software.find(n.instance_id);
        const std::string image = s == software.end() ? "" : s->second.image;
        if (!want.empty() && image == want) continue;
        // Each logical node at most once each way. Back: the nodes this update
        // changed, and any other now running its target (a health recovery's
        // replacement launched during the update).
        const std::string key = NodeKey(n);
        if (rolling_back ? Has(u.reverted, key) ||
                               !(Has(u.updated, key) || (!image.empty() && image == u.target))
                         : Has(u.updated, key)) {
          continue;
        }
        if (recovering.count(n.instance_id) || recovering.count(n.hostname)) {
          waiting = true;  // its replacement gets `want` anyway; look again after
          continue;
        }
        // Forward, a node that does not run is left as it is; back, a failed
        // replacement is what the rollback is for.
        const bool can =
            n.launched &&
            (api::Is(n.status, api::ClusterInstanceStatus::kRunning) ||
             (rolling_back && api::Is(n.status, api::ClusterInstanceStatus::kFailure)));
        if (!can) {
          left_alone.push_back((n.hostname.empty() ? n.instance_id : n.hostname) + " (" + n.status +
                               ")");
          continue;
        }
        due.push_back(&n);
      }
      if (due.empty()) {
        if (waiting) {
          wrote = false;
          return OkStatus();
        }
        continue;
      }
      if (now < u.next_batch_at) {  // WaitIntervalInSeconds after the last batch
        wrote = false;
        return OkStatus();
      }
      const int size = BatchSize(SizeConfig(u, rolling_back), g->target_count);
      if (static_cast<int>(due.size()) > size) due.resize(size);
      RecoveryRequest request;
      request.action = RecoveryAction::kReplace;
      request.source = kSoftwareUpdateSource;
      request.check = "software";
      request.reason = (rolling_back ? "software rollback to " : "software update to ") +
                       Describe(want) + " (UpdateClusterSoftware)";
      std::vector<std::string> names;
      for (const store::NodeRecord* n : due) {
        HPOD_ASSIGN_OR_RETURN(
            std::string id, RequestRecovery(tx, clock_, c, *n, group_name == controller, request));
        u.batch.push_back(id);
        (rolling_back ? u.reverted : u.updated).push_back(NodeKey(*n));
        names.push_back(n->hostname);
      }
      u.message = "batch " + std::to_string(u.batches + 1) + ": " +
                  (group_name == controller ? "rebooting " : "replacing ") + Join(names) + " in " +
                  group_name + " with " + Describe(want);
      HPOD_RETURN_IF_ERROR(PutSoftwareUpdate(tx, c.id, u));
      return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kInfo,
                         "Software update: " + u.message);
    }
    std::string message = rolling_back
                              ? "rolled back to the groups' previous software after " + u.failure
                              : Join(u.groups) + " run " + Describe(u.target) + " (" +
                                    std::to_string(u.updated.size()) + " node(s) updated in " +
                                    std::to_string(u.batches) + " batch(es))";
    if (!left_alone.empty()) {
      message += std::string("; not ") + (rolling_back ? "rolled back" : "updated") +
                 ", not running: " + Join(left_alone);
    }
    if (rolling_back) {
      return finish(kUpdateRolledBack, message, EventLevel::kWarn,
                    [&](const std::string& g) { return u.previous[g]; });
    }
    return finish(kUpdateSucceeded, message, EventLevel::kInfo,
                  [&](const std::string&) { return u.target; });
  }));
  return wrote;
}

}  // namespace hpod::controlplane
