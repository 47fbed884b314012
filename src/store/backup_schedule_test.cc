#include "hpod/store/backup_schedule.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hpod/store/store.h"

namespace hpod::store {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using std::chrono::system_clock;

// 2026-12-06T10:22:33Z
const system_clock::time_point kStart{seconds(1796552553)};

class BackupScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hpod-backup-schedule-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.store_path = (dir_ / "state.db").string();
    options_.dir = (dir_ / "backups").string();
    options_.keep = 2;
    auto store = OpenSqliteStore({options_.store_path});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  // The file names in the backup directory, sorted.
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(options_.dir)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  void Touch(const std::string& name) { std::ofstream(fs::path(options_.dir) / name) << "x"; }

  fs::path dir_;
  BackupScheduleOptions options_;
  std::unique_ptr<Store> store_;
  FakeClock clock_{kStart};
};

TEST(BackupNameTest, SortableUtcStampAndOnlyItsOwnPattern) {
  EXPECT_EQ(BackupSchedule::BackupName(kStart), "hpodd-20261206T102233Z.db");
  EXPECT_TRUE(BackupSchedule::IsBackupName("hpodd-20261206T102233Z.db"));
  for (const char* other :
       {"hpodd-20261206T102233Z.db.partial", "hpodd-20261206T102233Z.db-journal",
        "hpodd-2026-12-06.db", "hpodd-20261206X102233Z.db", "hpodd-20261206T1022330.db",
        "before-upgrade.db", "state.db", "xhpodd-20261206T102233Z.db", ""}) {
    EXPECT_FALSE(BackupSchedule::IsBackupName(other)) << other;
  }
}

TEST_F(BackupScheduleTest, WritesA0600BackupNamedByTheClockInAFreshDirectory) {
  BackupSchedule schedule(options_, clock_);
  StatusOr<ScheduledBackup> b = schedule.RunOnce();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->path, options_.dir + "/hpodd-20261206T102233Z.db");
  EXPECT_EQ(b->bytes, static_cast<int64_t>(fs::file_size(b->path)));
  EXPECT_TRUE(b->pruned.empty());
  struct stat st;
  ASSERT_EQ(::stat(options_.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(b->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A store hpodd can open.
  auto copy = OpenSqliteStore({b->path});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->SchemaVersion(), store_->SchemaVersion());
}

TEST_F(BackupScheduleTest, KeepsTheNewestAndLeavesForeignFilesAlone) {
  fs::create_directories(options_.dir);
  // An operator's own copy, and files that only look alike: never counted or deleted.
  for (const char* foreign : {"before-upgrade.db", "hpodd-2026-12-01.db", "notes.txt"}) {
    Touch(foreign);
  }
  BackupSchedule schedule(options_, clock_);
  std::vector<std::string> taken;
  for (int i = 0; i < 4; ++i) {
    StatusOr<ScheduledBackup> b = schedule.RunOnce();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    taken.push_back(fs::path(b->path).filename().string());
    EXPECT_EQ(b->pruned.size(), i < 2 ? 0u : 1u) << i;
    clock_.AdvanceTime(std::chrono::hours(6));
  }
  EXPECT_EQ(taken[0], "hpodd-20261206T102233Z.db");
  EXPECT_EQ(taken[3], "hpodd-20261207T042233Z.db");
  EXPECT_EQ(Files(), (std::vector<std::string>{"before-upgrade.db", "hpodd-2026-12-01.db", taken[2],
                                               taken[3], "notes.txt"}));
}

TEST_F(BackupScheduleTest, RemovesLeftoversOfARunCutShort) {
  fs::create_directories(options_.dir);
  Touch("hpodd-20261205T000000Z.db.partial");
  Touch("hpodd-20261205T000000Z.db.partial-journal");
  Touch("mine.db.partial");  // not the schedule's: stays
  BackupSchedule schedule(options_, clock_);
  ASSERT_TRUE(schedule.RunOnce().ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"hpodd-20261206T102233Z.db", "mine.db.partial"}));
}

TEST_F(BackupScheduleTest, AFailedRunDeletesNothingAndTheNextOneWorks) {
  BackupSchedule schedule(options_, clock_);
  ASSERT_TRUE(schedule.RunOnce().ok());
  clock_.AdvanceTime(seconds(10));
  ASSERT_TRUE(schedule.RunOnce().ok());
  const std::vector<std::string> before = Files();
  ASSERT_EQ(before.size(), 2u);

  // The same second again (a clock stepped back): refused, nothing overwritten
  // or pruned.
  clock_.AdvanceTime(-seconds(10));
  StatusOr<ScheduledBackup> again = schedule.RunOnce();
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Files(), before);

  // The store gone (the disk failed under it): an error, and the backups stay.
  clock_.AdvanceTime(seconds(30));
  fs::rename(options_.store_path, options_.store_path + ".away");
  StatusOr<ScheduledBackup> missing = schedule.RunOnce();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Files(), before);

  // Back: the next interval's run succeeds and prunes the oldest.
  fs::rename(options_.store_path + ".away", options_.store_path);
  StatusOr<ScheduledBackup> next = schedule.RunOnce();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->pruned, std::vector<std::string>{options_.dir + "/" + before[0]});
  EXPECT_EQ(Files(), (std::vector<std::string>{before[1], "hpodd-20261206T102303Z.db"}));
}

TEST_F(BackupScheduleTest, AnUnwritableDirectoryIsAnErrorNotACrash) {
  // A file where the directory should be.
  std::ofstream(options_.dir) << "x";
  BackupSchedule schedule(options_, clock_);
  EXPECT_FALSE(schedule.RunOnce().ok());
}

TEST_F(BackupScheduleTest, StartAndStopWithoutWaitingForAnInterval) {
  options_.interval = std::chrono::hours(6);
  BackupSchedule schedule(options_, clock_);
  schedule.Start();
  schedule.Stop();  // wakes the thread at once; no backup was due
  schedule.Stop();  // idempotent
  EXPECT_FALSE(fs::exists(options_.dir));

  options_.interval = seconds(0);  // off: Start starts nothing
  BackupSchedule off(options_, clock_);
  off.Start();
}

}  // namespace
}  // namespace hpod::store
