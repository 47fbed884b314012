// The goodput ledger as hpod-train writes it: the writer's lines under a fake
// clock, the path rules, a ledger that cannot be written, and whole ci-model
// runs (a fresh one and a resumed one) read back through goodput::Summarize.
#include "hpod/train/trainer/goodput_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/base/file_util.h"
#include "hpod/train/trainer/trainer.h"

namespace hpod::train {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/hpod_goodput_test.XXXXXX";
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

std::vector<nlohmann::json> Lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The environment the ledger reads, cleared for the test and put back after.
class GoodputEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }
  static constexpr const char* kVars[] = {"HPOD_GOODPUT_FILE", "SLURM_JOB_ID",
                                          "SLURM_RESTART_COUNT", "HPOD_AUTO_RESUME_ATTEMPT"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

using GoodputPathTest = GoodputEnvTest;

TEST_F(GoodputPathTest, FlagThenEnvThenCheckpointDir) {
  TrainOptions o;
  EXPECT_EQ(GoodputLedgerPath(o), "");
  o.checkpoint_dir = "/ck";
  EXPECT_EQ(GoodputLedgerPath(o), "/ck/goodput.jsonl");
  setenv("HPOD_GOODPUT_FILE", "", 1);  // empty: as if unset
  EXPECT_EQ(GoodputLedgerPath(o), "/ck/goodput.jsonl");
  setenv("HPOD_GOODPUT_FILE", "/env/g.jsonl", 1);
  EXPECT_EQ(GoodputLedgerPath(o), "/env/g.jsonl");
  o.goodput_file = "/flag/g.jsonl";
  EXPECT_EQ(GoodputLedgerPath(o), "/flag/g.jsonl");
  o.goodput_file = "none";
  EXPECT_EQ(GoodputLedgerPath(o), "");
}

TEST_F(GoodputPathTest, StartFieldsFromSlurmAndAutoResume) {
  EXPECT_EQ(GoodputStartFromEnv().job_id, "");
  setenv("SLURM_JOB_ID", "12", 1);
  setenv("SLURM_RESTART_COUNT", "2", 1);
  setenv("HPOD_AUTO_RESUME_ATTEMPT", "3", 1);
  GoodputStart s = GoodputStartFromEnv();
  EXPECT_EQ(s.job_id, "12");
  EXPECT_EQ(s.restart, 2);
  EXPECT_EQ(s.attempt, 3);
}

TEST(GoodputWriterTest, WritesOneLinePerEventWithMillisecondTimes) {
  TempDir tmp;
  FakeClock clock(std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123)));
  std::FILE* null = std::fopen("/dev/null", "w");
  auto w = GoodputWriter::Open(tmp / "g.jsonl", clock, null);
  ASSERT_NE(w, nullptr);
  w->Step(1, 1);  // before Start: not a ledger event
  GoodputStart s;
  s.process_start = 1699999990.5;
  s.job_id = "j\"1";
  s.world_size = 3;
  s.resumed_step = 40;
  s.checkpoint_load_s = 0.05;
  s.rendezvous_s = 0.3;
  w->Start(s);
  clock.AdvanceTime(std::chrono::milliseconds(250));
  w->Step(41, 0.125);
  w->Checkpoint(41, 0.02);
  w->End(41, GoodputEnd::kInterrupted);
  w->End(41, GoodputEnd::kFailed);  // once only
  std::fclose(null);

  auto lines = Lines(tmp / "g.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["event"], "start");
  EXPECT_DOUBLE_EQ(lines[0]["time"].get<double>(), 1700000000.123);
  EXPECT_DOUBLE_EQ(lines[0]["process_start"].get<double>(), 1699999990.5);
  EXPECT_EQ(lines[0]["job_id"], "j\"1");
  EXPECT_EQ(lines[0]["restart"], 0);
  EXPECT_EQ(lines[0]["world_size"], 3);
  EXPECT_EQ(lines[0]["resumed_step"], 40);
  EXPECT_DOUBLE_EQ(lines[0]["rendezvous_s"].get<double>(), 0.3);
  EXPECT_EQ(lines[1], nlohmann::json::parse(
                          R"({"event":"step","time":1700000000.373,"step":41,"step_s":0.125})"));
  EXPECT_EQ(lines[2]["event"], "checkpoint");
  EXPECT_DOUBLE_EQ(lines[2]["save_s"].get<double>(), 0.02);
  EXPECT_EQ(lines[3]["event"], "end");
  EXPECT_EQ(lines[3]["status"], "interrupted");

  auto sum = w->Summarize();
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->final_step, 41);
  EXPECT_EQ(sum->attempts[0].status, "interrupted");
}

TEST(GoodputWriterTest, ATornTailGetsItsOwnLine) {
  TempDir tmp;
  { std::ofstream(tmp / "g.jsonl") << R"({"event":"step","ti)"; }
  FakeClock clock;
  auto w = GoodputWriter::Open(tmp / "g.jsonl", clock, stderr);
  ASSERT_NE(w, nullptr);
  w->Start({});
  w.reset();
  auto text = ReadFile(tmp / "g.jsonl");
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, StartsWith("{\"event\":\"step\",\"ti\n{\"event\":\"start\""));
  auto sum = goodput::Summarize(*text);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->attempts.size(), 1u);
  EXPECT_EQ(sum->skipped_lines, 1);
}

TEST(GoodputWriterTest, AnUnwritableLedgerIsAWarningNotAFailure) {
  TempDir tmp;
  FakeClock clock;
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* err = open_memstream(&buf, &len);
  auto w = GoodputWriter::Open(tmp / "no/such/dir/g.jsonl", clock, err);
  std::fclose(err);
  EXPECT_EQ(w, nullptr);
  const std::string text(buf, len);
  std::free(buf);
  EXPECT_THAT(text, HasSubstr("warning: goodput ledger"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

// Trains the ci model on synthetic data for `steps` with these flags added.
int Train(int64_t steps, std::vector<std::string> flags) {
  std::vector<std::string> args = {
      "hpod-train",   "--model", "ci",         "--data", "synthetic",   "--seq-len",          "16",
      "--batch-size", "2",       "--progress", "none",   "--max-steps", std::to_string(steps)};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  auto parsed = ParseArgs(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok()) return -1;
  Trainer t(std::move(parsed->options));
  std::FILE* null = std::fopen("/dev/null", "w");
  const int rc = t.Run(null, null);
  std::fclose(null);
  return rc;
}

// Resumes from (and saves every 2 steps to) `ckpt`.
int TrainIn(const std::string& ckpt, int64_t steps, const std::string& summary) {
  return Train(steps,
               {"--save-interval", "2", "--checkpoint-dir", ckpt, "--summary-json", summary});
}

using GoodputRunTest = GoodputEnvTest;

TEST_F(GoodputRunTest, ARunAndItsResumeWriteTwoAttempts) {
  TempDir tmp;
  const std::string ledger = tmp / "ck/goodput.jsonl";
  ASSERT_EQ(TrainIn(tmp / "ck", 5, tmp / "s1.json"), 0);
  auto lines = Lines(ledger);
  ASSERT_EQ(lines.size(), 1u + 5 + 3 + 1);  // start, 5 steps, saves at 2, 4 and 5, end
  EXPECT_EQ(lines[0]["event"], "start");
  EXPECT_EQ(lines[0]["resumed_step"], 0);
  int64_t steps = 0, checkpoints = 0;
  for (const auto& l : lines) {
    if (l["event"] == "step") {
      EXPECT_EQ(l["step"], ++steps);
    }
    if (l["event"] == "checkpoint") checkpoints += 1;
  }
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(checkpoints, 3);
  EXPECT_EQ(lines.back()["event"], "end");
  EXPECT_EQ(lines.back()["status"], "completed");
  auto s1 = nlohmann::json::parse(*ReadFile(tmp / "s1.json"));
  EXPECT_EQ(s1["goodput"]["final_step"], 5);
  EXPECT_EQ(s1["goodput"]["attempts"].size(), 1u);
  EXPECT_GT(s1["goodput"]["goodput"].get<double>(), 0);

  ASSERT_EQ(TrainIn(tmp / "ck", 8, tmp / "s2.json"), 0);
  auto s2 = nlohmann::json::parse(*ReadFile(tmp / "s2.json"));
  const auto& g = s2["goodput"];
  ASSERT_EQ(g["attempts"].size(), 2u);
  EXPECT_EQ(g["attempts"][1]["resumed_step"], 5);
  EXPECT_EQ(g["attempts"][1]["steps"], 3);
  EXPECT_EQ(g["steps_rerun"], 0);  // the final save kept every step
  EXPECT_EQ(g["useful_steps"], 8);
  EXPECT_EQ(g["final_step"], 8);
  EXPECT_GE(g["gaps"][0]["lost_s"].get<double>(), 0);
  EXPECT_LE(g["goodput"].get<double>(), 1);
}

TEST_F(GoodputRunTest, NoneWritesNoLedgerAndNoSummaryKey) {
  TempDir tmp;
  setenv("HPOD_GOODPUT_FILE", (tmp / "env.jsonl").c_str(), 1);  // the flag wins
  ASSERT_EQ(Train(1, {"--goodput-file", "none", "--summary-json", tmp / "s.json"}), 0);
  auto s = nlohmann::json::parse(*ReadFile(tmp / "s.json"));
  EXPECT_FALSE(s.contains("goodput"));
  EXPECT_FALSE(fs::exists(tmp / "env.jsonl"));
  // Without the flag the environment's ledger is written.
  ASSERT_EQ(Train(1, {"--summary-json", tmp / "s.json"}), 0);
  EXPECT_EQ(Lines(tmp / "env.jsonl").size(), 3u);  // start, step, end
  s = nlohmann::json::parse(*ReadFile(tmp / "s.json"));
  EXPECT_EQ(s["goodput"]["final_step"], 1);
}

}  // namespace
}  // namespace hpod::train
