// Database's statement cache (sqlite.h): a statement comes back reset and unbound
// for the next Prepare of its text, a second Prepare of a text in use gets a
// statement of its own, and a cached statement holds no read open.

#include "hpod/store/sqlite.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace hpod::store {
namespace {

class SqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "sqlite-test-" + std::to_string(getpid()) + ".db";
    std::filesystem::remove(path_);
    auto db = Database::Open(path_, 1000);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    ASSERT_TRUE(db_->Exec("CREATE TABLE t(k TEXT PRIMARY KEY, v INTEGER)").ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t VALUES ('a', 1), ('b', 2), ('c', 3)").ok());
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove(path_);
  }

  int64_t ValueOf(const std::string& key) {
    auto s = db_->Prepare("SELECT v FROM t WHERE k = ?");
    EXPECT_TRUE(s.ok());
    s->Bind(1, key);
    auto row = s->Step();
    EXPECT_TRUE(row.ok());
    return row.ok() && *row ? s->Int(0) : -1;
  }

  std::string path_;
  std::unique_ptr<Database> db_;
};

TEST_F(SqliteTest, ACachedStatementComesBackResetAndUnbound) {
  EXPECT_EQ(ValueOf("a"), 1);
  EXPECT_EQ(ValueOf("b"), 2);  // the same statement again, with a new binding
  {
    // Unbound: a parameter left unbound reads as NULL, which matches no key.
    auto s = db_->Prepare("SELECT v FROM t WHERE k = ?");
    ASSERT_TRUE(s.ok());
    auto row = s->Step();
    ASSERT_TRUE(row.ok());
    EXPECT_FALSE(*row);
  }
  // A statement left mid-result (one row of three read) was reset when it came
  // back: it starts over, and it held no read that would block this write.
  {
    auto s = db_->Prepare("SELECT k FROM t ORDER BY k");
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(*s->Step());
    EXPECT_EQ(s->Text(0), "a");
  }
  auto s = db_->Prepare("SELECT k FROM t ORDER BY k");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(*s->Step());
  EXPECT_EQ(s->Text(0), "a");
}

TEST_F(SqliteTest, TheSameTextTwiceAtOnceGetsTwoStatements) {
  auto outer = db_->Prepare("SELECT k, v FROM t ORDER BY k");
  ASSERT_TRUE(outer.ok());
  int rows = 0;
  while (*outer->Step()) {
    // The inner one is a statement of its own: the outer's position survives.
    auto inner = db_->Prepare("SELECT k, v FROM t ORDER BY k");
    ASSERT_TRUE(inner.ok());
    ASSERT_TRUE(*inner->Step());
    EXPECT_EQ(inner->Text(0), "a");
    ++rows;
  }
  EXPECT_EQ(rows, 3);
}

TEST_F(SqliteTest, WritesThroughCachedStatementsTakeEffect) {
  for (int i = 0; i < 3; i++) {
    auto s = db_->Prepare("UPDATE t SET v = v + 10 WHERE k = ?");
    ASSERT_TRUE(s.ok());
    s->Bind(1, std::string("c"));
    ASSERT_TRUE(s->Run().ok());
  }
  EXPECT_EQ(ValueOf("c"), 33);
}

}  // namespace
}  // namespace hpod::store
