#include "hpod/train/data/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "hpod/train/data/shard.h"
#include "hpod/train/data/test_util.h"

namespace hpod::train::data {
namespace {

using ::hpod::train::data::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kSeqLen = 16;
constexpr uint32_t kVocab = 100000;  // token i of the stream is i: content names its position

// Writes the stream 0..n-1 split into shards of the given sizes (zero allowed).
std::vector<std::string> WriteStream(const TempDir& dir, const std::vector<int64_t>& sizes) {
  std::vector<std::string> paths;
  int32_t next = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<int32_t> tokens(sizes[s]);
    for (auto& t : tokens) t = next++;
    paths.push_back(dir.Path("part-" + std::to_string(s) + ".bin"));
    EXPECT_TRUE(WriteShard(paths.back(), kVocab, tokens).ok());
  }
  return paths;
}

std::vector<int32_t> Rows(const TokenSource& src, int64_t first, int64_t n) {
  std::vector<int32_t> x(n * src.seq_len()), y(n * src.seq_len());
  FillBatch(src, first, n, x.data(), y.data());
  x.insert(x.end(), y.begin(), y.end());
  return x;
}

TEST(EpochPermutationTest, MatchesTheDocumentedGenerator) {
  // Values from an independent Python implementation of the algorithm in loader.h.
  EXPECT_THAT(EpochPermutation(10, 1234, 0), ElementsAre(3, 8, 2, 6, 7, 1, 9, 0, 5, 4));
  EXPECT_THAT(EpochPermutation(10, 1234, 1), ElementsAre(3, 8, 6, 0, 2, 7, 4, 1, 9, 5));
  EXPECT_THAT(EpochPermutation(10, 1235, 0), ElementsAre(5, 1, 9, 2, 6, 4, 3, 8, 0, 7));
  EXPECT_EQ(SplitMix64Mix(1), 0x5692161d100b05e5ull);
  EXPECT_THAT(EpochPermutation(1, 7, 3), ElementsAre(0));
  EXPECT_TRUE(EpochPermutation(0, 7, 3).empty());
}

TEST(LoaderTest, EverySampleOncePerEpochAcrossShardBoundaries) {
  TempDir dir;
  // 1000 + 0 + 1337 = 2337 tokens: (2337 - 1) / 16 = 146 samples; the empty
  // shard and the odd split put windows across boundaries.
  auto paths = WriteStream(dir, {1000, 0, 1337});
  auto src = OpenShards(paths, kSeqLen, 42);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const TokenSource& s = **src;
  ASSERT_EQ(s.num_samples(), 146);
  EXPECT_EQ(s.vocab_size(), kVocab);
  EXPECT_EQ(s.seq_len(), kSeqLen);
  std::vector<int32_t> x(kSeqLen), y(kSeqLen);
  std::vector<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order;
    for (int64_t i = epoch * 146; i < (epoch + 1) * 146; ++i) {
      s.Sample(i, x.data(), y.data());
      ASSERT_EQ(x[0] % kSeqLen, 0) << "samples start on seq_len boundaries";
      for (int64_t t = 0; t < kSeqLen; ++t) {
        ASSERT_EQ(x[t], x[0] + t);
        ASSERT_EQ(y[t], x[0] + t + 1);
      }
      order.push_back(x[0] / kSeqLen);
    }
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(146);
    for (int64_t k = 0; k < 146; ++k) all[k] = k;
    EXPECT_EQ(sorted, all) << "epoch " << epoch;
    EXPECT_EQ(order, EpochPermutation(146, 42, epoch));
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]) << "each epoch is reshuffled";
  EXPECT_NE(orders[1], orders[2]);
}

TEST(LoaderTest, DeterministicForASeedAndDifferentAcrossSeeds) {
  TempDir dir;
  auto paths = WriteStream(dir, {3000});
  auto a = OpenShards(paths, kSeqLen, 7);
  auto b = OpenShards(paths, kSeqLen, 7);
  auto c = OpenShards(paths, kSeqLen, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(Rows(**a, 0, 400), Rows(**b, 0, 400));
  EXPECT_NE(Rows(**a, 0, 400), Rows(**c, 0, 400));
}

TEST(LoaderTest, FingerprintNamesTheTokenStream) {
  TempDir a_dir, b_dir;
  auto a = OpenShards(WriteStream(a_dir, {3000}), kSeqLen, 7);
  auto a_split = OpenShards(WriteStream(b_dir, {1000, 2000}), kSeqLen, 7);
  ASSERT_TRUE(a.ok() && a_split.ok());
  auto a_again = OpenShards({a_dir.Path("part-0.bin")}, kSeqLen, 9);
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ((*a)->fingerprint(), (*a_again)->fingerprint());
  EXPECT_NE((*a)->fingerprint(), (*a_split)->fingerprint());
  // Same length, other content: the checksum tells them apart.
  std::vector<int32_t> other(3000, 5);
  ASSERT_TRUE(WriteShard(a_dir.Path("part-0.bin"), kVocab, other).ok());
  auto changed = OpenShards({a_dir.Path("part-0.bin")}, kSeqLen, 7);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE((*a)->fingerprint(), (*changed)->fingerprint());
  EXPECT_EQ(SyntheticTokens(512, kSeqLen, 1)->fingerprint(), "synthetic:512");
  EXPECT_NE(SyntheticTokens(512, kSeqLen, 1)->fingerprint(),
            SyntheticTokens(4096, kSeqLen, 1)->fingerprint());
}

TEST(LoaderTest, ResumeFromConsumedSamplesSeesTheTailOfTheUninterruptedRun) {
  TempDir dir;
  auto paths = WriteStream(dir, {1500, 1501});
  auto full = OpenShards(paths, kSeqLen, 1337);
  ASSERT_TRUE(full.ok());
  const int64_t n = (*full)->num_samples();  // 187
  const int64_t batch = 8, steps = 3 * n / batch;
  // The uninterrupted run: one batch per step, three epochs.
  std::vector<std::vector<int32_t>> run;
  for (int64_t step = 0; step < steps; ++step) run.push_back(Rows(**full, step * batch, batch));
  // Stopped after k steps (k * batch consumed samples, mid-epoch and across an
  // epoch boundary), resumed in a fresh source.
  for (int64_t k : {int64_t{1}, int64_t{23}, steps / 2, steps - 1}) {
    auto resumed = OpenShards(paths, kSeqLen, 1337);
    ASSERT_TRUE(resumed.ok());
    const int64_t consumed = k * batch;
    for (int64_t step = k; step < steps; ++step) {
      ASSERT_EQ(Rows(**resumed, consumed + (step - k) * batch, batch), run[step])
          << "resumed at " << k << ", step " << step;
    }
  }
}

TEST(LoaderTest, ConcurrentFillsMatchSerial) {
  TempDir dir;
  auto paths = WriteStream(dir, {5000});
  auto src = OpenShards(paths, kSeqLen, 3);
  ASSERT_TRUE(src.ok());
  const int64_t n = (*src)->num_samples();
  // 4 threads, each a slice of rows straddling epoch boundaries.
  const int64_t rows = 4 * n;
  std::vector<int32_t> x(rows * kSeqLen), y(rows * kSeqLen);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t r = t; r < rows; r += 4) {
        FillBatch(**src, r, 1, x.data() + r * kSeqLen, y.data() + r * kSeqLen);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto serial = OpenShards(paths, kSeqLen, 3);
  ASSERT_TRUE(serial.ok());
  std::vector<int32_t> sx(rows * kSeqLen), sy(rows * kSeqLen);
  FillBatch(**serial, 0, rows, sx.data(), sy.data());
  EXPECT_EQ(x, sx);
  EXPECT_EQ(y, sy);
}

TEST(LoaderTest, GlobsExpandSorted) {
  TempDir dir;
  auto paths = WriteStream(dir, {100, 100, 100});
  auto src = OpenShards({dir.Path("part-*.bin")}, 10, 0);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->num_samples(), 29);  // (300 - 1) / 10
  // Sorted order means the stream is 0..299 again: some window holds 95..105.
  std::set<int32_t> starts;
  std::vector<int32_t> x(10), y(10);
  for (int64_t i = 0; i < 29; ++i) {
    (*src)->Sample(i, x.data(), y.data());
    for (int t = 1; t < 10; ++t) ASSERT_EQ(x[t], x[t - 1] + 1);
    starts.insert(x[0]);
  }
  EXPECT_EQ(starts.size(), 29u);
  EXPECT_EQ(*starts.rbegin(), 280);
}

TEST(LoaderTest, ErrorsSayWhatToFix) {
  TempDir dir;
  auto paths = WriteStream(dir, {100});
  auto no_match = OpenShards({dir.Path("nothing-*.bin")}, 10, 0);
  EXPECT_EQ(no_match.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(no_match.status().message(), HasSubstr("nothing-*.bin"));

  auto missing = OpenShards({dir.Path("missing.bin")}, 10, 0);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  auto too_short = OpenShards(paths, 100, 0);
  EXPECT_EQ(too_short.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_short.status().message(), HasSubstr("fewer than one sample"));

  auto bad_len = OpenShards(paths, 0, 0);
  EXPECT_EQ(bad_len.status().code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(WriteShard(dir.Path("other.bin"), 512, std::vector<int32_t>(100, 1)).ok());
  auto mixed = OpenShards({paths[0], dir.Path("other.bin")}, 10, 0);
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.status().message(), HasSubstr("vocab_size 512"));

  testing::Spit(dir.Path("corrupt.bin"), "HPODTOK");
  auto corrupt = OpenShards({dir.Path("corrupt.bin")}, 10, 0);
  EXPECT_EQ(corrupt.status().code(), StatusCode::kDataLoss);
}

TEST(SyntheticTokensTest, DeterministicUniformAndShifted) {
  auto a = SyntheticTokens(4096, 64, 5);
  auto b = SyntheticTokens(4096, 64, 5);
  auto c = SyntheticTokens(4096, 64, 6);
  EXPECT_EQ(a->num_samples(), 1 << 20);
  EXPECT_EQ(a->vocab_size(), 4096u);
  const auto ra = Rows(*a, 1000, 32);
  EXPECT_EQ(ra, Rows(*b, 1000, 32));
  EXPECT_NE(ra, Rows(*c, 1000, 32));
  EXPECT_NE(Rows(*a, 0, 1), Rows(*a, 1, 1));
  std::vector<int32_t> x(64), y(64);
  double sum = 0;
  for (int64_t i = 0; i < 200; ++i) {
    a->Sample(i, x.data(), y.data());
    for (int t = 0; t < 64; ++t) {
      ASSERT_GE(x[t], 0);
      ASSERT_LT(x[t], 4096);
      sum += x[t];
      if (t > 0) {
        ASSERT_EQ(y[t - 1], x[t]);
      }
    }
  }
  EXPECT_NEAR(sum / (200 * 64), 2047.5, 40.0);  // uniform mean; sd of the mean ~ 9
}

}  // namespace
}  // namespace hpod::train::data
