#pragma once

// A file:// lifecycle source that hpodd reads itself and sends to the nodes in
// their config (`config.lifecycle.files`, PROTOCOL.md), for providers whose nodes
// run an agent but see none of hpodd's files (NodeEnvironment::ships_file_sources:
// pool hosts). HyperPod downloads the whole prefix; so does this, within bounds
// that keep one config frame far below the channel's 16 MiB message limit.
//
// Thread contract: free functions; safe from any thread.

#include <map>
#include <set>
#include <string>

#include "hpod/base/status.h"

namespace hpod::controlplane {

inline constexpr size_t kMaxBundleBytes = 4 << 20;
inline constexpr size_t kMaxBundleFiles = 1000;

struct LifecycleBundle {
  std::map<std::string, std::string> files;  // relative path → content
  std::set<std::string> executable;           // paths with an execute bit
};

// Reads every regular file under `uri` (file:///abs/dir/), following no symlink
// out of it. kInvalidArgument, one line naming the fix, for a source that is
// not an absolute file:// directory, is missing, lacks `on_create`, or is larger
// than kMaxBundleBytes / kMaxBundleFiles.
StatusOr<LifecycleBundle> ReadLifecycleBundle(const std::string& uri, const std::string& on_create);

}  // namespace hpod::controlplane
