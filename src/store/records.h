#pragma once

// What hpod keeps durable. Spec fields (what the user asked for) are stored as the
// JSON the user sent, so fields hpod does not act on yet round-trip exactly;
// status fields are written only by reconcilers (Spec is the user's, Status is the
// controller's).
//
// Thread contract: plain values; not synchronized.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace hpod::store {

struct ClusterRecord {
  std::string id;    // 12 chars [a-z0-9]
  std::string name;  // unique among live clusters
  std::string arn;
  std::string status;  // ClusterStatus enum value
  std::string failure_message;
  double creation_time = 0;  // epoch seconds
  // Cluster-level request members kept verbatim (VpcConfig, Tags, NodeRecovery,
  // Orchestrator, ClusterRole, ...). Never InstanceGroups: those are GroupRecords.
  nlohmann::json spec = nlohmann::json::object();
  // Bumped by every CreateCluster/UpdateCluster; nodes remember the generation
  // that created them so a failed update can roll back exactly its own nodes.
  int64_t generation = 1;
};

struct GroupRecord {
  std::string cluster_id;
  std::string name;
  int position = 0;  // order of the group in the cluster's definition
  // The ClusterInstanceGroupSpecification as last given; InstanceCount is the target.
  nlohmann::json spec = nlohmann::json::object();
  int target_count = 0;
  // Target before the update in flight (restored on rollback); -1 when the group
  // was added by that update.
  int previous_target_count = -1;
  std::string status;     // InstanceGroupStatus enum value
  bool deleting = false;  // named in InstanceGroupsToDelete
};

struct NodeRecord {
  std::string instance_id;  // i- + 17 hex
  std::string cluster_id;
  std::string group_name;
  int ordinal = 0;     // InstanceName is <group>-<ordinal>
  std::string status;  // ClusterInstanceStatus enum value
  std::string message;
  double launch_time = 0;
  std::string private_ip;
  std::string hostname;
  std::string logical_id;
  bool launched = false;  // the provider acknowledged Launch
  bool remove = false;    // desired absent: scale-down, BatchDelete, group deletion
  int64_t created_generation = 0;
  // Continuous provisioning (controlplane/provisioning.h): which launch of this
  // logical node the row is (0: the first), and when it may launch, epoch
  // seconds (0: at once).
  int attempt = 0;
  double not_before = 0;
};

// What a pass over every node of a cluster reads of each (the health pass each
// second, the metrics scrape): a node's identity, place and state, without the
// rest of NodeRecord.
struct NodeSummary {
  std::string instance_id;
  std::string group_name;
  std::string status;  // ClusterInstanceStatus enum value
  std::string hostname;
  std::string private_ip;
  bool launched = false;
  bool remove = false;
};

// A deleted cluster whose events stay readable (and whose node logs hpodd keeps)
// for a retention period: the user reads why a failed cluster failed after
// deleting it for a retry. Its events keep the cluster's id.
struct DeletedClusterRecord {
  std::string id;
  std::string name;
  std::string arn;
  std::string failure_message;  // the cluster's when it was deleted
  double creation_time = 0;
  double deleted = 0;  // epoch seconds
};

struct EventRecord {
  std::string event_id;  // UUID
  int64_t seq = 0;       // assigned by the store; total order of events
  std::string cluster_id;
  std::string cluster_name;
  std::string cluster_arn;
  std::string group_name;     // empty for cluster events
  std::string instance_id;    // empty unless resource_type == "Instance"
  std::string resource_type;  // Cluster | InstanceGroup | Instance
  double time = 0;
  std::string level;  // Info | Warn | Error
  std::string description;
};

// What the control plane knows of a node's agent (written by the agent service
// only; the reconciler reads it). Deleted with its node.
struct AgentRecord {
  std::string instance_id;
  std::string cluster_id;
  // SHA-256 (hex) of the node credential the agent received when it registered;
  // empty until then. Once set, the node's bootstrap token is refused.
  std::string credential_hash;
  std::string lifecycle_state = "NotStarted";  // NotStarted | Running | Succeeded | Failed
  std::string lifecycle_message;
  std::string agent_version;
  double registered_time = 0;
};

// One node recovery (controlplane/recovery.h drives it): why it started, what it
// does (Reboot or Replace), how far it got, and when each step happened. Written
// before each step it describes is taken (intent before action), so a restarted
// hpodd resumes it where it stopped. Deleted with its cluster.
struct RecoveryRecord {
  std::string recovery_id;  // "rcv-" + 12 [a-z0-9]
  std::string cluster_id;
  std::string group_name;
  std::string instance_id;     // the node found faulty
  std::string replacement_id;  // Replace: the new node, chosen together with its row
  std::string hostname;        // kept by the replacement (and its Slurm NodeName)
  std::string private_ip;
  std::string action;  // "Reboot" | "Replace"
  // What found the fault: "HealthCheck" | "Heartbeat" | "Instance" | "Slurm" |
  // "BatchRebootClusterNodes" | "BatchReplaceClusterNodes".
  std::string source;
  std::string check;  // the failing check or signal ("disk:/fsx", "heartbeat", ...)
  std::string reason;
  bool node_dead = false;  // the node runs nothing any more: cancel its steps, do not wait
  bool automatic = true;   // NodeRecovery=Automatic; false: mark and report only
  std::string phase;       // RecoveryPhase name (recovery.h)
  std::string status;      // "InProgress" | "Succeeded" | "Failed" | "Reported" | "Cancelled"
  std::string message;     // why it failed or was cancelled
  // The node's SlurmdStartTime when it was marked: a slurmd row still showing it
  // after the reboot or replacement is Slurm's memory of the old one (slurmctld
  // prints the time to the second, so "newer than the launch" alone can miss it).
  std::string stale_slurmd_start;
  double created = 0;
  double finished = 0;
  // [{"step": "Detected", "time": epoch s, "detail": "..."}], in order.
  nlohmann::json timeline = nlohmann::json::array();
};

// A join token (auth/join_token.h) as hpodd keeps it: never the secret, only its
// hash. A host joins with it while it is not revoked, not expired and has uses
// left; each join takes one use in the same transaction that records the host.
struct JoinTokenRecord {
  std::string id;           // 8 lowercase hex; public (logs, CLI output)
  std::string secret_hash;  // auth::HashJoinSecret(secret): 64 lowercase hex
  std::string pool;         // the pool a host joining with it enters
  // Empty for a token a person minted; the instance id when the control plane
  // minted it for one launch (the host that joins with it becomes that node).
  std::string instance_id;
  double created = 0;  // epoch seconds
  double expires = 0;  // epoch seconds; refused from then on
  int64_t uses_left = 1;
  bool revoked = false;
  std::string description;
  // The instance type a host joining with it declares (ml.*), when the joining
  // agent does not name one itself; empty: the agent must.
  std::string instance_type;
};

// A machine that joined a pool (issue 25). hpodd names it (host_id) and signs a
// client certificate with that name as its CN; machine_id (/etc/machine-id) lets
// hpodd recognize a host that joins again.
struct HostRecord {
  std::string host_id;     // "h-" + 16 lowercase hex
  std::string machine_id;  // as the agent reported it
  std::string pool;
  std::string instance_id;  // the node it serves as; empty while spare
  // What the agent reported when it joined (CPUs, memory, GPUs, addresses...): a
  // JSON object, kept as given.
  nlohmann::json facts = nlohmann::json::object();
  double joined = 0;     // epoch seconds of the (latest) join
  std::string token_id;  // the join token it used
  std::string state;     // api::HostState's name
  // The ml.* type it declared at its join and hpodd checked against its facts;
  // empty for a host that serves one launch only (a local node over TLS).
  std::string instance_type;
  // Where it serves while Assigned (with instance_id); empty otherwise.
  std::string cluster_id;
  std::string group_name;
  std::string state_reason;    // why it entered `state`, one line
  double state_changed = 0;    // epoch seconds it entered `state`
};

// One change of a host's state, kept for as long as the host: the record its
// failures are counted from ("three in 30 days retire it") and what
// HpodDescribeHost shows.
struct HostHistoryRecord {
  int64_t seq = 0;  // assigned by AddHostHistory; increasing
  std::string host_id;
  double time = 0;  // epoch seconds
  std::string from_state;  // empty for the first entry
  std::string to_state;
  std::string reason;
  // The tenure the change concerns (a host's assignment, or the one it left).
  std::string cluster_id;
  std::string group_name;
  std::string instance_id;
};

// A client certificate hpodd signed for a host. Kept after the host is gone: the
// rows are the record of what was issued, and a revoked serial stays refused.
struct CertificateRecord {
  std::string serial;  // lowercase hex, as pki::CertificateInfo::serial_hex
  std::string host_id;
  double not_after = 0;  // epoch seconds
  double issued = 0;     // epoch seconds
  double revoked = 0;    // epoch seconds it was revoked; 0: not revoked
};

enum class Role { kAdmin, kUser };

struct AccessKeyRecord {
  std::string access_key_id;
  std::string secret_access_key;
  Role role = Role::kUser;
  double created = 0;
  std::string description;
};

}  // namespace hpod::store
