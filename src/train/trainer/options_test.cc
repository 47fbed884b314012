#include "hpod/train/trainer/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hpod/train/trainer/plan.h"

namespace hpod::train {
namespace {

using ::testing::HasSubstr;

StatusOr<ParsedArgs> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hpod-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseArgs(static_cast<int>(argv.size()), argv.data());
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("hpod-options-test-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path;
}

TEST(OptionsTest, FlagsAndDefaults) {
  auto p = Parse({"--data", "a.bin,b.bin", "--save-interval", "50", "--no-resume", "--model", "ci",
                  "--lr", "1e-3"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const auto& o = p->options;
  EXPECT_EQ(o.data, (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(o.save_interval, 50);
  EXPECT_FALSE(o.resume);
  EXPECT_EQ(o.model_config.dim, 64);
  EXPECT_DOUBLE_EQ(o.min_lr, 1e-4);  // lr / 10 when not given
  EXPECT_EQ(o.batch_size, 8);
}

TEST(OptionsTest, ConfigFileThenFlagsOverride) {
  auto path = WriteTemp("train.json", R"({
    "model": {"dim": 32, "n_layers": 1, "n_heads": 2, "vocab_size": 100,
              "hidden_dim": 64, "max_seq_len": 64},
    "data": ["x.bin"], "seq_len": 16, "save_interval": 10, "lr": 0.01})");
  auto p = Parse({"--config", path, "--save-interval", "20"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->options.model_config.dim, 32);
  EXPECT_EQ(p->options.model_config.vocab_size, 100);
  EXPECT_EQ(p->options.seq_len, 16);
  EXPECT_EQ(p->options.save_interval, 20);  // the flag wins
  EXPECT_DOUBLE_EQ(p->options.lr, 0.01);
  // The options round-trip through their JSON form (what checkpoints record).
  TrainOptions again;
  ASSERT_TRUE(ApplyJson(OptionsToJson(p->options), "again", &again).ok());
  ASSERT_TRUE(Validate(&again).ok());
  EXPECT_EQ(OptionsToJson(again), OptionsToJson(p->options));
  std::filesystem::remove(path);
}

// Job logs get a progress line at most every --progress-interval seconds (10 by
// default, as before the flag existed).
TEST(OptionsTest, ProgressInterval) {
  auto p = Parse({"--data", "synthetic"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->options.progress_interval_s, 10);
  p = Parse({"--data", "synthetic", "--progress-interval", "1.5"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->options.progress_interval_s, 1.5);
}

TEST(OptionsTest, ErrorsAreOneLineNamingTheField) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  auto bad_field = WriteTemp("bad-field.json", R"({"save_intervall": 5})");
  auto bad_type = WriteTemp("bad-type.json", R"({"max_steps": "ten"})");
  auto bad_model = WriteTemp("bad-model.json", R"({"model": {"dim": 64, "n_heads": 5}})");
  auto not_json = WriteTemp("not.json", "{");
  auto wraps = WriteTemp("wraps.json", R"({"threads": 4294967297})");
  std::vector<Case> cases = {
      {{"--data", "synthetic", "--seq-len", "0"}, "--seq-len"},
      {{"--data", "synthetic", "--matmul", "mkl"}, "--matmul"},
      {{"--data", "synthetic", "--progress", "fancy"}, "--progress"},
      {{"--data", "synthetic", "--progress-interval", "-1"}, "--progress-interval"},
      {{"--data", "synthetic", "--beta2", "1.5"}, "--beta2"},
      {{"--data", "synthetic", "--lr", "0"}, "--lr"},
      {{"--data", "synthetic", "--lr", "1e-3", "--min-lr", "1"}, "--min-lr"},
      {{"--data", "synthetic", "--model", "ci", "--seq-len", "1000"}, "max_seq_len"},
      {{"--data", "synthetic", "--model", "70b"}, "preset"},
      {{"--model", "ci"}, "--data"},
      {{"--data", "synthetic,x.bin"}, "synthetic"},
      {{"--data", "synthetic", "--no-such-flag"}, "--no-such-flag"},
      {{"--data", "synthetic", "--max-steps", "many"}, "--max-steps"},
      {{"--config", bad_field, "--data", "synthetic"}, "'save_intervall'"},
      {{"--config", bad_type, "--data", "synthetic"}, "'max_steps'"},
      {{"--config", bad_model, "--data", "synthetic"}, "'n_heads'"},
      {{"--config", not_json}, "not valid JSON"},
      {{"--config", wraps, "--data", "synthetic"}, "'threads'"},
      {{"--config", "/nonexistent/train.json"}, "/nonexistent/train.json"},
  };
  for (const auto& c : cases) {
    auto p = Parse(c.args);
    ASSERT_FALSE(p.ok()) << c.args.back();
    EXPECT_THAT(p.status().message(), HasSubstr(c.needle)) << c.args.back();
    EXPECT_EQ(p.status().message().find('\n'), std::string::npos) << p.status().message();
  }
  for (const auto& f : {bad_field, bad_type, bad_model, not_json, wraps})
    std::filesystem::remove(f);
}

TEST(OptionsTest, HelpListsEveryOption) {
  auto p = Parse({"--help"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->help);
  TrainOptions o;
  const nlohmann::json all = OptionsToJson(o);  // items() does not extend its lifetime
  for (const auto& [key, value] : all.items()) {
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    EXPECT_THAT(p->help_text, HasSubstr(flag));
  }
}

TEST(PlanTest, FifteenMillionShape) {
  auto p = Parse({"--data", "synthetic", "--checkpoint-dir", "/ckpt", "--save-interval", "100"});
  ASSERT_TRUE(p.ok());
  std::string plan = FormatPlan(p->options, p->options.model_config);
  EXPECT_THAT(plan, HasSubstr("params     7.16M (7155360)"));
  EXPECT_THAT(plan, HasSubstr("45.6 MFLOP/token"));
  EXPECT_THAT(plan, HasSubstr("93.3 GFLOP/step"));  // 2048 tokens
  EXPECT_THAT(plan, HasSubstr("every 100 steps"));
  EXPECT_THAT(plan, HasSubstr("114.5 MB weights+grads+AdamW"));
  // Every value lands in its own slot (a format string once took one too few).
  auto q = Parse({"--data",      "synthetic", "--lr-decay-steps", "77",  "--beta1",        "0.8",
                  "--beta2",     "0.99",      "--grad-clip",      "0.5", "--weight-decay", "0.05",
                  "--max-steps", "90",        "--warmup-steps",   "3",   "--lr",           "0.002",
                  "--min-lr",    "0.0001"});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_THAT(FormatPlan(q->options, q->options.model_config),
              HasSubstr("schedule   90 steps (184.3k tokens); AdamW lr 0.002 warmup 3 then cosine "
                        "to 0.0001 at step 77, betas (0.8, 0.99), weight decay 0.05, clip 0.5\n"));
}

}  // namespace
}  // namespace hpod::train
