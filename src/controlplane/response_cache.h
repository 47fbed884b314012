#pragma once

// The bodies of recent read-only API answers, by request, for as long as the
// store has committed no write since they were read.
//
// Why: a dashboard or `watch aws sagemaker list-cluster-nodes` asks the same
// page again and again, and a 10,000-node cluster's page costs a store read of
// 100 node rows and their JSON each time (0.6 ms of CPU, bench/README.md). Most
// seconds of a running cluster commit no write, so the same bytes can be served
// again, as the Kubernetes API server serves LISTs from its watch cache.
//
// Invariant (what makes a hit correct): an entry is served only for the store
// generation it was read at (store::Store::WriteGeneration). The caller takes
// the generation *before* its read transaction begins, so the data it read is
// at least that new; any later commit that changes a row moves the generation
// on, and every entry read before it stops matching. A body is stored only for an answer that is a
// function of the request and the store's contents alone (ClusterApi::
// AnswersFromStoreOnly), with anything else it depends on in the key.
//
// Memory: entries of one generation only (a newer one drops them all), and at
// most max_bytes of keys and bodies; past that, nothing more is kept until the
// next generation. `hpodd --api-cache-mb` sets the bound (0: no cache).
//
// Thread contract: thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "hpod/base/thread_annotations.h"

namespace hpod::controlplane {

class ResponseCache {
 public:
  static constexpr size_t kDefaultMaxBytes = size_t{32} << 20;
  explicit ResponseCache(size_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    size_t bytes = 0;    // of the bodies kept now
    size_t entries = 0;  // kept now
  };

  // The body kept for `key` at `generation`; null when there is none (a miss).
  std::shared_ptr<const std::string> Find(const std::string& key, uint64_t generation);
  // Keeps `body` as `key`'s answer read at `generation`. Ignored when a newer
  // generation's entries are already kept (the body is stale) or when full.
  void Put(const std::string& key, uint64_t generation, std::shared_ptr<const std::string> body);

  Stats GetStats() const;

 private:
  const size_t max_bytes_;
  mutable Mutex mu_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> bodies_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t hits_ GUARDED_BY(mu_) = 0;
  uint64_t misses_ GUARDED_BY(mu_) = 0;
};

}  // namespace hpod::controlplane
