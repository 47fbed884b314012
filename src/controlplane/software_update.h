#pragma once

// Rolling software updates (UpdateClusterSoftware; docs/software-updates.md).
//
// The software of a node is an image (api/software_image.h): the programs hpod
// puts on it, named from their digests. The provider says which image it ships
// now (Provider::CurrentImage) and keeps the ones its nodes run; an agent says in
// its hello which programs it runs, and hpodd names the node's image from that
// (NodeSoftware, CurrentImageId).
//
// - Each instance group has an image (GroupImage, a cluster setting): what its new
//   nodes and replacements get. CreateCluster and UpdateCluster set it for the
//   groups they add; an update moves `desired` to its target.
// - An update (SoftwareUpdate, a cluster setting) replaces the nodes of its groups
//   a batch at a time through the node recovery machinery (recovery.h, source
//   "SoftwareUpdate"): each node is drained in Slurm, terminated, and its
//   replacement launched under its hostname with the group's desired image, its
//   lifecycle scripts run again and its OnStart deep health checks run, then
//   resumed. A `--auto-resume` job on it resumes from its last checkpoint.
// - Forward, each logical node (NodeLogicalId) is replaced at most once; back,
//   those it replaced and any other now running the target, once.
// - A batch is done when each of its recoveries succeeded and each replacement's
//   agent reported the target image. One that did not fails the update; with
//   AutoRollbackConfiguration the nodes it updated are replaced again with the
//   groups' previous images (RollbackMaximumBatchSize at a time).
// - While it runs the cluster is SystemUpdating, as are its groups; the nodes of
//   the batch read SystemUpdating until their replacement runs.
// - Level-triggered: SoftwareUpdater::Step reads the record and the recoveries on
//   each pass of the cluster's reconciler, so a restarted hpodd goes on.
//
// The controller is never replaced (its slurmctld state is on its disk): its
// recovery is a Reboot, before which the provider moves it to its group's
// desired image (Provider::SetNodeImage); its group goes last.
//
// Thread contract: free functions and SoftwareUpdater are stateless over the
// store; safe from any thread (each call is one transaction).

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// SoftwareUpdateStatus values of the model.
inline constexpr char kUpdatePending[] = "Pending";
inline constexpr char kUpdateInProgress[] = "InProgress";
inline constexpr char kUpdateSucceeded[] = "Succeeded";
inline constexpr char kUpdateFailed[] = "Failed";
inline constexpr char kUpdateRollingBack[] = "RollbackInProgress";
inline constexpr char kUpdateRolledBack[] = "RollbackComplete";
// The one "alarm" hpod evaluates for AutoRollbackConfiguration: a node of the
// batch did not come back healthy with the target image (hpod has no CloudWatch).
inline constexpr char kNodeHealthAlarm[] = "hpod-node-health";
// RecoveryRecord::source of an update's replacements.
inline constexpr char kSoftwareUpdateSource[] = "SoftwareUpdate";

// What a node's agent said it runs (hello.software) and when it was updated.
struct NodeSoftware {
  std::string image;                            // api::ImageIdOf(software)
  std::map<std::string, std::string> software;  // name → hex SHA-256
  double reported = 0;                          // epoch seconds of the hello
  double updated = 0;                           // when an update's replacement ran (0: never)
};

struct GroupImage {
  std::string current;  // the group's image; "" when unknown (groups from before images)
  std::string desired;  // while an update moves the group; "" otherwise
  // What the group's new nodes get.
  const std::string& Launch() const { return desired.empty() ? current : desired; }
};

struct SoftwareUpdate {
  std::string status = kUpdateInProgress;
  std::vector<std::string> groups;                       // in the order they are updated
  std::string target;                                    // the image the update moves to
  std::map<std::string, std::string> previous;           // group → its image before
  nlohmann::json deployment = nlohmann::json::object();  // DeploymentConfig as given
  std::vector<std::string> batch;                        // recovery ids of the batch under way
  std::vector<std::string> updated;                      // hostnames replaced by this update
  std::vector<std::string> reverted;                     // hostnames replaced by its rollback
  double next_batch_at = 0;                              // epoch seconds
  int batches = 0;
  double started = 0, ended = 0;
  std::string message;  // where it stands, or how it ended
  std::string failure;  // why a batch failed ("" while none did)

  bool Active() const { return status == kUpdateInProgress || status == kUpdateRollingBack; }
  bool AutoRollback() const;
  nlohmann::json ToJson() const;
  static SoftwareUpdate FromJson(const nlohmann::json& j);  // defensive: it is data
};

std::string SoftwareUpdateSetting(const std::string& cluster_id);
std::string GroupImageSetting(const std::string& cluster_id, const std::string& group);
std::string NodeSoftwareSetting(const std::string& cluster_id, const std::string& instance_id);

StatusOr<std::optional<SoftwareUpdate>> LoadSoftwareUpdate(store::ReadTx& tx,
                                                           const std::string& cluster_id);
Status PutSoftwareUpdate(store::WriteTx& tx, const std::string& cluster_id,
                         const SoftwareUpdate& u);
StatusOr<std::map<std::string, GroupImage>> LoadGroupImages(store::ReadTx& tx,
                                                            const std::string& cluster_id);
Status PutGroupImage(store::WriteTx& tx, const std::string& cluster_id, const std::string& group,
                     const GroupImage& image);
// instance id → its record.
StatusOr<std::map<std::string, NodeSoftware>> LoadNodeSoftware(store::ReadTx& tx,
                                                               const std::string& cluster_id);
// The records of these nodes only (those without one are left out), in one
// query, where LoadNodeSoftware reads and parses the whole cluster's.
StatusOr<std::map<std::string, NodeSoftware>> LoadNodeSoftware(
    store::ReadTx& tx, const std::string& cluster_id, const std::vector<std::string>& instance_ids);
// The agent's hello: records what the node runs (keeping `updated`). Writes only
// when it changed.
Status RecordNodeSoftware(store::WriteTx& tx, const Clock& clock, const std::string& cluster_id,
                          const std::string& instance_id,
                          const std::map<std::string, std::string>& software);

// Deletes a node's record (its row is deleted in the same transaction).
Status ForgetNodeSoftware(store::WriteTx& tx, const std::string& cluster_id,
                          const std::string& instance_id);

// How many nodes of a group of `count` one batch takes under `size` (a
// CapacitySizeConfig: INSTANCE_COUNT, or CAPACITY_PERCENTAGE of `count`, at
// least one); the whole group without one.
int BatchSize(const nlohmann::json* size, int count);

// UpdateClusterSoftware's writes, once the request passed the model: checks the
// rest (kInvalidArgument, one line saying what to fix) and records the update,
// the groups' desired image, their status and the cluster's (SystemUpdating).
// `current_image` is the provider's (Provider::CurrentImage); `has_image` says
// whether an ImageId other than it may be launched.
Status StartSoftwareUpdate(store::WriteTx& tx, const Clock& clock, store::ClusterRecord& cluster,
                           const nlohmann::json& req, const std::string& current_image,
                           const std::function<bool(const std::string&)>& has_image);

// The read side: what DescribeCluster, ListClusterNodes and DescribeClusterNode
// show of images and updates (software_view.cc).
struct SoftwareView {
  std::optional<SoftwareUpdate> update;
  std::map<std::string, GroupImage> images;   // by group
  std::map<std::string, NodeSoftware> nodes;  // by instance id
  std::set<std::string> updating;             // instance ids of the batch under way
  std::string shipped;                        // the provider's current image
};
// `nodes` are the instance ids whose software the caller shows (a page's, one
// node's, none for DescribeCluster); only theirs are read. Reading every node's
// made each DescribeCluster and ListClusterNodes parse 10,000 JSON records at
// 10,000 nodes, whose agents all report what they run.
StatusOr<SoftwareView> LoadSoftwareView(store::ReadTx& tx, const std::string& cluster_id,
                                        const std::string& shipped,
                                        const std::vector<std::string>& nodes);
// A group's CurrentImageId, DesiredImageId, ImageVersionStatus,
// SoftwareUpdateStatus and ActiveSoftwareUpdateConfig, as the model names them.
nlohmann::json GroupSoftwareFields(const SoftwareView& view, const std::string& group);
// A node's CurrentImageId, DesiredImageId, ImageVersionStatus and
// LastSoftwareUpdateTime; and InstanceStatus SystemUpdating while the update's
// batch holds it, but in Failure (the recorded status stays the machine's:
// Running, Pending, ...; only what the API shows changes).
nlohmann::json NodeSoftwareFields(const SoftwareView& view, const store::NodeRecord& node);
// DescribeCluster's HpodSoftwareUpdate (hpod's member): the last update's record.
nlohmann::json SoftwareUpdateSummary(const SoftwareUpdate& u);

// The reconciler's step for a cluster with an update under way; see above.
class SoftwareUpdater {
 public:
  SoftwareUpdater(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}
  // One step: ends a batch whose recoveries ended, starts the next one when due,
  // finishes the update or turns it into a rollback. true when it wrote anything.
  StatusOr<bool> Step(const std::string& cluster_id);

 private:
  store::Store& store_;
  const Clock& clock_;
};

}  // namespace hpod::controlplane
