#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hpod/store/backup.h"
#include "hpod/store/store.h"

namespace hpod::store {
namespace {

namespace fs = std::filesystem;

ClusterRecord Cluster(const std::string& id, const std::string& name) {
  ClusterRecord c;
  c.id = id;
  c.name = name;
  c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + id;
  c.status = "InService";
  c.creation_time = 10;
  return c;
}

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hpod-backup-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "state.db").string();
    auto store = OpenSqliteStore({path_});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    ASSERT_TRUE(
        store_->Write([](WriteTx& tx) { return tx.PutCluster(Cluster("c1", "demo")); }).ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  // The cluster names a store at `path` holds.
  static std::vector<std::string> Names(const std::string& path) {
    auto copy = OpenSqliteStore({path});
    EXPECT_TRUE(copy.ok()) << copy.status().ToString();
    if (!copy.ok()) return {};
    std::vector<std::string> names;
    EXPECT_TRUE((*copy)
                    ->Read([&](ReadTx& tx) {
                      HPOD_ASSIGN_OR_RETURN(auto all, tx.ListClusters({}));
                      for (const auto& c : all) names.push_back(c.name);
                      return OkStatus();
                    })
                    .ok());
    return names;
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(BackupTest, CopiesCommittedStateWhileAWriteIsOpen) {
  std::string dest = (dir_ / "backup.db").string();
  StatusOr<BackupResult> result = InternalError("not run");
  // The store's writer holds its write lock (BEGIN IMMEDIATE) with an
  // uncommitted cluster while the backup runs on its own connections.
  ASSERT_TRUE(store_
                  ->Write([&](WriteTx& tx) {
                    HPOD_RETURN_IF_ERROR(tx.PutCluster(Cluster("c2", "uncommitted")));
                    result = BackupSqliteStore(path_, dest, 2000);
                    return OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->schema_version, store_->SchemaVersion());
  EXPECT_EQ(result->bytes, static_cast<int64_t>(fs::file_size(dest)));
  struct stat st;
  ASSERT_EQ(::stat(dest.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // One self-contained file: no journal beside it, nothing partial left.
  EXPECT_FALSE(fs::exists(dest + "-wal"));
  EXPECT_FALSE(fs::exists(dest + ".partial"));
  EXPECT_EQ(Names(dest), std::vector<std::string>{"demo"});
  // The live store kept serving, and has both.
  EXPECT_EQ(Names(path_).size(), 2u);
}

TEST_F(BackupTest, RefusesToOverwrite) {
  std::string dest = (dir_ / "backup.db").string();
  ASSERT_TRUE(BackupSqliteStore(path_, dest).ok());
  auto again = BackupSqliteStore(path_, dest);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("refusing to overwrite"), std::string::npos);
  EXPECT_EQ(Names(dest), std::vector<std::string>{"demo"});
}

TEST_F(BackupTest, MissingStoreCreatesNothing) {
  std::string dest = (dir_ / "backup.db").string();
  auto r = BackupSqliteStore((dir_ / "absent.db").string(), dest);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "absent.db"));
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_FALSE(fs::exists(dest + ".partial"));
}

TEST_F(BackupTest, RestorePutsABackupInPlaceOfAMissingStore) {
  std::string backup = (dir_ / "backup.db").string();
  ASSERT_TRUE(BackupSqliteStore(path_, backup).ok());
  std::string restored = (dir_ / "fresh" / "state.db").string();
  fs::create_directories(dir_ / "fresh");
  auto r = RestoreSqliteStore(backup, restored);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->schema_version, store_->SchemaVersion());
  struct stat st;
  ASSERT_EQ(::stat(restored.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Names(restored), std::vector<std::string>{"demo"});
}

TEST_F(BackupTest, RestoreNeverOverwritesAStore) {
  std::string backup = (dir_ / "backup.db").string();
  ASSERT_TRUE(BackupSqliteStore(path_, backup).ok());
  // The live store, and an old store's WAL left beside a moved-away state.db.
  auto r = RestoreSqliteStore(backup, path_);
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  fs::create_directories(dir_ / "old");
  std::ofstream((dir_ / "old" / "state.db-wal").string()) << "x";
  r = RestoreSqliteStore(backup, (dir_ / "old" / "state.db").string());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find("state.db-wal exists"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "old" / "state.db"));
}

TEST_F(BackupTest, RestoreRefusesWhatIsNotAnHpodStore) {
  std::string dest = (dir_ / "new.db").string();
  std::string text = (dir_ / "notes.txt").string();
  std::ofstream(text) << "not a database, but long enough to be read as one's header......";
  auto r = RestoreSqliteStore(text, dest);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("is not an hpod store"), std::string::npos);
  // Another program's SQLite database.
  std::string other = (dir_ / "other.db").string();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA user_version=3", nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  r = RestoreSqliteStore(other, dest);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_EQ(RestoreSqliteStore((dir_ / "absent.db").string(), dest).status().code(),
            StatusCode::kNotFound);
  // A newer hpodd's store.
  std::string newer = (dir_ / "newer.db").string();
  ASSERT_TRUE(BackupSqliteStore(path_, newer).ok());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=100000", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  r = RestoreSqliteStore(newer, dest);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_FALSE(fs::exists(dest));
}

}  // namespace
}  // namespace hpod::store
