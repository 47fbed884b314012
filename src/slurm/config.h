#pragma once

// Renders the Slurm configuration hpod owns for one cluster: slurm.conf (for
// slurmctld on the controller; workers run configless and fetch it from
// slurmctld), gres.conf and plugstack.conf. Every non-obvious setting carries a
// comment in the rendered file saying why it has that value; users' additions go
// in `slurm.user.conf` (Include'd, never rewritten by hpod).
//
// Nodes alike (the same CPUs, memory and GPUs) share one NodeName= line as Slurm
// host ranges where their names allow, "NodeName=ip-10-77-1-[11-254]
// NodeAddr=10.77.1.[11-254]", and partitions list theirs the same way, so that
// 10,000 nodes take a few dozen lines; rendering is O(n log n) in the nodes.
//
// Paths are node-local on purpose: /var/spool, /var/log and /run are each node's
// own, so no `%n` is needed, and /opt/slurm/etc is HyperPod's config directory.
//
// Thread contract: pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/slurm/roles.h"

namespace hpod::slurm {

// Directory of slurm.conf on controller and login nodes.
inline constexpr char kConfDir[] = "/opt/slurm/etc";
// The file users edit; hpod creates it empty once and never rewrites it.
inline constexpr char kUserConf[] = "slurm.user.conf";
inline constexpr int kSlurmctldPort = 6817;
inline constexpr int kSlurmdPort = 6818;
inline constexpr int kSlurmdbdPort = 6819;

struct SlurmNodeSpec {
  std::string name;  // hostname, "ip-10-77-1-11"
  std::string addr;  // "10.77.1.11"
  std::string group;
  int cpus = 0;            // from the instance type
  int64_t memory_mib = 0;  // RealMemory, MiB
  int gpus = 0;
  std::string gpu_type;  // "h100" (lower case); empty when gpus == 0
};

struct SlurmClusterSpec {
  std::string cluster_name;  // ClusterName= (lower-cased, [a-z0-9_-] only, by the renderer)
  std::string controller_name;
  std::string controller_addr;
  std::vector<SlurmNodeSpec> compute;  // in the order they should appear
  SlurmRoles roles;
  // Where GPU device files live on every compute node ("/dev" on real machines;
  // the local provider creates stand-in character devices elsewhere).
  std::string gpu_device_dir = "/dev";
  // Seconds without a slurmd response before slurmctld marks a node DOWN. Must
  // exceed hpod's replacement time (health monitor) so recovery finishes first.
  int slurmd_timeout_s = 30;
  // AuthInfo cred_expire: the requeue delay is this + 1 s (Slurm default 120).
  int cred_expire_s = 10;
  // hpod's SPANK plugin (auto-resume) on every node, listed `required` in
  // plugstack.conf; empty: plugstack.conf lists no plugin.
  std::string spank_plugin;
  // Slurm accounting: slurmdbd (with MariaDB) on the controller, which
  // slurmctld reports every job and step to (sacct, sacctmgr, sreport).
  bool accounting = false;
};

struct SlurmFiles {
  std::string slurm_conf;
  std::string gres_conf;       // empty when no node has GPUs
  std::string plugstack_conf;  // hpod's SPANK plugin, when the spec names one
};

SlurmFiles RenderSlurmFiles(const SlurmClusterSpec& spec);

// Hex SHA-256 over the files (name and content), so agents and hpodd can compare
// versions cheaply.
std::string FilesHash(const SlurmFiles& files);

// Node names, sorted.
std::vector<std::string> NodeNames(const SlurmClusterSpec& spec);

// The node names that the NodeName= lines of a rendered slurm.conf or gres.conf
// declare, host ranges expanded, in the file's order: what reads a rendered file
// back must not assume one line per node. InvalidArgument for a malformed range.
StatusOr<std::vector<std::string>> DeclaredNodeNames(const std::string& conf);

}  // namespace hpod::slurm
