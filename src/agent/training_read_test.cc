// The bounds of reading a run (training_metrics.h): event files decoded in chunks
// (event_file.h), the read budget spent on the newest data, tags and listings
// capped while reading; opening confined beneath the root (confined_open.h); and
// a TrainingQueryRunner that stops even while a read hangs (training_queries.h).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "hpod/agent/confined_open.h"
#include "hpod/agent/event_file.h"
#include "hpod/agent/test_util.h"
#include "hpod/agent/tfevents_test_util.h"
#include "hpod/agent/training_metrics.h"
#include "hpod/agent/training_queries.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;
namespace proto = api::agentproto;
using nlohmann::json;
using testing::Event;
using testing::FileVersion;
using testing::Record;
using testing::ScalarFile;
using testing::TempDir;
using testing::Value;
using testing::WriteTestFile;

constexpr auto kWait = std::chrono::seconds(10);

TrainingMetricsOptions Under(const std::string& root) {
  TrainingMetricsOptions o;
  o.root = root;
  return o;
}

std::vector<int64_t> Steps(const std::vector<proto::TrainingPoint>& points) {
  std::vector<int64_t> out;
  for (const auto& p : points) out.push_back(p.step);
  return out;
}

std::vector<std::pair<int64_t, float>> Points(int64_t from, int64_t to) {
  std::vector<std::pair<int64_t, float>> out;
  for (int64_t s = from; s <= to; ++s) out.emplace_back(s, static_cast<float>(s) * 0.5f);
  return out;
}

// ---- event files as streams ----

TEST(EventStreamTest, ChunksOfAnySizeDecodeTheSame) {
  std::string file = FileVersion(1000);
  for (int step = 1; step <= 40; ++step) {
    file += Record(Event(1000.0 + step, step, {Value("loss", 1.0f / step), Value("lr", 0.1f)}));
  }
  file.resize(file.size() - 5);  // torn last record
  const DecodedEventFile whole = DecodeEventFile(file);
  ASSERT_EQ(whole.scalars.size(), 78u);
  for (size_t chunk : {1, 2, 3, 7, 12, 13, 16, 100}) {
    const DecodedEventFile d = DecodeEventFile(file, chunk);
    ASSERT_EQ(d.scalars.size(), whole.scalars.size()) << chunk;
    for (size_t i = 0; i < d.scalars.size(); ++i) {
      EXPECT_EQ(d.scalars[i].tag, whole.scalars[i].tag) << chunk;
      EXPECT_EQ(d.scalars[i].step, whole.scalars[i].step) << chunk;
      EXPECT_EQ(d.scalars[i].value, whole.scalars[i].value) << chunk;
    }
    EXPECT_TRUE(d.corruption.empty()) << chunk;
    EXPECT_EQ(d.first_wall_time, 1000.0);
  }
}

TEST(EventStreamTest, AsksTheSourceForBoundedChunksOnly) {
  std::string file = FileVersion(1000);
  for (int step = 1; step <= 20000; ++step) file += Record(Event(step, step, {Value("loss", 1)}));
  ASSERT_GT(file.size(), 500'000u);
  size_t pos = 0, largest_ask = 0;
  ByteSource source = [&](char* buf, size_t n) -> StatusOr<size_t> {
    largest_ask = std::max(largest_ask, n);
    const size_t take = std::min(n, file.size() - pos);
    std::memcpy(buf, file.data() + pos, take);
    pos += take;
    return take;
  };
  EventStreamOptions o;
  o.chunk_bytes = 4096;
  int64_t scalars = 0;
  auto stats =
      DecodeEventStream(source, o, [&](std::string_view, int64_t, double, float) { ++scalars; });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(scalars, 20000);
  EXPECT_LE(largest_ask, 4096u);  // never the whole file
  EXPECT_EQ(stats->bytes_read, static_cast<int64_t>(file.size()));
}

TEST(EventStreamTest, OversizedRecordsAreChecksummedAndSkipped) {
  const std::string big = Record(Event(1001, 1, {Value(std::string(200, 'x'), 1)}));
  std::string file = FileVersion(1000) + big + Record(Event(1002, 2, {Value("loss", 2)}));
  EventStreamOptions o;
  o.max_record_bytes = 100;
  o.chunk_bytes = 16;
  auto decode = [&](const std::string& data, std::vector<int64_t>* steps) {
    size_t pos = 0;
    ByteSource source = [&](char* buf, size_t n) -> StatusOr<size_t> {
      const size_t take = std::min(n, data.size() - pos);
      std::memcpy(buf, data.data() + pos, take);
      pos += take;
      return take;
    };
    return DecodeEventStream(
        source, o, [&](std::string_view, int64_t step, double, float) { steps->push_back(step); });
  };
  std::vector<int64_t> steps;
  auto stats = decode(file, &steps);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->oversized, 1);
  EXPECT_TRUE(stats->corruption.empty());
  EXPECT_EQ(steps, std::vector<int64_t>{2});
  std::string bad = file;
  bad[FileVersion(1000).size() + 100] ^= 0x10;  // inside the big record's data
  steps.clear();
  stats = decode(bad, &steps);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->corruption, "bad data checksum in the record at offset " +
                                   std::to_string(FileVersion(1000).size()));
  EXPECT_TRUE(steps.empty());
}

TEST(EventStreamTest, ResynchronisesInsideAFile) {
  std::string file = FileVersion(1000);
  std::vector<size_t> starts;
  for (int step = 1; step <= 50; ++step) {
    starts.push_back(file.size());
    file += Record(Event(1000.0 + step, step, {Value("loss", step)}));
  }
  const size_t from = starts[20] + 7;  // inside step 21's record
  size_t pos = from;
  ByteSource source = [&](char* buf, size_t n) -> StatusOr<size_t> {
    const size_t take = std::min(n, file.size() - pos);
    std::memcpy(buf, file.data() + pos, take);
    pos += take;
    return take;
  };
  EventStreamOptions o;
  o.resync = true;
  o.start_offset = static_cast<int64_t>(from);
  o.chunk_bytes = 32;
  std::vector<int64_t> steps;
  auto stats = DecodeEventStream(
      source, o, [&](std::string_view, int64_t step, double, float) { steps.push_back(step); });
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(stats->corruption.empty());
  EXPECT_EQ(stats->resync_skipped, static_cast<int64_t>(starts[21] - from));
  ASSERT_EQ(steps.size(), 29u);
  EXPECT_EQ(steps.front(), 22);
  EXPECT_EQ(steps.back(), 50);
}

// ---- the read budget goes to the newest data ----

TEST(TrainingReadTest, ARunLargerThanTheBudgetShowsItsNewestPoints) {
  TempDir root;
  // Three processes of one run; the budget holds the newest file and part of the middle.
  const std::string a = ScalarFile("loss", Points(1, 100), 1000.1);
  const std::string b = ScalarFile("loss", Points(101, 200), 1000.2);
  const std::string c = ScalarFile("loss", Points(201, 300), 1000.3);
  WriteTestFile(root / "run/events.out.tfevents.1000.h.1.0", a);
  WriteTestFile(root / "run/events.out.tfevents.1000.h.2.0", b);
  WriteTestFile(root / "run/events.out.tfevents.1000.h.3.0", c);
  TrainingMetricsOptions o = Under(root.path());
  o.max_read_bytes = static_cast<int64_t>(c.size() + b.size() / 2);
  auto m = ReadRun(o, "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->series.size(), 1u);
  const auto steps = Steps(m->series[0].points);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back(), 300);
  EXPECT_GT(steps.front(), 140);  // the older half of b and all of a were skipped
  EXPECT_LT(steps.front(), 160);
  for (size_t i = 1; i < steps.size(); ++i) ASSERT_EQ(steps[i], steps[i - 1] + 1);
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_EQ(m->warnings[0],
            "the run's event files hold " + std::to_string(a.size() + b.size() + c.size()) +
                " bytes, more than the " + std::to_string(o.max_read_bytes) +
                " bytes read per query: the newest are read (1 older files and the first " +
                std::to_string(b.size() - b.size() / 2) +
                " bytes of events.out.tfevents.1000.h.2.0 skipped)");
  // One file larger than the budget: its newest part.
  o.max_read_bytes = static_cast<int64_t>(c.size() / 4);
  m = ReadRun(o, "run", 0);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Steps(m->series[0].points).back(), 300);
  EXPECT_GT(m->series[0].points.front().step, 270);
}

TEST(TrainingReadTest, TagsAreCappedWhileReading) {
  TempDir root;
  std::string file = FileVersion(1000);
  for (int step = 1; step <= 3; ++step) {
    file += Record(
        Event(1000.0 + step, step, {Value("z", 1), Value("a", 2), Value("m", 3), Value("b", 4)}));
  }
  file += Record(Event(1004, 4, {Value("late", 5), Value("a", 6)}));
  WriteTestFile(root / "run/events.out.tfevents.1000.h.1.0", file);
  TrainingMetricsOptions o = Under(root.path());
  o.max_series = 2;
  auto m = ReadRun(o, "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->series.size(), 2u);
  EXPECT_EQ(m->series[0].tag, "a");  // the first two read, answered in tag order
  EXPECT_EQ(Steps(m->series[0].points), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(m->series[1].tag, "z");
  EXPECT_EQ(m->warnings, std::vector<std::string>{"5 tags; the first 2 read are answered"});
}

TEST(TrainingReadTest, ARunDirectoryIsListedBoundedAndItsNewestFilesRead) {
  TempDir root;
  for (int i = 0; i < 6; ++i) {
    WriteTestFile(root / ("run/events.out.tfevents." + std::to_string(1000 + i) + ".h.1.0"),
                  ScalarFile("loss", Points(10 * i + 1, 10 * i + 10), 1000 + i));
  }
  TrainingMetricsOptions o = Under(root.path());
  o.max_event_files = 2;
  auto m = ReadRun(o, "run", 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->series[0].points.front().step, 41);
  EXPECT_EQ(m->series[0].points.back().step, 60);
  EXPECT_EQ(m->warnings,
            std::vector<std::string>{"6 event files; the newest 2 (by name) are read"});
  o = Under(root.path());
  o.max_entries = 3;
  m = ReadRun(o, "run", 0);
  ASSERT_TRUE(m.ok());
  ASSERT_FALSE(m->warnings.empty());
  EXPECT_EQ(m->warnings[0], "looked at only the first 3 entries of " + root.path() + "/run");
  EXPECT_EQ(m->series[0].points.size(), 30u);
}

// ---- confinement ----

// Runs `f` on another thread; false when it did not return within kWait (a
// blocked open), in which case `unblock` is run to free it.
template <typename F>
bool ReturnsPromptly(F f, const std::function<void()>& unblock) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(kWait) == std::future_status::ready) return true;
  unblock();
  done.wait();
  return false;
}

TEST(ConfinedOpenTest, FifosAreRefusedWithoutBlocking) {
  TempDir root;
  WriteTestFile(root / "run/events.out.tfevents.1000.h.1.0", ScalarFile("loss", {{1, 1}}));
  ASSERT_EQ(::mkfifo((root / "run/pipe.jsonl").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((root / "run/events.out.tfevents.1001.h.1.0").c_str(), 0644), 0);
  // Opening a FIFO for reading blocks until a writer comes, unless O_NONBLOCK.
  auto unblock = [&] { ::close(::open((root / "run/pipe.jsonl").c_str(), O_WRONLY | O_NONBLOCK)); };
  auto dir = OpenRoot(root / "run");
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(ReturnsPromptly(
      [&] {
        auto f = OpenRegularAt(dir->get(), "pipe.jsonl");
        EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition) << f.status().ToString();
      },
      unblock));
  auto fsx = OpenRoot(root.path());
  ASSERT_TRUE(fsx.ok());
  EXPECT_TRUE(ReturnsPromptly(
      [&] {
        auto f = OpenBeneath(fsx->get(), root.path(), "run/pipe.jsonl", Symlinks::kFollowInside);
        EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << f.status().ToString();
      },
      unblock));
  EXPECT_TRUE(ReturnsPromptly(
      [&] {
        EXPECT_EQ(ReadRun(Under(root.path()), "run/pipe.jsonl", 0).status().code(),
                  StatusCode::kInvalidArgument);
        auto m = ReadRun(Under(root.path()), "run", 0);  // the FIFO among the event files
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        EXPECT_EQ(m->series.size(), 1u);
      },
      unblock));
}

TEST(ConfinedOpenTest, SymlinksStayInsideOrAreRefused) {
  TempDir top;
  const std::string real = top / "real-fsx";
  WriteTestFile(real + "/runs/a/events.out.tfevents.1000.h.1.0", ScalarFile("loss", {{1, 1}}));
  WriteTestFile(top / "outside/x.jsonl", "{\"step\":1,\"loss\":1}\n");
  // /fsx configured as a symlink to its mount, as administrators do.
  const std::string root = top / "fsx";
  fs::create_symlink(real, root);
  fs::create_symlink("runs/a", real + "/relative");         // relative, inside
  fs::create_symlink(real + "/runs/a", real + "/by-real");  // absolute, by the real path
  fs::create_symlink(root + "/runs/a", real + "/by-name");  // absolute, by root's name
  fs::create_symlink("../..", real + "/runs/a/top");        // back to root by ".."
  fs::create_symlink("../../..", real + "/runs/a/up");      // climbs out by ".."
  fs::create_symlink(top / "outside", real + "/runs/out");  // absolute, outside
  fs::create_symlink("loop2", real + "/loop1");
  fs::create_symlink("loop1", real + "/loop2");
  auto fd = OpenRoot(root);
  ASSERT_TRUE(fd.ok());
  for (const char* inside : {"relative", "by-real", "by-name", "runs/a/top/runs/a"}) {
    auto d = OpenBeneath(fd->get(), root, inside, Symlinks::kFollowInside);
    ASSERT_TRUE(d.ok()) << inside << ": " << d.status().ToString();
    EXPECT_TRUE(S_ISDIR(d->st.st_mode));
    EXPECT_EQ(d->name, "a") << inside;
  }
  for (const char* out : {"runs/a/up", "runs/a/up/outside/x.jsonl", "runs/out/x.jsonl", ".."}) {
    auto d = OpenBeneath(fd->get(), root, out, Symlinks::kFollowInside);
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument)
        << out << ": " << d.status().ToString();
  }
  EXPECT_EQ(OpenBeneath(fd->get(), root, "loop1", Symlinks::kFollowInside).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenBeneath(fd->get(), root, "relative", Symlinks::kNever).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(OpenBeneath(fd->get(), root, "runs/a", Symlinks::kNever).ok());
  EXPECT_EQ(OpenBeneath(fd->get(), root, "runs/none", Symlinks::kNever).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      OpenBeneath(fd->get(), root, "runs/a/events.out.tfevents.1000.h.1.0/x", Symlinks::kNever)
          .status()
          .code(),
      StatusCode::kNotFound);
  // The directory held is the one opened, whatever its name points to later: a
  // run directory swapped for a symlink out of root after it was opened is still
  // read as the directory it was.
  auto run = OpenBeneath(fd->get(), root, "runs/a", Symlinks::kNever);
  ASSERT_TRUE(run.ok());
  fs::rename(real + "/runs/a", real + "/runs/a-moved");
  fs::create_symlink(top / "outside", real + "/runs/a");
  auto file = OpenRegularAt(run->fd.get(), "x.jsonl");
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound) << file.status().ToString();
  EXPECT_TRUE(OpenRegularAt(run->fd.get(), "events.out.tfevents.1000.h.1.0").ok());
  EXPECT_EQ(RelativeUnder("/fsx", "/fsx/a/../b"), "b");
  EXPECT_EQ(RelativeUnder("/fsx/", "/fsx"), ".");
  EXPECT_EQ(RelativeUnder("/fsx", "a/./b/"), "a/b");
  EXPECT_EQ(RelativeUnder("/fsx", "/fsxx/a"), std::nullopt);
  EXPECT_EQ(RelativeUnder("/fsx", "a/../../etc"), std::nullopt);
}

// ---- a runner stops even while a read hangs ----

TEST(TrainingQueryRunnerTest, ShutdownAbandonsAReadThatHangs) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, release = false, returned = false;
    std::vector<json> replies;
  };
  auto st = std::make_shared<State>();
  TrainingQueryRunnerOptions ro;
  ro.shutdown_grace = std::chrono::milliseconds(200);
  // A read of a hung /fsx: it returns only when the test lets it.
  ro.answer = [st](const TrainingMetricsOptions&, const proto::TrainingQuery& q) {
    std::unique_lock<std::mutex> lock(st->mu);
    st->entered = true;
    st->cv.notify_all();
    st->cv.wait(lock, [&] { return st->release; });
    st->returned = true;
    st->cv.notify_all();
    return proto::TrainingResult{q.id, true, "", "", {}, {}, {}};
  };
  auto reply = [st](json j) {
    std::lock_guard<std::mutex> lock(st->mu);
    st->replies.push_back(std::move(j));
    st->cv.notify_all();
  };
  auto runner = std::make_unique<TrainingQueryRunner>(Under("/nonexistent"), reply, ro);
  runner->Submit(proto::TrainingQuery{"t-1", "list_runs", "", 0}.ToJson());
  runner->Submit(proto::TrainingQuery{"t-2", "list_runs", "", 0}.ToJson());
  {
    std::unique_lock<std::mutex> lock(st->mu);
    ASSERT_TRUE(st->cv.wait_for(lock, kWait, [&] { return st->entered; }));
  }
  auto let_go = [st] {
    std::lock_guard<std::mutex> lock(st->mu);
    st->release = true;
    st->cv.notify_all();
  };
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ReturnsPromptly([&] { runner->Shutdown(); }, let_go));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  runner.reset();  // the destructor's Shutdown does not wait either
  std::unique_lock<std::mutex> lock(st->mu);
  // The waiting query was answered UNAVAILABLE; the hung one not at all.
  ASSERT_EQ(st->replies.size(), 1u);
  EXPECT_EQ(st->replies[0]["id"], "t-2");
  EXPECT_EQ(st->replies[0]["code"], "UNAVAILABLE");
  lock.unlock();
  let_go();
  lock.lock();
  ASSERT_TRUE(st->cv.wait_for(lock, kWait, [&] { return st->returned; }));
  // Its answer, once the read returns, goes nowhere.
  EXPECT_FALSE(st->cv.wait_for(lock, std::chrono::milliseconds(300),
                               [&] { return st->replies.size() > 1; }));
}

TEST(TrainingQueryRunnerTest, ShutdownWaitsForAQueryThatFinishesInTime) {
  std::promise<void> entered;
  std::vector<json> replies;
  std::mutex mu;
  TrainingQueryRunnerOptions ro;
  ro.shutdown_grace = std::chrono::seconds(10);
  ro.answer = [&](const TrainingMetricsOptions&, const proto::TrainingQuery& q) {
    entered.set_value();
    return proto::TrainingResult{q.id, true, "", "", {}, {}, {}};
  };
  TrainingQueryRunner runner(
      Under("/nonexistent"),
      [&](json j) {
        std::lock_guard<std::mutex> lock(mu);
        replies.push_back(std::move(j));
      },
      ro);
  runner.Submit(proto::TrainingQuery{"t-1", "list_runs", "", 0}.ToJson());
  entered.get_future().wait();
  runner.Shutdown();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0]["id"], "t-1");
  EXPECT_EQ(replies[0]["ok"], true);
}

}  // namespace
}  // namespace hpod::agent
