#pragma once

// Node log streams kept by hpodd: what each node's agent streams (lifecycle script
// output, the agent's own log) is appended to
//   <root>/<cluster_id>/<instance_id>/<stream>.log
// and rotated at `max_file_bytes` (one older file, `<stream>.log.1`, is kept), so a
// chatty script cannot fill the disk. Files stay after the node is gone: the
// lifecycle log of a node that failed is what the user needs most.
//
// Reading is by resume token: Read returns data after the position the token names
// and a token for the new end, so `hpod logs --follow` polls without missing or
// repeating bytes across rotations (data older than the kept file is reported as
// skipped).
//
// Thread contract: thread-safe (one mutex; appends are small).

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct NodeLogsOptions {
  std::string root;  // <data_dir>/logs
  uint64_t max_file_bytes = 8 * 1024 * 1024;
};

struct LogChunk {
  std::string data;
  std::string next_token;
};

class NodeLogs {
 public:
  explicit NodeLogs(NodeLogsOptions options);

  // Streams are LifecycleConfig and Agent; anything else is kInvalidArgument.
  Status Append(const std::string& cluster_id, const std::string& instance_id,
                const std::string& stream, std::string_view data);
  // Data after `token` ("" = from the oldest kept byte), at most `limit` bytes.
  // kNotFound when nothing was ever logged for the node.
  StatusOr<LogChunk> Read(const std::string& cluster_id, const std::string& instance_id,
                          const std::string& stream, const std::string& token, size_t limit);
  static bool ValidStream(const std::string& stream);
  // Removes every log of a cluster's nodes (once its retention ended).
  Status RemoveCluster(const std::string& cluster_id);

 private:
  std::string Dir(const std::string& cluster_id, const std::string& instance_id) const;

  const NodeLogsOptions options_;
  std::mutex mu_;
};

// Drops the events (store::PurgeDeletedCluster) and node logs of the clusters
// deleted more than `retention` ago: logs first, then the record, so a crash
// between repeats the removal. Returns the first error; the others are tried.
Status PurgeExpiredClusters(store::Store& store, NodeLogs& logs, const Clock& clock,
                            std::chrono::seconds retention);

}  // namespace hpod::controlplane
