#include "hpod/train/comm/communicator.h"

#include <algorithm>

namespace hpod::train::comm {
namespace {

class SelfCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  Status AllReduceSum(float*, int64_t, const CollectiveOptions&) override { return OkStatus(); }
  Status ReduceScatterSum(float*, std::span<const int64_t>, const CollectiveOptions&) override {
    return OkStatus();
  }
  Status AllGather(float*, std::span<const int64_t>, const CollectiveOptions&) override {
    return OkStatus();
  }
  StatusOr<std::vector<std::string>> AllGatherBytes(const std::string& mine,
                                                    const CollectiveOptions&) override {
    return std::vector<std::string>{mine};
  }
  Status Broadcast(void*, int64_t, int, const CollectiveOptions&) override { return OkStatus(); }
  Status Barrier(const CollectiveOptions&) override { return OkStatus(); }
};

}  // namespace

std::vector<int64_t> ShardCounts(int64_t n, int world, int64_t align) {
  std::vector<int64_t> counts(world, 0);
  if (world <= 0) return counts;
  // Whole blocks of `align` elements, as evenly as they go (the first ranks
  // take one more); the last rank's last block is the partial one.
  const int64_t blocks = (n + align - 1) / align;
  int64_t left = n;
  for (int r = 0; r < world; ++r) {
    const int64_t mine = blocks / world + (r < blocks % world ? 1 : 0);
    counts[r] = std::min(mine * align, left);
    left -= counts[r];
  }
  return counts;
}

int64_t ShardOffset(std::span<const int64_t> counts, int rank) {
  int64_t off = 0;
  for (int r = 0; r < rank; ++r) off += counts[r];
  return off;
}

std::unique_ptr<Communicator> MakeSelfCommunicator() {
  return std::make_unique<SelfCommunicator>();
}

}  // namespace hpod::train::comm
