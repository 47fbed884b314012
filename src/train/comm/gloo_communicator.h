// The CPU communicator, on gloo's TCP transport (Debian libgloo-dev).
//
// gloo's functional API has allreduce, allgatherv, broadcast and barrier but no
// reduce-scatter (only the legacy AllreduceHalvingDoubling class, and mixing
// legacy objects with functional calls on one context stalls every later call:
// training-building-blocks.md §5). So reduce-scatter and allgather are ours: a
// ring over gloo's unbound buffers (N-1 steps, each rank sending to rank+1
// and receiving from rank-1, the reduce-scatter pipelined in 1 MiB segments so
// the additions overlap the transfer). A ring moves the minimum (each rank
// sends and receives (N-1)/N of the buffer), keeps the summation order fixed,
// and, since we post every receive ourselves, always knows which peer went
// missing. Broadcast and allreduce use gloo's own functions.
//
// A rank learns of any connection of the mesh breaking at once (a killed
// rank, not only a neighbour giving up): GlooPairWatch, which also fails the
// sends gloo itself would leave waiting out the timeout.
//
// Thread contract: as Communicator. gloo's TCP device runs one event-loop
// thread per communicator, and the pair watch one more; both inherit the
// creating thread's signal mask.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/comm/communicator.h"
#include "hpod/train/comm/store.h"

namespace hpod::train::comm {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  // This rank's address for the TCP transport: an IP, or a name resolving to
  // one that every peer can reach (the node's own hostname on a cluster).
  std::string hostname = "127.0.0.1";
  // The default timeout of every collective, and of connecting the mesh.
  std::chrono::milliseconds timeout{30000};
  // Store keys go under this prefix (one per run attempt).
  std::string prefix;
  // For errors, by rank: "rank 2 (ip-10-77-1-13)". Empty: "rank N".
  std::vector<std::string> peer_names;
  // Where ranks leave word of a failed collective (not owned; may be null).
  // A rank that dies takes down its ring neighbours first and theirs next, so
  // most ranks only see a neighbour that already gave up. Each rank records
  // what it saw, and the error names the rank that everybody lost but that
  // never reported: the one that went away first.
  Store* failure_store = nullptr;
};

// The gloo slot of the messages of step `step` of our ring collective with
// tag `tag` (a communicator's collectives take tags 1, 2, ...). Exposed for
// tests that play a peer by hand.
uint64_t GlooRingSlot(uint32_t tag, int step);

// Connects every pair of ranks through `store` (gloo's connectFullMesh; each
// rank publishes its address and waits for the others'). DeadlineExceeded
// naming the ranks whose address never appeared; Unavailable when a peer
// cannot be connected to.
StatusOr<std::unique_ptr<Communicator>> ConnectGloo(Store& store, const GlooOptions& options);

}  // namespace hpod::train::comm
