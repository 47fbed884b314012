#pragma once

// The channel's queue of frames for hpodd (channel.h): bounded in bytes, the
// oldest dropped first (counted, so a marker can say how many), and in order,
// with two exceptions for the frames whose delay costs the node:
//  - A *latest* frame carries a whole state that the next of its type replaces
//    (the controller's `slurm_nodes`, a megabyte at 10,000 nodes, sent whenever
//    Slurm changes): an unsent one is replaced in its place, not queued again.
//  - A *heartbeat* goes ahead of the latest frames queued last. A heartbeat late
//    by a timeout gets the node replaced; those frames repeat no state it
//    carries. It never passes an ordered frame: a heartbeat's lifecycle state
//    must not reach hpodd before the lifecycle report or log queued before it.
//
// Thread contract: none; the Channel guards it with its mutex.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace hpod::agent {

class Outbox {
 public:
  enum class Kind { kOrdered, kLatest, kHeartbeat };

  explicit Outbox(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Queues `frame`. `type` names a kLatest frame's type (which it replaces).
  // `tag` is the caller's, handed back by Pop (the node simulator marks its
  // heartbeats, to time each when it is written). Beyond max_bytes the oldest
  // frames go (never the last one left).
  void Push(std::string frame, Kind kind = Kind::kOrdered, std::string type = "", uint64_t tag = 0);
  // Takes the first frame (and its tag); the outbox must not be empty.
  std::string Pop(uint64_t* tag = nullptr);
  // Puts back a frame Pop took that could not be sent, first in line.
  void PushFront(std::string frame);
  // Empties it, returning what it held, in order.
  std::deque<std::string> TakeAll();

  bool empty() const { return frames_.empty(); }
  size_t size() const { return frames_.size(); }
  size_t bytes() const { return bytes_; }
  // Frames dropped for room since the last ClearDropped.
  uint64_t dropped() const { return dropped_; }
  void ClearDropped() { dropped_ = 0; }

 private:
  struct Frame {
    std::string data;
    std::string latest_type;  // empty: an ordered frame (or a heartbeat)
    uint64_t tag = 0;
  };

  const size_t max_bytes_;
  std::deque<Frame> frames_;
  size_t bytes_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace hpod::agent
