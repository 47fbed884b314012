// The GPU communicator, on NCCL, behind the same Communicator interface.
//
// Built only when CMake finds the CUDA toolkit with NCCL (HPOD_HAVE_NCCL);
// otherwise ConnectNccl is Unimplemented and NcclCompiledIn() is false, so a
// CPU-only build (CI) has the same API. Ranks exchange NCCL's unique id
// through the rendezvous store; each rank drives one GPU (`device`, its
// local rank under srun).
//
// Today's trainer keeps its tensors in host memory, so every collective is
// host-staged: copied to a device buffer (grown once, reused), run on the
// communicator's stream, copied back. NCCL's reduce-scatter and allgather
// need equal slices; uneven ones (ShardCounts) are padded to the largest.
// A collective that does not finish within its timeout (a dead or hung peer)
// aborts the communicator (ncclCommAbort) and returns DeadlineExceeded; NCCL
// does not say which peer, so the message says which collective.
//
// Thread contract: as Communicator.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/comm/communicator.h"
#include "hpod/train/comm/store.h"

namespace hpod::train::comm {

struct NcclOptions {
  int rank = 0;
  int size = 1;
  int device = 0;  // CUDA device of this rank
  std::chrono::milliseconds timeout{60000};
  std::string prefix;  // store keys of this run
};

// Whether this build can talk NCCL at all.
bool NcclCompiledIn();
// GPUs this process can use: 0 without a driver, without a GPU, or without
// NCCL support compiled in (tests skip on 0).
int CudaDeviceCount();

// Shares NCCL's unique id through `store` (rank 0 creates it) and creates the
// communicator. Unimplemented without NCCL; FailedPrecondition without a
// usable device; DeadlineExceeded when rank 0's id never appears.
StatusOr<std::unique_ptr<Communicator>> ConnectNccl(Store& store, const NcclOptions& options);

}  // namespace hpod::train::comm
