// Format, atomicity, verification/fallback and keep-last tests (the async writer's
// own behaviour is in async_checkpointer_test.cc).
#include "hpod/train/ckpt/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/base/crc32c.h"
#include "hpod/train/ckpt/test_util.h"

namespace hpod::train::ckpt {
namespace {
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CheckpointTest, DirNames) {
  EXPECT_EQ(CheckpointDirName(42), "step_000000042");
  EXPECT_EQ(ParseCheckpointDirName("step_000000042"), 42);
  EXPECT_EQ(ParseCheckpointDirName("step_1234567890"), 1234567890);
  EXPECT_EQ(ParseCheckpointDirName("step_000000042.tmp-1-0"), std::nullopt);
  EXPECT_EQ(ParseCheckpointDirName("step_42"), std::nullopt);
  EXPECT_EQ(ParseCheckpointDirName("step_00000004x"), std::nullopt);
}

TEST(CheckpointTest, RoundTripsSeveralTensorsAndMeta) {
  TempDir tmp;
  TestTensors t;
  t.Add("model.embed_tokens.weight", {3, 5}, 0.5f);
  t.Add("scalar", {}, 7.0f);
  t.Add("empty", {0}, 0.0f);
  t.Add("odd", {7}, -1.25f);
  const nlohmann::json meta = {
      {"consumed_samples", 1234}, {"rng", {{"state", {1, 2, 3}}}}, {"config", {{"dim", 8}}}};
  ASSERT_TRUE(SaveNow(tmp.path(), 42, meta, t.views()).ok());

  const std::string ckpt = tmp.path() + "/step_000000042";
  EXPECT_THAT(ListComplete(tmp.path()), ElementsAre(ckpt));
  auto loaded = Load(ckpt);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 42);
  EXPECT_EQ(loaded->path, ckpt);
  EXPECT_EQ(loaded->meta, meta);
  EXPECT_THAT(loaded->names, ElementsAre("model.embed_tokens.weight", "scalar", "empty", "odd"));
  for (size_t i = 0; i < t.views().size(); ++i) {
    const TensorView& v = t.views()[i];
    EXPECT_EQ(loaded->shape(v.name), v.shape) << v.name;
    EXPECT_EQ(loaded->tensors.at(v.name), t.values(i)) << v.name;
  }
  EXPECT_TRUE(loaded->shape("missing").empty());
  EXPECT_EQ(loaded->tensors.at("scalar"), std::vector<float>{7.0f});
  EXPECT_TRUE(loaded->tensors.at("empty").empty());

  // The documented on-disk format.
  const std::string bin = ReadFile(ckpt + "/tensors.bin");
  EXPECT_EQ(static_cast<int64_t>(bin.size()), AsyncCheckpointer::FileBytes(t.views()));
  EXPECT_EQ(loaded->bytes, static_cast<int64_t>(bin.size()));
  EXPECT_EQ(bin.substr(0, 8), "HPODCKPT");
  EXPECT_EQ(bin[8], 1);   // u32 version, little-endian
  EXPECT_EQ(bin[12], 4);  // tensor count
  const auto m = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  EXPECT_EQ(m["format_version"], 1);
  EXPECT_EQ(m["step"], 42);
  EXPECT_EQ(m["meta"], meta);
  EXPECT_EQ(m["tensors_file"]["size"], bin.size());
  EXPECT_EQ(m["tensors_file"]["magic"], "HPODCKPT");
  ASSERT_EQ(m["tensors"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const auto& e = m["tensors"][i];
    const int64_t offset = e["offset"], nbytes = e["nbytes"];
    EXPECT_EQ(e["dtype"], "F32");
    EXPECT_EQ(offset % 64, 0) << e.dump();
    EXPECT_GE(offset, 64);
    EXPECT_EQ(nbytes, t.views()[i].numel * 4);
    EXPECT_EQ(e["crc32c"].get<uint32_t>(), Crc32c(bin.data() + offset, nbytes));
    if (nbytes > 0) {
      EXPECT_EQ(std::memcmp(bin.data() + offset, t.values(i).data(), nbytes), 0);
    }
  }
}

TEST(CheckpointTest, TempDirsAndCheckpointsWithoutManifestDoNotExist) {
  TempDir tmp;
  TestTensors t;
  t.Add("w", {4}, 1.0f);
  ASSERT_TRUE(SaveNow(tmp.path(), 1, {}, t.views()).ok());
  ASSERT_TRUE(SaveNow(tmp.path(), 2, {}, t.views()).ok());
  const std::string two = tmp.path() + "/step_000000002";
  // A complete-looking temp dir (a crash just before the final rename) and a step
  // dir whose manifest was never written.
  fs::copy(two, tmp.path() + "/step_000000009.tmp-123-0");
  fs::copy(two, tmp.path() + "/step_000000010");
  fs::remove(tmp.path() + "/step_000000010/manifest.json");

  EXPECT_THAT(ListComplete(tmp.path()), ElementsAre(two, tmp.path() + "/step_000000001"));
  std::vector<std::string> warnings;
  auto loaded = LoadLatest(tmp.path(), &warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("step_000000010"));
  EXPECT_THAT(warnings[0], HasSubstr("no manifest.json"));
  EXPECT_EQ(Load(tmp.path() + "/step_000000010").status().code(), StatusCode::kNotFound);

  // Create() cleans up the crashed writer's temp dir but nothing else.
  ASSERT_TRUE(AsyncCheckpointer::Create(tmp.path(), {}).ok());
  EXPECT_FALSE(fs::exists(tmp.path() + "/step_000000009.tmp-123-0"));
  EXPECT_TRUE(fs::exists(tmp.path() + "/step_000000010"));
  EXPECT_TRUE(fs::exists(two));
}

enum class Damage { kFlipByte, kTruncate, kDeleteManifest, kBadManifestJson, kBadShape, kEditMeta };

struct DamageCase {
  Damage damage;
  const char* reason;  // expected in the warning
};

class CorruptNewestTest : public ::testing::TestWithParam<DamageCase> {};

void Apply(Damage damage, const std::string& ckpt) {
  const std::string bin = ckpt + "/tensors.bin", manifest = ckpt + "/manifest.json";
  switch (damage) {
    case Damage::kFlipByte: {
      std::string b = ReadFile(bin);
      b[64 + 5] ^= 0x10;  // inside tensor "w" (the first tensor sits at offset 64)
      WriteFile(bin, b);
      break;
    }
    case Damage::kTruncate:
      fs::resize_file(bin, fs::file_size(bin) - 3);
      break;
    case Damage::kDeleteManifest:
      fs::remove(manifest);
      break;
    case Damage::kBadManifestJson: {
      const std::string m = ReadFile(manifest);
      WriteFile(manifest, m.substr(0, m.size() / 2));
      break;
    }
    case Damage::kBadShape: {
      auto m = nlohmann::json::parse(ReadFile(manifest));
      m["tensors"][0]["shape"] = {3, 3};
      WriteFile(manifest, m.dump());
      break;
    }
    case Damage::kEditMeta: {  // e.g. a flipped digit in consumed_samples
      auto m = nlohmann::json::parse(ReadFile(manifest));
      m["meta"]["v"] = "neu";
      WriteFile(manifest, m.dump());
      break;
    }
  }
}

TEST_P(CorruptNewestTest, FallsBackToThePreviousWithAWarningNamingIt) {
  TempDir tmp;
  TestTensors old_t, new_t;
  old_t.Add("w", {16}, 1.0f);
  new_t.Add("w", {16}, 2.0f);
  ASSERT_TRUE(SaveNow(tmp.path(), 1, {{"v", "old"}}, old_t.views()).ok());
  ASSERT_TRUE(SaveNow(tmp.path(), 2, {{"v", "new"}}, new_t.views()).ok());
  const std::string newest = tmp.path() + "/step_000000002";
  Apply(GetParam().damage, newest);

  std::vector<std::string> warnings;
  LoadStats stats;
  auto loaded = LoadLatest(tmp.path(), &warnings, &stats);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 1);
  EXPECT_EQ(loaded->meta["v"], "old");
  EXPECT_EQ(loaded->tensors.at("w"), old_t.values(0));
  EXPECT_EQ(stats.bytes, loaded->bytes);
  EXPECT_GT(stats.load_s, 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("step_000000002"));
  EXPECT_THAT(warnings[0], HasSubstr(GetParam().reason));

  // Loading the damaged one directly names it and what is wrong.
  Status direct = Load(newest).status();
  EXPECT_EQ(direct.code(), GetParam().damage == Damage::kDeleteManifest ? StatusCode::kNotFound
                                                                        : StatusCode::kDataLoss);
  EXPECT_THAT(direct.message(), HasSubstr("step_000000002"));
}

INSTANTIATE_TEST_SUITE_P(
    Damages, CorruptNewestTest,
    ::testing::Values(DamageCase{Damage::kFlipByte, "tensor \"w\": crc32c"},
                      DamageCase{Damage::kTruncate, "bytes, manifest.json says"},
                      DamageCase{Damage::kDeleteManifest, "no manifest.json"},
                      DamageCase{Damage::kBadManifestJson, "not a valid JSON"},
                      DamageCase{Damage::kBadShape, "tensor \"w\": nbytes 64 != 4 * product"},
                      DamageCase{Damage::kEditMeta, "meta does not match its meta_crc32c"}));

TEST(CheckpointTest, SinkLoadsInPlaceAndFallsBackIntoTheSameBuffers) {
  TempDir tmp;
  TestTensors old_t, new_t;
  old_t.Add("w", {2, 8}, 1.0f);
  old_t.Add("b", {3}, 5.0f);
  new_t.Add("w", {2, 8}, 2.0f);
  new_t.Add("b", {3}, 6.0f);
  ASSERT_TRUE(SaveNow(tmp.path(), 1, {}, old_t.views()).ok());
  ASSERT_TRUE(SaveNow(tmp.path(), 2, {}, new_t.views()).ok());
  std::vector<float> arena(16, 0.0f);
  TensorSink sink = [&](const std::string& name,
                        const std::vector<int64_t>& shape) -> StatusOr<float*> {
    if (name != "w") return static_cast<float*>(nullptr);  // keep "b" in the map
    if (shape != std::vector<int64_t>{2, 8}) return InvalidArgumentError("w: wrong shape");
    return arena.data();
  };

  auto loaded = LoadLatest(tmp.path(), sink, nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 2);
  EXPECT_EQ(arena, new_t.values(0));
  EXPECT_FALSE(loaded->has("w"));
  EXPECT_EQ(loaded->tensors.at("b"), new_t.values(1));
  EXPECT_THAT(loaded->names, ElementsAre("w", "b"));
  EXPECT_EQ(loaded->shape("w"), (std::vector<int64_t>{2, 8}));

  // Corrupt newest: the fallback overwrites the buffer the skipped one wrote into.
  Apply(Damage::kFlipByte, tmp.path() + "/step_000000002");
  std::vector<std::string> warnings;
  loaded = LoadLatest(tmp.path(), sink, &warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 1);
  EXPECT_EQ(arena, old_t.values(0));
  EXPECT_EQ(warnings.size(), 1u);

  // A sink's refusal is the caller's problem, not a reason to fall back.
  TestTensors wrong;
  wrong.Add("w", {4, 4}, 0.0f);
  ASSERT_TRUE(SaveNow(tmp.path(), 3, {}, wrong.views()).ok());
  Status s = LoadLatest(tmp.path(), sink, nullptr).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("step_000000003"));
  EXPECT_THAT(s.message(), HasSubstr("wrong shape"));
}

// Big enough (20 MB) that Load() reads on several threads where the machine has them.
TEST(CheckpointTest, LargeCheckpointRoundTripsAndNamesTheCorruptTensor) {
  TempDir tmp;
  TestTensors t;
  for (int k = 0; k < 5; ++k) t.Add("t" + std::to_string(k), {1024, 1024}, 1000.0f * k);
  ASSERT_TRUE(SaveNow(tmp.path(), 1, {}, t.views()).ok());
  const std::string ckpt = tmp.path() + "/step_000000001";
  auto loaded = Load(ckpt);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  for (int k = 0; k < 5; ++k) EXPECT_EQ(loaded->tensors.at("t" + std::to_string(k)), t.values(k));

  const auto m = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  std::string bin = ReadFile(ckpt + "/tensors.bin");
  bin[m["tensors"][3]["offset"].get<int64_t>() + 123456] ^= 1;
  WriteFile(ckpt + "/tensors.bin", bin);
  Status s = Load(ckpt).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("tensor \"t3\": crc32c"));
}

TEST(CheckpointTest, AllCorruptIsAClearError) {
  TempDir tmp;
  EXPECT_EQ(LoadLatest(tmp.path() + "/absent", nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadLatest(tmp.path(), nullptr).status().code(), StatusCode::kNotFound);

  TestTensors t;
  t.Add("w", {16}, 1.0f);
  ASSERT_TRUE(SaveNow(tmp.path(), 1, {}, t.views()).ok());
  ASSERT_TRUE(SaveNow(tmp.path(), 2, {}, t.views()).ok());
  Apply(Damage::kFlipByte, tmp.path() + "/step_000000001");
  Apply(Damage::kTruncate, tmp.path() + "/step_000000002");
  std::vector<std::string> warnings;
  Status s = LoadLatest(tmp.path(), &warnings).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("no valid checkpoint"));
  EXPECT_THAT(s.message(), HasSubstr("step_000000001"));
  EXPECT_THAT(s.message(), HasSubstr("step_000000002"));
  EXPECT_EQ(warnings.size(), 2u);
}

TEST(CheckpointTest, SavingAnExistingStepReplacesIt) {
  TempDir tmp;
  TestTensors a, b;
  a.Add("w", {8}, 1.0f);
  b.Add("w", {8}, 2.0f);
  b.Add("extra", {2}, 3.0f);
  ASSERT_TRUE(SaveNow(tmp.path(), 3, {{"v", 1}}, a.views()).ok());
  ASSERT_TRUE(SaveNow(tmp.path(), 3, {{"v", 2}}, b.views()).ok());
  auto loaded = LoadLatest(tmp.path(), nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->meta["v"], 2);
  EXPECT_EQ(loaded->tensors.at("w"), b.values(0));
  EXPECT_EQ(loaded->tensors.at("extra"), b.values(1));
  EXPECT_THAT(Entries(tmp.path()), ElementsAre("step_000000003"));  // nothing left aside
}

TEST(CheckpointTest, KeepLastPrunesTheOldestAndNothingForeign) {
  TempDir tmp;
  fs::create_directories(tmp.path() + "/step_abc");
  fs::create_directories(tmp.path() + "/step_000000001.bak");
  WriteFile(tmp.path() + "/notes.txt", "mine");
  TestTensors t;
  t.Add("w", {4}, 1.0f);
  auto ckpt = AsyncCheckpointer::Create(tmp.path(), {.keep_last = 2});
  ASSERT_TRUE(ckpt.ok());
  for (int step = 1; step <= 5; ++step) {
    ASSERT_TRUE((*ckpt)->Save(step, {}, t.views()).ok());
    ASSERT_TRUE((*ckpt)->Wait().ok());
  }
  EXPECT_THAT(Entries(tmp.path()), ElementsAre("notes.txt", "step_000000001.bak", "step_000000004",
                                               "step_000000005", "step_abc"));
  ASSERT_EQ((*ckpt)->completed().size(), 5u);

  // The checkpoint just written survives even when newer steps exist (a run resumed
  // from an older checkpoint): it stays with the newest keep_last - 1 others.
  ASSERT_TRUE((*ckpt)->Save(3, {}, t.views()).ok());
  ASSERT_TRUE((*ckpt)->Close().ok());
  EXPECT_THAT(ListComplete(tmp.path()),
              ElementsAre(tmp.path() + "/step_000000005", tmp.path() + "/step_000000003"));
}

}  // namespace
}  // namespace hpod::train::ckpt
