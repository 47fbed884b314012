#pragma once

// The cluster's names in a machine's /etc/hosts (issue 26): a pool host is a
// machine of the admin's, whose /etc/hosts hpod does not own, so the agent keeps
// one block of its own in it, between marker lines, and touches nothing else:
//
//   # BEGIN hpod cluster nodes (hpod-agent keeps this block; edits are lost)
//   10.1.0.11 host0
//   # END hpod cluster nodes
//
// so that `ssh host0`, MPI launchers and hpod-train's rendezvous resolve the
// cluster's NodeNames, which follow a replacement to its new address. The file
// is rewritten in place (it may be a bind mount, which a rename cannot replace).
//
// Thread contract: free functions; one caller at a time per file.

#include <map>
#include <string>

#include "hpod/base/status.h"

namespace hpod::agent {

// The file's text with the block replaced by `hosts` (name → address), or
// removed when `hosts` is empty; everything outside the block as it was.
std::string WithHostsBlock(const std::string& text, const std::map<std::string, std::string>& hosts);

// Rewrites `path` when its block differs (a no-op otherwise).
Status WriteHostsBlock(const std::string& path, const std::map<std::string, std::string>& hosts);

}  // namespace hpod::agent
