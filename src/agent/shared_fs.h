#pragma once

// A pool host's shared filesystem (issue 26): what the admin declared for /fsx
// (HpodSharedFilesystem), mounted if it is not, and checked before a node's
// lifecycle scripts run — mounted, writable, and the cluster's own: the marker
// file that the cluster's writer node creates and every other node reads.
//
// Thread contract: free functions; one tenure at a time calls them.

#include <chrono>
#include <string>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/status.h"

namespace hpod::agent {

struct SharedFsOptions {
  std::string mount_point = "/fsx";
  std::string instance_id;  // for the write probe's name and the logs
  // How long a reader waits for the writer's marker (nodes start together).
  std::chrono::milliseconds marker_wait{120000};
};

// Mounts (unless `fs.type` is Existing or something is mounted already) and
// checks. Returns whether this call mounted it (the tenure unmounts it at its
// end). kFailedPrecondition, one line saying what is wrong and where to look,
// for a check that fails: the caller reports it (host_status.check_failed).
StatusOr<bool> EnsureSharedFilesystem(const api::agentproto::SharedFilesystem& fs,
                                      const SharedFsOptions& options);

// umount -l of what EnsureSharedFilesystem mounted; logged, never fatal.
void UnmountSharedFilesystem(const std::string& mount_point);

// Whether `path` is a mount point (its device differs from its parent's, or it
// is the root).
bool IsMountPoint(const std::string& path);

}  // namespace hpod::agent
