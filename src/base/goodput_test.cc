#include "hpod/base/goodput.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace hpod::goodput {
namespace {

using ::testing::HasSubstr;

std::string Start(double t, double process_start, int64_t resumed, double load_s = 0.5,
                  double rdzv_s = 0.25, int attempt = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                R"({"event":"start","time":%.3f,"process_start":%.3f,"job_id":"12","restart":0,)"
                R"("attempt":%d,"world_size":3,"resumed_step":%lld,"checkpoint_load_s":%.3f,)"
                R"("rendezvous_s":%.3f})"
                "\n",
                t, process_start, attempt, static_cast<long long>(resumed), load_s, rdzv_s);
  return buf;
}

std::string Step(double t, int64_t step, double step_s) {
  char buf[128];
  std::snprintf(buf, sizeof(buf),
                R"({"event":"step","time":%.3f,"step":%lld,"step_s":%.3f})"
                "\n",
                t, static_cast<long long>(step), step_s);
  return buf;
}

std::string End(double t, int64_t step, const char* status) {
  char buf[128];
  std::snprintf(buf, sizeof(buf),
                R"({"event":"end","time":%.3f,"step":%lld,"status":"%s"})"
                "\n",
                t, static_cast<long long>(step), status);
  return buf;
}

// Steps first+1..last, one a second from t (each 1 s of step time), so the
// arithmetic in the tests is exact in binary floating point.
std::string Steps(double t, int64_t first, int64_t last) {
  std::string out;
  for (int64_t k = first + 1; k <= last; ++k) out += Step(t + static_cast<double>(k - first), k, 1);
  return out;
}

TEST(GoodputTest, OneAttempt) {
  // Process up at 1000, ready at 1002, steps 1..4 end at 1003..1006.
  std::string ledger = Start(1002, 1000, 0) + Steps(1002, 0, 4) +
                       R"({"event":"checkpoint","time":1006.5,"step":4,"save_s":0.25})"
                       "\n" +
                       End(1008, 4, "completed");
  auto s = Summarize(ledger);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->attempts.size(), 1u);
  EXPECT_TRUE(s->gaps.empty());
  const Attempt& a = s->attempts[0];
  EXPECT_EQ(a.job_id, "12");
  EXPECT_EQ(a.world_size, 3);
  EXPECT_EQ(a.status, "completed");
  EXPECT_EQ(a.steps, 4);
  EXPECT_EQ(a.last_step, 4);
  EXPECT_DOUBLE_EQ(a.first_step_time, 1003);
  EXPECT_DOUBLE_EQ(a.last_time, 1008);
  EXPECT_EQ(a.checkpoints, 1);
  EXPECT_DOUBLE_EQ(a.checkpoint_save_s, 0.25);
  EXPECT_DOUBLE_EQ(s->wall_s, 8);
  EXPECT_DOUBLE_EQ(s->useful_step_s, 4);
  EXPECT_DOUBLE_EQ(s->goodput, 0.5);
  EXPECT_EQ(s->useful_steps, 4);
  EXPECT_EQ(s->steps_rerun, 0);
  EXPECT_EQ(s->final_step, 4);
  EXPECT_EQ(s->skipped_lines, 0);

  nlohmann::json j = ToJson(*s);
  EXPECT_EQ(j["final_step"], 4);
  EXPECT_EQ(j["goodput"], 0.5);
  EXPECT_EQ(j["attempts"][0]["status"], "completed");
  EXPECT_EQ(j["attempts"][0]["first_step_time"], 1003.0);
  EXPECT_TRUE(j["gaps"].empty());
  EXPECT_THAT(FormatText(*s), HasSubstr("goodput 50.0%"));
}

TEST(GoodputTest, TwoAttemptsWithRerunSteps) {
  // Attempt 0: up at 1000, ready 1002, steps 1..50 (end 1052), killed without
  // an end event. Attempt 1: up at 1060 (8 s with no process), ready 1064,
  // resumes from the checkpoint at step 40, so 41..50 run again; it runs
  // 41..60 (end 1084) and completes at 1085.
  std::string ledger = Start(1002, 1000, 0) + Steps(1002, 0, 50) +
                       Start(1064, 1060, 40, /*load_s=*/1.5, /*rdzv_s=*/0.5, /*attempt=*/1) +
                       Steps(1064, 40, 60) + End(1085, 60, "completed");
  auto s = Summarize(ledger);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->attempts.size(), 2u);
  ASSERT_EQ(s->gaps.size(), 1u);
  EXPECT_EQ(s->attempts[0].status, "");
  EXPECT_EQ(s->attempts[0].last_step, 50);
  EXPECT_DOUBLE_EQ(s->attempts[0].last_time, 1052);
  EXPECT_EQ(s->attempts[1].attempt, 1);
  EXPECT_EQ(s->attempts[1].resumed_step, 40);
  EXPECT_EQ(s->attempts[1].steps, 20);

  const Gap& g = s->gaps[0];
  EXPECT_DOUBLE_EQ(g.lost_s, 8);
  EXPECT_DOUBLE_EQ(g.restart_s, 4);
  EXPECT_DOUBLE_EQ(g.checkpoint_load_s, 1.5);
  EXPECT_DOUBLE_EQ(g.rendezvous_s, 0.5);
  EXPECT_DOUBLE_EQ(g.first_step_s, 5);  // 1065 - 1060
  EXPECT_EQ(g.steps_rerun, 10);
  EXPECT_DOUBLE_EQ(g.rerun_s, 10);

  EXPECT_DOUBLE_EQ(s->wall_s, 85);
  EXPECT_EQ(s->useful_steps, 60);  // 1..40 of attempt 0, 41..60 of attempt 1
  EXPECT_DOUBLE_EQ(s->useful_step_s, 60);
  EXPECT_EQ(s->steps_rerun, 10);
  EXPECT_DOUBLE_EQ(s->goodput, 60.0 / 85.0);
  EXPECT_EQ(s->final_step, 60);

  nlohmann::json j = ToJson(*s);
  EXPECT_EQ(j["gaps"][0]["steps_rerun"], 10);
  EXPECT_EQ(j["gaps"][0]["lost_s"], 8.0);
  EXPECT_TRUE(j["attempts"][0]["status"].is_null());
  const std::string text = FormatText(*s);
  EXPECT_THAT(text, HasSubstr("gap 0->1: 8.0 s without a process"));
  EXPECT_THAT(text, HasSubstr("10 steps re-run (10.0 s)"));
}

TEST(GoodputTest, FallbackToAnOlderCheckpointMakesEarlierWorkRerunToo) {
  // Attempt 1 resumes at 20 and dies at 25; attempt 2 finds the step-20
  // checkpoint bad and resumes at 10: attempt 0's 11..20 were re-run as well.
  std::string ledger = Start(2, 0, 0) + Steps(2, 0, 20) + Start(30, 28, 20) + Steps(30, 20, 25) +
                       Start(40, 38, 10) + Steps(40, 10, 30) + End(61, 30, "completed");
  auto s = Summarize(ledger);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->useful_steps, 30);
  EXPECT_EQ(s->steps_rerun, 10 + 5);
  EXPECT_EQ(s->gaps[0].steps_rerun, 0);  // by its own definition: 20 - 20
  EXPECT_EQ(s->gaps[1].steps_rerun, 15);
  EXPECT_EQ(s->final_step, 30);
}

TEST(GoodputTest, TornLastLineIsIgnored) {
  std::string ledger = Start(1002, 1000, 0) + Steps(1002, 0, 3) + R"({"event":"step","time":10)";
  auto s = Summarize(ledger);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->attempts[0].steps, 3);
  EXPECT_EQ(s->skipped_lines, 0);
  EXPECT_DOUBLE_EQ(s->wall_s, 5);
  // A complete last line without its newline still counts.
  s = Summarize(Start(1002, 1000, 0) + R"({"event":"step","time":1003,"step":1,"step_s":1})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->attempts[0].steps, 1);
}

TEST(GoodputTest, GarbageAndOrphanLinesAreSkippedAndCounted) {
  std::string ledger = std::string("not json\n") + Step(999, 1, 1) +  // before any start
                       Start(1002, 1000, 0) + "\n   \n" + "[1,2]\n" +
                       R"({"event":"step","step":1})"
                       "\n" +  // no time
                       R"({"event":"future","time":1010})"
                       "\n" +  // unknown: ignored
                       Steps(1002, 0, 2) +
                       "{\"event\":\"ste\n";  // a torn line mid-file
  auto s = Summarize(ledger);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->skipped_lines, 5);
  EXPECT_EQ(s->attempts[0].steps, 2);
  EXPECT_DOUBLE_EQ(s->attempts[0].last_time, 1010);  // the unknown event still counts as alive
}

TEST(GoodputTest, NoStartIsNotFound) {
  for (std::string ledger :
       {std::string(), std::string("\n\n"), std::string("garbage\n"), Step(1, 1, 1)}) {
    auto s = Summarize(ledger);
    ASSERT_FALSE(s.ok()) << ledger;
    EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
    EXPECT_THAT(s.status().message(), HasSubstr("no start event"));
  }
}

TEST(GoodputTest, AttemptWithoutStepsHasNoFirstStep) {
  auto s = Summarize(Start(5, 0, 0) + End(6, 0, "failed") + Start(12, 10, 0) + Steps(12, 0, 2));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->attempts[0].status, "failed");
  EXPECT_DOUBLE_EQ(s->attempts[0].first_step_time, 0);
  EXPECT_DOUBLE_EQ(s->gaps[0].lost_s, 4);
  EXPECT_DOUBLE_EQ(s->gaps[0].first_step_s, 3);
  EXPECT_TRUE(ToJson(*s)["attempts"][0]["first_step_time"].is_null());
  EXPECT_DOUBLE_EQ(s->goodput, 2.0 / 14.0);
}

}  // namespace
}  // namespace hpod::goodput
