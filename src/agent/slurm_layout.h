#pragma once

// HyperPod's Slurm layout on a node: its AMI builds Slurm into /opt/slurm, and
// lifecycle scripts, users' job scripts and their muscle memory call
// /opt/slurm/bin/sinfo or put /opt/slurm/bin on PATH. hpod's nodes run Debian's
// Slurm (/usr/bin, /usr/sbin), so the agent links each installed Slurm program
// under /opt/slurm/bin and /opt/slurm/sbin. The configuration is already where
// HyperPod keeps it (/opt/slurm/etc on the controller and login nodes; workers
// are configless, as slurm_node.h says).
//
// Thread contract: free function; run by SlurmNode's worker thread.

#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

// Slurm's client commands and daemons, as /opt/slurm/bin and /opt/slurm/sbin hold them.
inline const std::vector<std::string> kSlurmCommands = {
    "sacct",   "sacctmgr", "salloc",   "sattach", "sbatch", "sbcast",
    "scancel", "scontrol", "scrontab", "sdiag",   "sinfo",  "sprio",
    "squeue",  "sreport",  "srun",     "sshare",  "sstat",  "strigger"};
inline const std::vector<std::string> kSlurmDaemons = {"slurmctld", "slurmd", "slurmdbd",
                                                       "slurmstepd"};

// Links `prefix`/bin/<command> and `prefix`/sbin/<daemon> to the first of
// `search_dirs` that has it. Programs not installed are skipped; an entry that
// exists already (a link made before, or a pool host's own Slurm build there) is
// left as it is.
Status LinkSlurmLayout(const std::string& prefix,
                       const std::vector<std::string>& search_dirs = {"/usr/bin", "/usr/sbin"});

}  // namespace hpod::agent
