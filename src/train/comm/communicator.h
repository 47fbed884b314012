// Collectives between the ranks of one distributed hpod-train run.
//
// Every rank calls the same collectives in the same order with the same
// sizes (the trainer guarantees it: one code path, agreed options). Every call
// has a timeout, so a peer that died or hangs becomes an error on every other
// rank within it, never a hang: Unavailable when a connection broke (the peer
// exited or was killed: connection reset), DeadlineExceeded when a peer went
// silent. The message is one line naming the operation and the peer:
//   "reduce-scatter of gradients (step 17) failed: no data from rank 2
//    (ip-10-77-1-13) within 30 s"
//
// Sizes are element counts; `counts` has one entry per rank and gives the
// slice each rank owns of a flat buffer, slices laid out in rank order.
//
// Thread contract: not thread-safe; one thread issues a communicator's
// collectives (distinct communicators may be used from distinct threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::train::comm {

struct CollectiveOptions {
  // 0: the communicator's default (CommOptions::timeout).
  std::chrono::milliseconds timeout{0};
  // For error messages: what the collective moves and when ("gradients
  // (step 17)").
  std::string_view what;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo (tcp)", "nccl 2.28.9".
  virtual std::string backend() const = 0;

  // In place: every rank ends with the elementwise sum of every rank's `data`.
  virtual Status AllReduceSum(float* data, int64_t n, const CollectiveOptions& o = {}) = 0;
  // In place over a buffer of sum(counts) floats: on return, the calling
  // rank's slice holds the elementwise sum of that slice over all ranks; the
  // rest of the buffer is scratch (unspecified). Summation order is fixed for
  // a given world size, so reruns are bit-identical.
  virtual Status ReduceScatterSum(float* data, std::span<const int64_t> counts,
                                  const CollectiveOptions& o = {}) = 0;
  // In place over a buffer of sum(counts) floats: each rank's slice is its
  // input; on return every slice holds its owner's values on every rank.
  virtual Status AllGather(float* data, std::span<const int64_t> counts,
                           const CollectiveOptions& o = {}) = 0;
  // Every rank's `mine`, indexed by rank (sizes may differ): metadata, scalars.
  virtual StatusOr<std::vector<std::string>> AllGatherBytes(const std::string& mine,
                                                            const CollectiveOptions& o = {}) = 0;
  // `bytes` at `data` from `root` to every rank.
  virtual Status Broadcast(void* data, int64_t bytes, int root,
                           const CollectiveOptions& o = {}) = 0;
  virtual Status Barrier(const CollectiveOptions& o = {}) = 0;
};

// Slices of `n` elements for `world` ranks: contiguous, in rank order, each a
// multiple of `align` elements except the last, none empty while n >= world
// * align. ZeRO-1 shards and sharded checkpoints use this one split.
std::vector<int64_t> ShardCounts(int64_t n, int world, int64_t align = 16);
// The offset of rank r's slice: sum of counts[0..r).
int64_t ShardOffset(std::span<const int64_t> counts, int rank);

// A communicator of one rank (world size 1): every collective is a no-op.
std::unique_ptr<Communicator> MakeSelfCommunicator();

}  // namespace hpod::train::comm
