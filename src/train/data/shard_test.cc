#include "hpod/train/data/shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "hpod/train/data/test_util.h"

namespace hpod::train::data {
namespace {

using ::hpod::train::data::testing::Slurp;
using ::hpod::train::data::testing::Spit;
using ::hpod::train::data::testing::TempDir;
using ::testing::HasSubstr;

std::vector<int32_t> Ramp(int64_t n, int32_t vocab) {
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((i * 7919) % vocab);
  return v;
}

TEST(ShardTest, RoundTripTwoByteTokens) {
  TempDir dir;
  const std::string path = dir.Path("a.bin");
  const auto tokens = Ramp(10007, 4096);
  ASSERT_TRUE(WriteShard(path, 4096, tokens).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), 64u + 2u * 10007u);

  const std::string bytes = Slurp(path);
  EXPECT_EQ(std::memcmp(bytes.data(), "HPODTOK\0", 8), 0);
  uint32_t u32;
  std::memcpy(&u32, bytes.data() + 8, 4);
  EXPECT_EQ(u32, 1u);  // version
  std::memcpy(&u32, bytes.data() + 12, 4);
  EXPECT_EQ(u32, 64u);  // header_bytes
  std::memcpy(&u32, bytes.data() + 20, 4);
  EXPECT_EQ(u32, 2u);  // token_bytes
  uint64_t sum;
  std::memcpy(&sum, bytes.data() + 32, 8);
  EXPECT_EQ(sum, XXH3_64bits(bytes.data() + 64, bytes.size() - 64));

  auto shard = Shard::Open(path, /*verify_checksum=*/true);
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  EXPECT_EQ(shard->vocab_size(), 4096u);
  EXPECT_EQ(shard->token_bytes(), 2u);
  ASSERT_EQ(shard->num_tokens(), 10007);
  for (int64_t i = 0; i < shard->num_tokens(); ++i) ASSERT_EQ(shard->token(i), tokens[i]) << i;
  std::vector<int32_t> copy(100);
  shard->CopyTokens(9907, 100, copy.data());
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), tokens.begin() + 9907));
}

TEST(ShardTest, RoundTripFourByteTokens) {
  TempDir dir;
  const std::string path = dir.Path("b.bin");
  std::vector<int32_t> tokens = Ramp(5000, 100000);
  tokens.push_back(99999);  // the largest id
  tokens.push_back(65536);  // just past 16 bits
  ASSERT_TRUE(WriteShard(path, 100000, tokens).ok());
  EXPECT_EQ(std::filesystem::file_size(path), 64u + 4u * 5002u);
  auto shard = Shard::Open(path, true);
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  EXPECT_EQ(shard->token_bytes(), 4u);
  ASSERT_EQ(shard->num_tokens(), 5002);
  for (int64_t i = 0; i < 5002; ++i) ASSERT_EQ(shard->token(i), tokens[i]) << i;
  std::vector<int32_t> copy(5002);
  shard->CopyTokens(0, 5002, copy.data());
  EXPECT_EQ(copy, tokens);
}

TEST(ShardTest, VocabBoundaryPicksWidth) {
  EXPECT_EQ(TokenBytesForVocab(65536), 2u);
  EXPECT_EQ(TokenBytesForVocab(65537), 4u);
  TempDir dir;
  ASSERT_TRUE(WriteShard(dir.Path("c.bin"), 65536, std::vector<int32_t>{0, 65535}).ok());
  auto shard = Shard::Open(dir.Path("c.bin"), true);
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(shard->token(1), 65535);
}

TEST(ShardTest, EmptyShardRoundTrips) {
  TempDir dir;
  ASSERT_TRUE(WriteShard(dir.Path("e.bin"), 512, {}).ok());
  auto shard = Shard::Open(dir.Path("e.bin"), true);
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  EXPECT_EQ(shard->num_tokens(), 0);
  EXPECT_EQ(UnigramEntropy(*shard), 0.0);
}

TEST(ShardTest, WriteRejectsBadTokens) {
  TempDir dir;
  Status s = WriteShard(dir.Path("x.bin"), 10, std::vector<int32_t>{1, 10});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("token 1 is 10, outside [0, 10)"));
  s = WriteShard(dir.Path("x.bin"), 10, std::vector<int32_t>{-1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = WriteShard(dir.Path("x.bin"), 0, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.Path("x.bin")));
  s = WriteShard(dir.Path("no/such/dir/x.bin"), 10, std::vector<int32_t>{1});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir/x.bin.tmp"));
}

TEST(ShardTest, MissingFileIsNotFound) {
  TempDir dir;
  auto shard = Shard::Open(dir.Path("missing.bin"), true);
  EXPECT_EQ(shard.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(shard.status().message(), HasSubstr("missing.bin"));
}

// Each kind of damage, applied to a good 2-byte shard of 1000 tokens, with the
// phrase the error must contain.
struct Corruption {
  const char* name;
  void (*damage)(std::string& bytes);
  const char* expected;
  bool needs_checksum;  // detected only when verifying
};

template <typename T>
void PutAt(std::string& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}

const Corruption kCorruptions[] = {
    {"magic", [](std::string& b) { b[0] = 'X'; }, "bad magic", false},
    {"version", [](std::string& b) { PutAt<uint32_t>(b, 8, 2); }, "unsupported version 2", false},
    {"header_bytes", [](std::string& b) { PutAt<uint32_t>(b, 12, 128); }, "header_bytes is 128",
     false},
    {"vocab_zero", [](std::string& b) { PutAt<uint32_t>(b, 16, 0); }, "vocab_size is 0", false},
    {"token_bytes", [](std::string& b) { PutAt<uint32_t>(b, 20, 4); },
     "token_bytes is 4 for vocab_size 4096, expected 2", false},
    {"reserved", [](std::string& b) { b[50] = 1; }, "reserved header byte 50", false},
    {"truncated", [](std::string& b) { b.resize(b.size() - 3); }, "truncated or appended", false},
    {"appended", [](std::string& b) { b += "xx"; }, "truncated or appended", false},
    {"count", [](std::string& b) { PutAt<uint64_t>(b, 24, 1001); }, "header says 1001 tokens",
     false},
    {"short", [](std::string& b) { b.resize(20); }, "less than the 64-byte header", false},
    {"flipped_token", [](std::string& b) { b[64 + 500] ^= 0x10; }, "checksum mismatch", true},
    {"flipped_checksum", [](std::string& b) { b[33] ^= 0x01; }, "checksum mismatch", true},
    {"token_out_of_vocab",
     [](std::string& b) {
       PutAt<uint16_t>(b, 64 + 2 * 7, 5000);  // >= 4096, then a valid checksum
       PutAt<uint64_t>(b, 32, XXH3_64bits(b.data() + 64, b.size() - 64));
     },
     "token 7 is 5000, not below vocab_size 4096", true},
};

TEST(ShardTest, EveryCorruptionIsDataLossNamingTheFile) {
  TempDir dir;
  const std::string good = dir.Path("good.bin");
  ASSERT_TRUE(WriteShard(good, 4096, Ramp(1000, 4096)).ok());
  const std::string pristine = Slurp(good);
  for (const Corruption& c : kCorruptions) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.Path(std::string(c.name) + ".bin");
    std::string bytes = pristine;
    c.damage(bytes);
    Spit(path, bytes);
    auto shard = Shard::Open(path, /*verify_checksum=*/true);
    ASSERT_FALSE(shard.ok());
    EXPECT_EQ(shard.status().code(), StatusCode::kDataLoss);
    EXPECT_THAT(shard.status().message(), HasSubstr(path));
    EXPECT_THAT(shard.status().message(), HasSubstr(c.expected));
    // Without verification only the header checks run.
    auto lazy = Shard::Open(path, /*verify_checksum=*/false);
    EXPECT_EQ(lazy.ok(), c.needs_checksum) << lazy.status().ToString();
    if (lazy.ok()) {
      EXPECT_EQ(lazy->Verify().code(), StatusCode::kDataLoss);
    }
  }
}

TEST(ShardTest, MovedShardKeepsMapping) {
  TempDir dir;
  ASSERT_TRUE(WriteShard(dir.Path("m.bin"), 100, std::vector<int32_t>{5, 6, 7}).ok());
  auto opened = Shard::Open(dir.Path("m.bin"), true);
  ASSERT_TRUE(opened.ok());
  Shard a = std::move(opened).value();
  Shard b = std::move(a);
  EXPECT_EQ(b.token(2), 7);
  std::vector<Shard> v;
  v.push_back(std::move(b));
  v.reserve(10);  // relocates
  EXPECT_EQ(v[0].token(0), 5);
}

TEST(ShardTest, UnigramEntropyInNats) {
  TempDir dir;
  ASSERT_TRUE(WriteShard(dir.Path("u.bin"), 8, std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}).ok());
  auto uniform = Shard::Open(dir.Path("u.bin"), true);
  ASSERT_TRUE(uniform.ok());
  EXPECT_NEAR(UnigramEntropy(*uniform), std::log(4.0), 1e-12);

  // p = (1/2, 1/4, 1/4): H = 1.5 ln 2.
  ASSERT_TRUE(WriteShard(dir.Path("s.bin"), 8, std::vector<int32_t>{7, 7, 1, 2}).ok());
  auto skewed = Shard::Open(dir.Path("s.bin"), true);
  ASSERT_TRUE(skewed.ok());
  EXPECT_NEAR(UnigramEntropy(*skewed), 1.5 * std::log(2.0), 1e-12);

  ASSERT_TRUE(WriteShard(dir.Path("c.bin"), 8, std::vector<int32_t>{3, 3, 3}).ok());
  auto constant = Shard::Open(dir.Path("c.bin"), true);
  ASSERT_TRUE(constant.ok());
  EXPECT_EQ(UnigramEntropy(*constant), 0.0);
}

}  // namespace
}  // namespace hpod::train::data
