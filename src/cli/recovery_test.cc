#include "hpod/cli/recovery.h"

#include <gtest/gtest.h>

namespace hpod::cli {
namespace {

using nlohmann::ordered_json;

ordered_json Sample() {
  return ordered_json::parse(R"({
    "RecoveryId": "rcv-abcdefghijkl", "InstanceGroupName": "workers",
    "NodeId": "i-00000000000000001", "ReplacementNodeId": "i-00000000000000002",
    "Hostname": "ip-10-77-1-11", "PrivateIpAddress": "10.77.1.11", "Action": "Replace",
    "Source": "Instance", "Check": "instance", "Reason": "node stopped", "Automatic": true,
    "Phase": "Resumed", "Status": "Succeeded", "CreatedTime": 1700000000.0,
    "FinishedTime": 1700000004.25,
    "Timeline": [
      {"Step": "Detected", "Time": 1700000000.0, "Detail": "Instance: node stopped"},
      {"Step": "Marked", "Time": 1700000000.5, "Detail": "scontrol update"},
      {"Step": "Resumed", "Time": 1700000004.25, "Detail": "state=resume"}]})");
}

TEST(FormatRecoveryTest, TableHasEveryStepWithItsDurations) {
  std::string t = FormatRecovery(Sample(), OutputFormat::kTable);
  EXPECT_NE(t.find("rcv-abcdefghijkl"), std::string::npos) << t;
  EXPECT_NE(t.find("ip-10-77-1-11 (10.77.1.11)"), std::string::npos) << t;
  EXPECT_NE(t.find("Total        4.25 s"), std::string::npos) << t;
  EXPECT_NE(t.find("22:13:20.500"), std::string::npos) << t;  // 1700000000.5 in UTC
  // Marked: 0.50 s after detection, took 0.50; Resumed: +4.25, took 3.75.
  EXPECT_NE(t.find("0.50    0.50  scontrol update"), std::string::npos) << t;
  EXPECT_NE(t.find("4.25    3.75  state=resume"), std::string::npos) << t;
}

TEST(FormatRecoveryTest, TextIsTabSeparatedAndJsonIsTheObject) {
  std::string t = FormatRecovery(Sample(), OutputFormat::kText);
  EXPECT_NE(t.find("STEP\tMarked\t22:13:20.500\t0.50\t0.50\tscontrol update\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("Status\tSucceeded\n"), std::string::npos) << t;
  auto j = nlohmann::json::parse(FormatRecovery(Sample(), OutputFormat::kJson));
  EXPECT_EQ(j["Recovery"]["Timeline"].size(), 3u);
}

TEST(FormatRecoveryTest, TimestampsAsTheClientRendersThem) {
  ordered_json r = Sample();
  r["CreatedTime"] = "2023-11-14T22:13:20+00:00";
  r["FinishedTime"] = "2023-11-14T22:13:24.250000+00:00";
  r["Timeline"][1]["Time"] = "2023-11-14T22:13:20.500000+00:00";
  r["Timeline"][2]["Time"] = "2023-11-14T22:13:24.250000+00:00";
  r["Timeline"][0]["Time"] = "2023-11-14T22:13:20+00:00";
  EXPECT_EQ(FormatRecovery(r, OutputFormat::kTable),
            FormatRecovery(Sample(), OutputFormat::kTable));
  r["Timeline"][0]["Time"] = nullptr;  // never throws on odd input
  EXPECT_FALSE(FormatRecovery(r, OutputFormat::kTable).empty());
}

TEST(FormatRecoveryTest, ARecoveryInProgressHasNoTotal) {
  ordered_json r = Sample();
  r.erase("FinishedTime");
  r.erase("ReplacementNodeId");
  std::string t = FormatRecovery(r, OutputFormat::kTable);
  EXPECT_EQ(t.find("Total"), std::string::npos) << t;
  EXPECT_EQ(t.find("Replacement"), std::string::npos) << t;
}

}  // namespace
}  // namespace hpod::cli
