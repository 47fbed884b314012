// Resume across checkpoint formats: a format-1 checkpoint (named tensors, as
// hpod-train wrote before distributed training) continues exactly as the
// format-2 checkpoint of the same state does.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/ckpt/sharded.h"
#include "hpod/train/model/config.h"
#include "hpod/train/trainer/options.h"
#include "hpod/train/trainer/trainer.h"

namespace hpod::train {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/hpod_resume_test.XXXXXX";
    path_ = mkdtemp(t);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Trains the ci model on synthetic data to `steps`, resuming from `ckpt`.
int Train(const std::string& ckpt, int64_t steps, const std::string& metrics) {
  std::vector<std::string> args = {"hpod-train",
                                   "--model",
                                   "ci",
                                   "--data",
                                   "synthetic",
                                   "--seq-len",
                                   "32",
                                   "--batch-size",
                                   "4",
                                   "--max-steps",
                                   std::to_string(steps),
                                   "--lr-decay-steps",
                                   "20",
                                   "--progress",
                                   "none",
                                   "--checkpoint-dir",
                                   ckpt,
                                   "--metrics-jsonl",
                                   metrics};
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  auto parsed = ParseArgs(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  Trainer t(std::move(parsed->options));
  std::FILE* null = std::fopen("/dev/null", "w");
  const int rc = t.Run(null, null);
  std::fclose(null);
  return rc;
}

// step -> the loss line as written.
std::map<int, std::string> Losses(const std::string& path) {
  std::map<int, std::string> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    out[j["step"].get<int>()] = j["loss"].dump();
  }
  return out;
}

// Rewrites a format-2 checkpoint as format 1: HF-named weights and AdamW
// moments under PyTorch's state names, cut out of the flat arena by the
// ParamSpecs the meta lists.
void WriteFormat1(const std::string& from, const std::string& to_dir) {
  std::vector<float> p, m, v;
  auto got = ckpt::LoadSharded(
      from, [&](const ckpt::PartInfo& part, const std::string& name) -> StatusOr<float*> {
        auto& arena = name == "params" ? p : name == "exp_avg" ? m : v;
        arena.resize(std::max<size_t>(arena.size(), part.begin + part.count));
        return arena.data() + part.begin;
      });
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<ckpt::TensorView> views;
  for (const auto& s : got->meta["params"]) {
    const auto shape = s["shape"].get<std::vector<int64_t>>();
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t off = s["offset"].get<int64_t>();
    const std::string name = s["name"];
    views.push_back({name, shape, p.data() + off, numel});
    views.push_back({"optimizer.exp_avg." + name, shape, m.data() + off, numel});
    views.push_back({"optimizer.exp_avg_sq." + name, shape, v.data() + off, numel});
  }
  nlohmann::json meta = got->meta;
  meta.erase("world_size");
  meta.erase("params");
  auto c = ckpt::AsyncCheckpointer::Create(to_dir, {});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Save(got->step, meta, views).ok());
  ASSERT_TRUE((*c)->Close().ok());
}

TEST(ResumeTest, AFormat1CheckpointContinuesLikeItsFormat2Twin) {
  TempDir tmp;
  ASSERT_EQ(Train(tmp / "v2", 6, tmp / "first.jsonl"), 0);
  ASSERT_EQ(*ckpt::ReadFormatVersion(tmp / "v2/step_000000006"), 2);
  WriteFormat1(tmp / "v2/step_000000006", tmp / "v1");
  ASSERT_EQ(*ckpt::ReadFormatVersion(tmp / "v1/step_000000006"), 1);

  ASSERT_EQ(Train(tmp / "v2", 10, tmp / "from2.jsonl"), 0);
  ASSERT_EQ(Train(tmp / "v1", 10, tmp / "from1.jsonl"), 0);
  const auto from2 = Losses(tmp / "from2.jsonl");
  const auto from1 = Losses(tmp / "from1.jsonl");
  ASSERT_EQ(from2.size(), 4u);  // steps 7..10: both resumed at 6
  EXPECT_EQ(from1, from2);
  // The continued format-1 run writes format 2 from then on.
  EXPECT_EQ(*ckpt::ReadFormatVersion(tmp / "v1/step_000000010"), 2);
}

}  // namespace
}  // namespace hpod::train
