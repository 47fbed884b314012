// Sharded checkpoints: ranks as threads write their parts in parallel through
// AsyncCheckpointer, rank 0 commits; loading reads any world size's slices;
// damage, a failed or missing part, and a directory the ranks do not share.
#include "hpod/train/ckpt/sharded.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <latch>
#include <thread>

#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/ckpt/test_util.h"

namespace hpod::train::ckpt {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr int64_t kParams = 1000;

// The arena a "run" holds: params and moments with distinct values per array.
float Value(int which, int64_t i) { return static_cast<float>(which * 100000 + i); }

// Slices of kParams for `world` ranks (as the trainer's ShardCounts would).
std::vector<std::pair<int64_t, int64_t>> Slices(int world) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t per = (kParams + world - 1) / world;
  for (int r = 0; r < world; ++r) {
    const int64_t b = std::min(kParams, r * per);
    out.push_back({b, std::min(kParams, b + per) - b});
  }
  return out;
}

// Every rank of a `world` saves step `step` in `dirs[rank]` (all the same dir
// unless a test says otherwise). Returns each rank's Wait() status.
std::vector<Status> SaveSharded(int world, int64_t step, const std::vector<std::string>& dirs,
                                PartExchange& exchange, int failing_rank = -1) {
  std::vector<Status> out(world);
  std::vector<std::thread> ts;
  const auto slices = Slices(world);
  // As the trainer does: every rank's checkpointer exists (rank 0 has removed
  // stale temp directories) before any rank saves.
  std::latch created(world);
  for (int r = 0; r < world; ++r) {
    ts.emplace_back([&, r] {
      CheckpointerOptions o;
      o.fsync = false;
      ShardingOptions s;
      s.rank = r;
      s.world = world;
      s.begin = slices[r].first;
      s.count = slices[r].second;
      s.num_params = kParams;
      s.run_id = "test";
      s.exchange = &exchange;
      s.commit_timeout = 2s;
      o.sharding = s;
      if (r == failing_rank) {
        o.before_write_hook = [&, r](int64_t) {
          // The part cannot be written: a directory sits where its file goes.
          fs::create_directories(dirs[r] + "/" + CheckpointDirName(step) + ".tmp-test/" +
                                 PartFileName(r, world));
        };
      }
      auto c = AsyncCheckpointer::Create(dirs[r], o);
      created.arrive_and_wait();
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      std::vector<float> p(s.count), m(s.count), v(s.count);
      for (int64_t i = 0; i < s.count; ++i) {
        p[i] = Value(0, s.begin + i);
        m[i] = Value(1, s.begin + i);
        v[i] = Value(2, s.begin + i);
      }
      std::vector<TensorView> views = {{"params", {s.count}, p.data(), s.count},
                                       {"exp_avg", {s.count}, m.data(), s.count},
                                       {"exp_avg_sq", {s.count}, v.data(), s.count}};
      auto saved = (*c)->Save(step, {{"step", step}, {"world", world}}, views);
      out[r] = saved.ok() ? (*c)->Wait() : saved.status();
      (void)(*c)->Close();
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

// What one rank of a `world` loads: all params, the moments of its slice.
struct Loaded {
  std::vector<float> params, m, v;
  Status status;
  ShardedCheckpoint info;
};
Loaded LoadAs(const std::string& path, int world, int rank) {
  Loaded l;
  const auto slices = Slices(world);
  const int64_t begin = slices[rank].first, count = slices[rank].second;
  l.params.assign(kParams, -1);
  l.m.assign(count, -1);
  l.v.assign(count, -1);
  std::vector<std::vector<float>> scratch;
  auto got =
      LoadSharded(path, [&](const PartInfo& part, const std::string& name) -> StatusOr<float*> {
        if (name == "params") return l.params.data() + part.begin;
        const int64_t lo = std::max(begin, part.begin);
        const int64_t hi = std::min(begin + count, part.begin + part.count);
        if (lo >= hi) return nullptr;  // not this rank's moments
        scratch.emplace_back(part.count);
        return scratch.back().data();
      });
  l.status = got.status();
  if (got.ok()) l.info = *got;
  // Copy the overlaps out of the scratch slices (in the order the sink saw them).
  size_t k = 0;
  if (got.ok()) {
    for (const PartInfo& part : got->parts) {
      const int64_t lo = std::max(begin, part.begin);
      const int64_t hi = std::min(begin + count, part.begin + part.count);
      if (lo >= hi) continue;
      for (auto* dst : {&l.m, &l.v}) {
        const auto& src = scratch[k++];
        std::copy(src.begin() + (lo - part.begin), src.begin() + (hi - part.begin),
                  dst->begin() + (lo - begin));
      }
    }
  }
  return l;
}

TEST(ShardedCheckpointTest, RanksWriteInParallelAndRankZeroCommits) {
  TempDir tmp;
  auto exchange = MakeLocalPartExchange();
  for (const Status& s : SaveSharded(3, 12, {tmp.path(), tmp.path(), tmp.path()}, *exchange)) {
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const std::string ck = tmp.path() + "/step_000000012";
  EXPECT_EQ(*ReadFormatVersion(ck), 2);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(fs::exists(ck + "/" + PartFileName(r, 3)));
  EXPECT_EQ(ListComplete(tmp.path()), std::vector<std::string>{ck});
  EXPECT_TRUE(fs::exists(ck + "/part-00002-of-00003.bin"));
  // No temp directory is left.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);

  for (int world : {3, 2, 1, 4}) {  // the same world, fewer, one, more
    for (int rank = 0; rank < world; ++rank) {
      Loaded l = LoadAs(ck, world, rank);
      ASSERT_TRUE(l.status.ok()) << l.status.ToString();
      EXPECT_EQ(l.info.step, 12);
      EXPECT_EQ(l.info.world, 3);
      EXPECT_EQ(l.info.meta["world"], 3);
      for (int64_t i = 0; i < kParams; ++i) ASSERT_EQ(l.params[i], Value(0, i));
      const int64_t begin = Slices(world)[rank].first;
      for (size_t i = 0; i < l.m.size(); ++i) {
        ASSERT_EQ(l.m[i], Value(1, begin + i)) << world << "/" << rank;
        ASSERT_EQ(l.v[i], Value(2, begin + i));
      }
    }
  }
}

TEST(ShardedCheckpointTest, DamageIsFoundByTheRanksThatReadIt) {
  TempDir tmp;
  auto exchange = MakeLocalPartExchange();
  for (const Status& s : SaveSharded(2, 5, {tmp.path(), tmp.path()}, *exchange)) {
    ASSERT_TRUE(s.ok());
  }
  const std::string part1 = tmp.path() + "/step_000000005/part-00001-of-00002.bin";
  {
    // Flip a byte in the last tensor of part 1 (its exp_avg_sq).
    std::fstream f(part1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-8, std::ios::end);
    char c;
    f.read(&c, 1);
    f.seekp(-8, std::ios::end);
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  Loaded rank1 = LoadAs(tmp.path() + "/step_000000005", 2, 1);
  EXPECT_EQ(rank1.status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(rank1.status.message(),
              HasSubstr("part-00001-of-00002.bin: tensor \"exp_avg_sq\": crc32c"));
  // Rank 0 does not read part 1's moments: it loads (the run agrees to fall back
  // because rank 1 could not).
  EXPECT_TRUE(LoadAs(tmp.path() + "/step_000000005", 2, 0).status.ok());
}

TEST(ShardedCheckpointTest, AFailedPartFailsTheCommitAndLeavesNothing) {
  TempDir tmp;
  auto exchange = MakeLocalPartExchange();
  auto out = SaveSharded(3, 9, {tmp.path(), tmp.path(), tmp.path()}, *exchange, /*failing=*/2);
  EXPECT_FALSE(out[2].ok());
  EXPECT_FALSE(out[0].ok());
  EXPECT_THAT(out[0].message(), HasSubstr("rank 2 could not write its part"));
  EXPECT_TRUE(ListComplete(tmp.path()).empty());
}

TEST(ShardedCheckpointTest, DirectoriesTheRanksDoNotShareAreRefused) {
  TempDir a, b;
  auto exchange = MakeLocalPartExchange();
  auto out = SaveSharded(2, 3, {a.path(), b.path()}, *exchange);
  EXPECT_TRUE(out[1].ok());  // rank 1 wrote its part, into its own directory
  ASSERT_FALSE(out[0].ok());
  EXPECT_THAT(out[0].message(), HasSubstr("must be a directory every rank shares"));
  EXPECT_TRUE(ListComplete(a.path()).empty());
}

TEST(ShardedCheckpointTest, AMissingRankTimesOutNamingIt) {
  auto exchange = MakeLocalPartExchange();
  ASSERT_TRUE(exchange->Report(1, 0, "{}").ok());
  auto got = exchange->Collect(1, 3, 50ms);
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("no part from rank(s) 1, 2"));
}

TEST(ShardedCheckpointTest, AManifestWhosePartsDoNotTileIsCorrupt) {
  TempDir tmp;
  auto exchange = MakeLocalPartExchange();
  for (const Status& s : SaveSharded(2, 4, {tmp.path(), tmp.path()}, *exchange)) {
    ASSERT_TRUE(s.ok());
  }
  const std::string manifest = tmp.path() + "/step_000000004/manifest.json";
  std::ifstream in(manifest);
  nlohmann::json m = nlohmann::json::parse(in);
  in.close();
  m["parts"][1]["begin"] = 7;
  std::ofstream(manifest) << m.dump();
  Loaded l = LoadAs(tmp.path() + "/step_000000004", 1, 0);
  EXPECT_EQ(l.status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(l.status.message(), HasSubstr("part 1 is out of order"));
}

}  // namespace
}  // namespace hpod::train::ckpt
