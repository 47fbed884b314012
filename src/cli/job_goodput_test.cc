#include "hpod/cli/job_goodput.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hpod::cli {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
using ::testing::Not;

ordered_json Sample() {
  return ordered_json::parse(R"({
    "JobId": "12", "Finished": true, "Attempts": 2,
    "Events": [{"Event": "started", "Time": 1700000000.0, "Attempt": 0}],
    "Failures": [{"RecoveryId": "rcv-abcdefghijkl", "Hostname": "ip-10-77-1-12",
                  "Action": "Replace", "DetectionSeconds": 1.25, "ReplacementSeconds": 2.5,
                  "RestartSeconds": 7.0, "RendezvousSeconds": 0.06,
                  "CheckpointLoadSeconds": 0.01, "FirstStepSeconds": 0.9, "StepsRerun": 5}],
    "Goodput": {"wall_s": 60.0, "useful_step_s": 48.0, "goodput": 0.8, "steps_rerun": 5,
                "final_step": 120}})");
}

TEST(FormatJobGoodputTest, TableHasTheSummaryAndOneRowPerFailure) {
  std::string t = FormatJobGoodput(Sample(), OutputFormat::kTable);
  EXPECT_THAT(t, HasSubstr("12: 2 attempt(s), finished"));
  EXPECT_THAT(t, HasSubstr("80.0 % (useful step time 48.0 s of 60.0 s wall), 5 step(s) re-run, "
                           "final step 120"));
  EXPECT_THAT(t, HasSubstr("Detection"));
  EXPECT_THAT(t, HasSubstr("ip-10-77-1-12"));
  EXPECT_THAT(t, HasSubstr("1.25 s"));
  EXPECT_THAT(t, HasSubstr("rcv-abcdefghijkl"));
}

TEST(FormatJobGoodputTest, TextIsTabSeparatedAndMissingFiguresAreDashes) {
  ordered_json r = Sample();
  r["Failures"][0].erase("RestartSeconds");
  std::string t = FormatJobGoodput(r, OutputFormat::kText);
  EXPECT_THAT(t, HasSubstr("FAILURE\tip-10-77-1-12\tReplace\t1.25 s\t2.50 s\t-\t"));
  r.erase("Goodput");
  r["Failures"] = ordered_json::array();
  t = FormatJobGoodput(r, OutputFormat::kText);
  EXPECT_THAT(t, HasSubstr(r.value("Finished", false) ? "no ledger: the program wrote none"
                                                      : "no ledger yet"));
  EXPECT_THAT(t, HasSubstr("Failures\tnone"));
  r["Finished"] = !r.value("Finished", false);
  t = FormatJobGoodput(r, OutputFormat::kText);
  EXPECT_THAT(t, HasSubstr(r.value("Finished", false) ? "no ledger: the program wrote none"
                                                      : "no ledger yet"));
  EXPECT_THAT(FormatJobGoodput(r, OutputFormat::kJson), Not(HasSubstr("Goodput")));
}

}  // namespace
}  // namespace hpod::cli
