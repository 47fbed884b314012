#include "hpod/agent/training_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "hpod/agent/event_file.h"
#include "hpod/agent/test_util.h"
#include "hpod/agent/tfevents_test_util.h"
#include "hpod/agent/training_queries.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;
namespace proto = api::agentproto;
using nlohmann::json;
using testing::Bytes;
using testing::Event;
using testing::FileVersion;
using testing::Fixed;
using testing::Key;
using testing::Record;
using testing::ScalarFile;
using testing::TempDir;
using testing::Value;
using testing::Varint;
using testing::WriteTestFile;

const std::string kFixture = std::string(HPOD_AGENT_TESTDATA) + "/hpod_train_run";

std::map<std::string, std::vector<proto::TrainingPoint>> ByTag(const RunMetrics& m) {
  std::map<std::string, std::vector<proto::TrainingPoint>> out;
  for (const auto& s : m.series) out[s.tag] = s.points;
  return out;
}
std::vector<int64_t> Steps(const std::vector<proto::TrainingPoint>& points) {
  std::vector<int64_t> out;
  for (const auto& p : points) out.push_back(p.step);
  return out;
}

void SetMtime(const std::string& path, double epoch_s) {
  const auto secs = static_cast<time_t>(epoch_s);
  const struct timespec t[2] = {{secs, 0}, {secs, static_cast<long>((epoch_s - secs) * 1e9)}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

TrainingMetricsOptions Under(const std::string& root) {
  TrainingMetricsOptions o;
  o.root = root;
  return o;
}

// ---- the fixture hpod-train wrote ----

TEST(TrainingMetricsTest, ReadsWhatHpodTrainWrote) {
  auto tb = ReadRun(Under(kFixture), kFixture + "/tb", 0);
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  EXPECT_TRUE(tb->warnings.empty()) << tb->warnings[0];
  auto tags = ByTag(*tb);
  // The scalars the console plots, under hpod-train's tag names.
  for (const char* tag : {"train/loss", "train/lr", "train/gradient_norm", "train/tokens_per_s",
                          "checkpoint/stall_s", "train/iteration_time", "train/parameter_norm",
                          "train/reduced_train_loss", "train/consumed_samples"}) {
    ASSERT_TRUE(tags.count(tag)) << tag;
    // Two processes: steps 1-4, then 5-6 after resuming from step 4.
    EXPECT_EQ(Steps(tags[tag]), (std::vector<int64_t>{1, 2, 3, 4, 5, 6})) << tag;
  }
  EXPECT_EQ(tags.size(), 9u);
  // The same run's JSONL says the same (doubles there, floats in the events).
  auto jsonl = ReadRun(Under(kFixture), "metrics.jsonl", 0);  // relative to root
  ASSERT_TRUE(jsonl.ok()) << jsonl.status().ToString();
  EXPECT_TRUE(jsonl->warnings.empty());
  auto keys = ByTag(*jsonl);
  std::set<std::string> names;
  for (const auto& [k, v] : keys) names.insert(k);
  EXPECT_EQ(names,
            (std::set<std::string>{"checkpoint_stall_s", "comm_s", "consumed_samples", "grad_norm",
                                   "loss", "lr", "param_norm", "step_time_s", "tokens_per_s"}));
  ASSERT_EQ(keys["loss"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(keys["loss"][i].step, static_cast<int64_t>(i + 1));
    EXPECT_EQ(keys["loss"][i].wall_time, 0);  // hpod-train's lines carry no time
    EXPECT_EQ(tags["train/loss"][i].value,
              static_cast<double>(static_cast<float>(keys["loss"][i].value)));
    EXPECT_EQ(tags["train/lr"][i].value,
              static_cast<double>(static_cast<float>(keys["lr"][i].value)));
    EXPECT_GT(tags["train/loss"][i].wall_time, 1.7e9);
    if (i > 0) {
      EXPECT_GE(tags["train/loss"][i].wall_time, tags["train/loss"][i - 1].wall_time);
    }
  }
  EXPECT_EQ(keys["lr"][0].value, 5e-05);
}

TEST(TrainingMetricsTest, ListsRunsNewestFirst) {
  auto list = ListRuns(Under(kFixture));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->runs.size(), 2u);
  std::map<std::string, proto::TrainingRun> by_kind;
  for (const auto& r : list->runs) by_kind[r.kind] = r;
  EXPECT_EQ(by_kind["tensorboard"].path, kFixture + "/tb");
  EXPECT_EQ(by_kind["tensorboard"].size_bytes, 1120 + 580);
  EXPECT_EQ(by_kind["jsonl"].path, kFixture + "/metrics.jsonl");
  EXPECT_EQ(by_kind["jsonl"].size_bytes,
            static_cast<int64_t>(fs::file_size(kFixture + "/metrics.jsonl")));
  EXPECT_GE(list->runs[0].last_modified, list->runs[1].last_modified);
}

// ---- event records ----

TEST(TrainingMetricsTest, TornLastRecordIsTheNormalCase) {
  const std::string whole = ScalarFile("loss", {{1, 3.0f}, {2, 2.5f}, {3, 2.0f}});
  const size_t last = whole.size() - Record(Event(1003, 3, {Value("loss", 2.0f)})).size();
  // Every cut inside the last record (a writer mid-write) reads the first two, silently.
  for (size_t cut = last; cut < whole.size(); ++cut) {
    DecodedEventFile d = DecodeEventFile(std::string_view(whole).substr(0, cut));
    EXPECT_TRUE(d.corruption.empty()) << cut;
    ASSERT_EQ(d.scalars.size(), 2u) << cut;
    EXPECT_EQ(d.scalars[1].step, 2);
    EXPECT_EQ(d.scalars[1].value, 2.5f);
    EXPECT_EQ(d.scalars[1].wall_time, 1002.0);
  }
  EXPECT_EQ(DecodeEventFile(whole).scalars.size(), 3u);
  EXPECT_EQ(DecodeEventFile(whole).first_wall_time, 1000.0);
  // And through ReadRun: no warning.
  TempDir root;
  WriteTestFile(root / "run/events.out.tfevents.1000.h.1.0", whole.substr(0, whole.size() - 3));
  auto m = ReadRun(Under(root.path()), root / "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->warnings.empty());
  EXPECT_EQ(Steps(ByTag(*m)["loss"]), (std::vector<int64_t>{1, 2}));
}

TEST(TrainingMetricsTest, CorruptRecordSkipsTheRestOfItsFileWithAWarning) {
  std::string file = ScalarFile("loss", {{1, 3.0f}, {2, 2.5f}, {3, 2.0f}});
  const size_t second =
      FileVersion(1000).size() + Record(Event(1001, 1, {Value("loss", 3)})).size();
  std::string bad_data = file;
  bad_data[second + 14] ^= 0x40;  // inside the second scalar record's Event
  DecodedEventFile d = DecodeEventFile(bad_data);
  EXPECT_EQ(d.scalars.size(), 1u);
  EXPECT_NE(
      d.corruption.find("bad data checksum in the record at offset " + std::to_string(second)),
      std::string::npos)
      << d.corruption;
  std::string bad_length = file;
  bad_length[second + 1] ^= 0x01;
  EXPECT_NE(DecodeEventFile(bad_length).corruption.find("bad length checksum"), std::string::npos);

  TempDir root;
  WriteTestFile(root / "run/events.out.tfevents.1000.h.1.0", bad_data);
  // A later file of the same run is still read.
  WriteTestFile(root / "run/events.out.tfevents.1001.h.2.0",
                ScalarFile("loss", {{4, 1.5f}}, /*created=*/1001));
  auto m = ReadRun(Under(root.path()), root / "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("events.out.tfevents.1000.h.1.0: bad data checksum"),
            std::string::npos)
      << m->warnings[0];
  EXPECT_NE(m->warnings[0].find("the rest of the file was skipped"), std::string::npos);
  EXPECT_EQ(Steps(ByTag(*m)["loss"]), (std::vector<int64_t>{1, 4}));
}

TEST(TrainingMetricsTest, UnknownFieldsAndNonScalarValuesAreSkipped) {
  std::string unknown;
  Key(unknown, 3, 2);  // file_version beside a summary
  Varint(unknown, 2);
  unknown += "xx";
  Key(unknown, 99, 0);  // a varint field from the future
  Varint(unknown, 123456789);
  Key(unknown, 98, 5);  // fixed32
  Fixed(unknown, 7, 4);
  std::string histogram;  // a Value with a histo (field 5), no simple_value
  Bytes(histogram, 1, "weights");
  Bytes(histogram, 5, "\x08\x01");
  std::string value_with_metadata = Value("lr", 0.5f);
  Bytes(value_with_metadata, 9, "meta");  // Value.metadata
  std::string file =
      FileVersion(1000) +
      Record(Event(1001, 7, {Value("loss", 1.25f), histogram, value_with_metadata}, unknown)) +
      Record(Event(1002, -1, {Value("neg", 1)}));  // int64 -1: 10-byte varint
  // A record that holds well-checksummed garbage (a group, wire type 3).
  file += Record("\x0b\x0c");
  file += Record(Event(1003, 8, {Value("loss", 1.0f)}));
  DecodedEventFile d = DecodeEventFile(file);
  EXPECT_TRUE(d.corruption.empty());
  EXPECT_EQ(d.undecodable, 1);
  ASSERT_EQ(d.scalars.size(), 4u);
  EXPECT_EQ(d.scalars[0].tag, "loss");
  EXPECT_EQ(d.scalars[0].step, 7);
  EXPECT_EQ(d.scalars[1].tag, "lr");
  EXPECT_EQ(d.scalars[1].value, 0.5f);
  EXPECT_EQ(d.scalars[2].step, -1);
  EXPECT_EQ(d.scalars[3].step, 8);
}

TEST(TrainingMetricsTest, ReRunStepsReplaceTheEarlierOnes) {
  TempDir root;
  // The first process logged steps 1-5; its last checkpoint was step 3, so the
  // second re-ran 4 and 5 (created in the same second: its first record is later).
  WriteTestFile(root / "run/events.out.tfevents.1000.h.99.0",
                ScalarFile("loss", {{1, 5}, {2, 4}, {3, 3}, {4, 2.5f}, {5, 2.4f}}, 1000.25));
  WriteTestFile(root / "run/events.out.tfevents.1000.h.100.0",
                ScalarFile("loss", {{4, 2.6f}, {5, 2.5f}, {6, 2.2f}}, 1000.5));
  auto m = ReadRun(Under(root.path()), root / "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto loss = ByTag(*m)["loss"];
  EXPECT_EQ(Steps(loss), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_FLOAT_EQ(loss[3].value, 2.6f);
  EXPECT_FLOAT_EQ(loss[4].value, 2.5f);
}

TEST(TrainingMetricsTest, NonFiniteValuesAreLeftOutWithAWarning) {
  TempDir root;
  WriteTestFile(root / "run/events.out.tfevents.1000.h.1.0",
                ScalarFile("loss", {{1, 2}, {2, NAN}, {3, INFINITY}, {4, 1}}));
  auto m = ReadRun(Under(root.path()), "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Steps(ByTag(*m)["loss"]), (std::vector<int64_t>{1, 4}));
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_EQ(m->warnings[0], "loss: 2 non-finite values left out");
}

// ---- JSONL ----

TEST(TrainingMetricsTest, JsonlLinesMalformedAndTorn) {
  TempDir root;
  WriteTestFile(root / "m.jsonl",
                "{\"step\":1,\"loss\":3.5,\"time\":1700000000.5,\"note\":\"x\",\"ok\":true}\n"
                "not json\n"
                "{\"loss\":1}\n"
                "\n"
                "{\"step\":2.0,\"loss\":3.0,\"nested\":{\"a\":1}}\n"
                "{\"step\":2.5,\"loss\":1}\n"
                "{\"step\":3,\"lo");  // being written
  auto m = ReadRun(Under(root.path()), root / "m.jsonl", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto tags = ByTag(*m);
  ASSERT_EQ(tags.size(), 1u);  // strings, booleans, objects and the time are no series
  ASSERT_EQ(Steps(tags["loss"]), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(tags["loss"][0].wall_time, 1700000000.5);
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_EQ(m->warnings[0], "3 malformed lines skipped (the first is line 2)");
}

// ---- paths ----

TEST(TrainingMetricsTest, PathsOutsideTheRootAreRefused) {
  TempDir top;
  const std::string root = top / "fsx";
  WriteTestFile(root + "/run/events.out.tfevents.1000.h.1.0", ScalarFile("loss", {{1, 1}}));
  WriteTestFile(top / "secret/events.out.tfevents.1000.h.1.0", ScalarFile("loss", {{1, 1}}));
  WriteTestFile(top / "secret/m.jsonl", "{\"step\":1,\"loss\":1}\n");
  fs::create_symlink(top / "secret", root + "/escape");
  fs::create_symlink(top / "secret/m.jsonl", root + "/escape.jsonl");
  fs::create_symlink(root + "/run", root + "/alias");  // inside: fine
  const TrainingMetricsOptions o = Under(root);
  for (const std::string& path :
       {top / "secret", root + "/../secret", std::string("../secret"), root + "/run/../../secret",
        std::string("/etc/passwd"), root + "/escape", root + "/escape.jsonl", root + "x/run",
        root + "/../nonexistent"}) {
    auto m = ReadRun(o, path, 0);
    ASSERT_FALSE(m.ok()) << path;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument)
        << path << ": " << m.status().ToString();
    EXPECT_NE(m.status().message().find("is outside " + root), std::string::npos) << path;
  }
  EXPECT_TRUE(ReadRun(o, root + "/alias", 0).ok());
  EXPECT_TRUE(ReadRun(o, root + "/run/../run", 0).ok());
  EXPECT_EQ(ReadRun(o, root + "/nope", 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadRun(o, "", 0).status().code(), StatusCode::kInvalidArgument);
  // Not a run: a directory without event files, a file of another kind.
  WriteTestFile(root + "/notes.txt", "x");
  EXPECT_EQ(ReadRun(o, root, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRun(o, root + "/notes.txt", 0).status().code(), StatusCode::kInvalidArgument);
  // An event file that is a symlink (to outside) is not read.
  fs::create_symlink(top / "secret/events.out.tfevents.1000.h.1.0",
                     root + "/run/events.out.tfevents.0999.h.2.0");
  auto m = ReadRun(o, root + "/run", 0);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(ByTag(*m)["loss"].size(), 1u);
  EXPECT_EQ(ReadRun(Under(top / "none"), "run", 0).status().code(),
            StatusCode::kFailedPrecondition);
}

// ---- ListRuns ----

TEST(TrainingMetricsTest, ListRunsWalksBoundedAndDoesNotFollowSymlinks) {
  TempDir top;
  const std::string root = top / "fsx";
  const std::string ev = "/events.out.tfevents.1000.h.1.0";
  WriteTestFile(root + "/a/tb" + ev, ScalarFile("loss", {{1, 1}}));
  WriteTestFile(root + "/a/tb/events.out.tfevents.1001.h.1.0", ScalarFile("loss", {{2, 1}}));
  WriteTestFile(root + "/b/metrics.jsonl", "{\"loss\":2,\"step\":1}\n{\"step\":2}\n");
  WriteTestFile(root + "/b/goodput.jsonl", "{\"event\":\"start\",\"time\":1}\n");  // no step
  WriteTestFile(root + "/b/torn.jsonl", "{\"step\":1");                   // no whole first line yet
  WriteTestFile(root + "/1/2/3/4/5" + ev, ScalarFile("loss", {{1, 1}}));  // depth 5: found
  WriteTestFile(root + "/1/2/3/4/5/6" + ev, ScalarFile("loss", {{1, 1}}));  // depth 6: not
  WriteTestFile(top / "outside" + ev, ScalarFile("loss", {{1, 1}}));
  fs::create_symlink(top / "outside", root + "/link");
  fs::create_symlink(root + "/a/tb" + ev, root + "/b" + ev);  // a symlinked event file
  SetMtime(root + "/a/tb" + ev, 1700000070);
  SetMtime(root + "/a/tb/events.out.tfevents.1001.h.1.0", 1700000080.5);
  SetMtime(root + "/b/metrics.jsonl", 1700000090);
  SetMtime(root + "/1/2/3/4/5" + ev, 1700000060);

  auto list = ListRuns(Under(root));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> paths;
  for (const auto& r : list->runs) paths.push_back(r.path);
  EXPECT_EQ(paths, (std::vector<std::string>{root + "/b/metrics.jsonl", root + "/a/tb",
                                             root + "/1/2/3/4/5"}));
  EXPECT_EQ(list->runs[0].kind, "jsonl");
  EXPECT_EQ(list->runs[1].kind, "tensorboard");
  EXPECT_NEAR(list->runs[1].last_modified, 1700000080.5, 1e-6);  // the newer of its files
  EXPECT_EQ(list->runs[1].size_bytes, static_cast<int64_t>(fs::file_size(root + "/a/tb" + ev) * 2));
  EXPECT_TRUE(list->warnings.empty());

  TrainingMetricsOptions few = Under(root);
  few.max_runs = 1;
  list = ListRuns(few);
  ASSERT_EQ(list->runs.size(), 1u);
  EXPECT_EQ(list->runs[0].path, root + "/b/metrics.jsonl");
  EXPECT_EQ(list->warnings, std::vector<std::string>{"3 runs found; the newest 1 are listed"});

  TrainingMetricsOptions short_walk = Under(root);
  short_walk.max_entries = 4;  // a, b, 1, link at the top; nothing below
  list = ListRuns(short_walk);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->runs.empty());
  ASSERT_EQ(list->warnings.size(), 1u);
  EXPECT_EQ(list->warnings[0].rfind("stopped after 4 entries under " + root, 0), 0u);

  EXPECT_EQ(ListRuns(Under(top / "none")).status().code(), StatusCode::kFailedPrecondition);
}

// ---- downsampling ----

TEST(TrainingMetricsTest, DownsampleKeepsFirstLastAndAnEvenStride) {
  auto points = [](int n) {
    std::vector<proto::TrainingPoint> p;
    for (int i = 0; i < n; ++i) p.push_back({i, 0, static_cast<double>(i)});
    return p;
  };
  auto p = points(10);
  Downsample(p, 4);
  EXPECT_EQ(Steps(p), (std::vector<int64_t>{0, 3, 6, 9}));
  p = points(10);
  Downsample(p, 10);
  EXPECT_EQ(p.size(), 10u);
  p = points(10);
  Downsample(p, 1);
  EXPECT_EQ(Steps(p), std::vector<int64_t>{9});
  p = points(1000);
  Downsample(p, 7);
  EXPECT_EQ(Steps(p), (std::vector<int64_t>{0, 167, 333, 500, 666, 833, 999}));
  p = points(5);
  Downsample(p, 4);
  EXPECT_EQ(Steps(p), (std::vector<int64_t>{0, 1, 3, 4}));
}

TEST(TrainingMetricsTest, ReadRunBoundsPointsPerSeriesAndPerAnswer) {
  TempDir root;
  std::string lines;
  for (int step = 1; step <= 500; ++step) {
    json line = {{"step", step}};
    for (int k = 0; k < 10; ++k) line["m" + std::to_string(k)] = step * 0.5 + k;
    lines += line.dump() + "\n";
  }
  WriteTestFile(root / "m.jsonl", lines);
  TrainingMetricsOptions o = Under(root.path());
  auto m = ReadRun(o, "m.jsonl", 100);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->series.size(), 10u);
  for (const auto& s : m->series) {
    ASSERT_EQ(s.points.size(), 100u) << s.tag;
    EXPECT_EQ(s.points.front().step, 1);
    EXPECT_EQ(s.points.back().step, 500);
  }
  EXPECT_TRUE(m->warnings.empty());
  o.max_total_points = 300;  // 10 series: 30 each
  m = ReadRun(o, "m.jsonl", 100);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->series[0].points.size(), 30u);
  EXPECT_EQ(m->series[0].points.back().step, 500);
  EXPECT_EQ(m->warnings,
            std::vector<std::string>{"at most 30 points per series (10 series, 300 points per "
                                     "answer)"});
  o.max_series = 3;
  m = ReadRun(o, "m.jsonl", 0);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->series.size(), 3u);
  EXPECT_EQ(m->series[0].tag, "m0");
  EXPECT_EQ(m->series[0].points.size(), 100u);  // 300 / 3
  EXPECT_EQ(m->warnings[0], "10 tags; the first 3 read are answered");
  EXPECT_EQ(ReadRun(o, "m.jsonl", o.max_points_limit + 1).status().code(),
            StatusCode::kInvalidArgument);
  // Over the read budget: the newest lines, so that a live plot keeps moving.
  o.max_read_bytes = 1000;
  o.max_series = 256;
  m = ReadRun(o, "m.jsonl", 0);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_EQ(m->warnings[0], "the file holds " + std::to_string(lines.size()) +
                                " bytes, more than the 1000 bytes read per query: its last 1000 "
                                "bytes are read, the older lines skipped");
  ASSERT_EQ(m->series.size(), 10u);
  const auto& newest = m->series[0].points;
  ASSERT_FALSE(newest.empty());
  EXPECT_EQ(newest.back().step, 500);
  EXPECT_GT(newest.front().step, 480);  // ~1000 bytes of ~150-byte lines
  for (size_t i = 1; i < newest.size(); ++i) EXPECT_EQ(newest[i].step, newest[i - 1].step + 1);
}

// ---- queries ----

TEST(TrainingMetricsTest, AnswersQueriesOnItsOwnThread) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> replies;
  auto reply = [&](json j) {
    std::lock_guard<std::mutex> lock(mu);
    replies.push_back(std::move(j));
    cv.notify_all();
  };
  auto wait_for = [&](size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return replies.size() >= n; });
  };
  {
    TrainingQueryRunner runner(Under(kFixture), reply);
    runner.Submit(proto::TrainingQuery{"t-1", "list_runs", "", 0}.ToJson());
    runner.Submit(proto::TrainingQuery{"t-2", "read_run", "tb", 2}.ToJson());
    runner.Submit(proto::TrainingQuery{"t-3", "read_run", "/etc", 0}.ToJson());
    runner.Submit(json{{"type", "training_query"}, {"id", "t-4"}, {"op", "rm"}});
    ASSERT_TRUE(wait_for(4));
  }
  std::map<std::string, proto::TrainingResult> by_id;
  for (const json& j : replies) {
    auto r = proto::TrainingResult::FromJson(j);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    by_id[r->id] = *r;
  }
  EXPECT_EQ(by_id["t-1"].runs.size(), 2u);
  ASSERT_TRUE(by_id["t-2"].ok);
  EXPECT_EQ(by_id["t-2"].series.size(), 9u);
  EXPECT_EQ(Steps(by_id["t-2"].series[0].points), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(by_id["t-3"].code, "INVALID_ARGUMENT");
  EXPECT_EQ(by_id["t-4"].code, "INVALID_ARGUMENT");  // malformed: answered at once
  // A full queue refuses at once.
  replies.clear();
  {
    TrainingQueryRunnerOptions refuse_all;
    refuse_all.max_queued = 0;
    TrainingQueryRunner runner(Under(kFixture), reply, refuse_all);
    runner.Submit(proto::TrainingQuery{"t-5", "list_runs", "", 0}.ToJson());
    ASSERT_TRUE(wait_for(1));
  }
  EXPECT_EQ(replies[0]["code"], "RESOURCE_EXHAUSTED");
}

}  // namespace
}  // namespace hpod::agent
