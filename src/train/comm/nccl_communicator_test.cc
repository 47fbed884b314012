// The NCCL communicator: built wherever the CUDA toolkit is; run where a GPU
// is (skipped otherwise, as on CI). One rank per GPU, ranks as threads.
#include "hpod/train/comm/nccl_communicator.h"

#include <gtest/gtest.h>

#include <thread>

namespace hpod::train::comm {
namespace {

using namespace std::chrono_literals;

TEST(NcclCommunicatorTest, WithoutNcclOrAGpuItSaysWhy) {
  HashStore store;
  NcclOptions o;
  o.timeout = 100ms;
  if (!NcclCompiledIn()) {
    auto c = ConnectNccl(store, o);
    EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(c.status().message().find("--comm gloo"), std::string::npos);
    return;
  }
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is here: the tests below run instead";
  auto c = ConnectNccl(store, o);
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition) << c.status().ToString();
}

// Every collective on `world` GPUs (one rank each), against the sums.
TEST(NcclCommunicatorTest, CollectivesOnEveryGpu) {
  const int gpus = CudaDeviceCount();
  if (gpus == 0) GTEST_SKIP() << "no GPU (or no driver) here";
  const int world = std::min(gpus, 4);
  HashStore store;
  const auto counts = ShardCounts(100003, world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r) {
    ts.emplace_back([&, r] {
      NcclOptions o;
      o.rank = r;
      o.size = world;
      o.device = r;
      o.prefix = "t";
      auto c = ConnectNccl(store, o);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      std::vector<float> data(100003);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((r + 1) * (i % 101));
      ASSERT_TRUE((*c)->ReduceScatterSum(data.data(), counts).ok());
      const int64_t off = ShardOffset(counts, r);
      for (int64_t i = off; i < off + counts[r]; ++i) {
        ASSERT_EQ(data[i], static_cast<float>(world * (world + 1) / 2 * (i % 101)));
      }
      for (int64_t i = off; i < off + counts[r]; ++i) data[i] = static_cast<float>(r);
      ASSERT_TRUE((*c)->AllGather(data.data(), counts).ok());
      for (int q = 0; q < world; ++q)
        EXPECT_EQ(data[ShardOffset(counts, q)], static_cast<float>(q));
      auto all = (*c)->AllGatherBytes(std::string(r + 1, 'x'));
      ASSERT_TRUE(all.ok());
      for (int q = 0; q < world; ++q) EXPECT_EQ((*all)[q], std::string(q + 1, 'x'));
      int64_t word = r == 0 ? 77 : 0;
      ASSERT_TRUE((*c)->Broadcast(&word, 8, 0).ok());
      EXPECT_EQ(word, 77);
      EXPECT_TRUE((*c)->Barrier().ok());
    });
  }
  for (auto& t : ts) t.join();
}

}  // namespace
}  // namespace hpod::train::comm
