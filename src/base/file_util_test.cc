#include "hpod/base/file_util.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <vector>

namespace hpod {
namespace {

using ::testing::HasSubstr;

TEST(FileUtilTest, AtomicWriteThenRead) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hpod-file-util-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "f.txt").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  ASSERT_TRUE(WriteFileAtomic(path, std::string("new\0bytes", 9)).ok());
  auto got = ReadFile(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::string("new\0bytes", 9));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto missing = ReadFile((dir / "none").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("none"));
  // A directory in the way of the file: the error names the path.
  Status s = WriteFileAtomic((dir / "f.txt" / "x").string(), "x");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);  // ENOTDIR
  EXPECT_THAT(s.message(), HasSubstr("f.txt/x"));
  std::filesystem::remove_all(dir);
}

// A fresh directory per test, removed afterwards.
class WriteFileAtomicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hpod-write-atomic-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add);
    std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static mode_t ModeOf(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  std::filesystem::path dir_;
};

TEST_F(WriteFileAtomicTest, TheFileHasTheModeWhateverTheUmask) {
  const std::string path = (dir_ / "secret").string();
  const mode_t old_umask = ::umask(077);
  Status wide = WriteFileAtomic(path, "a");  // default 0644, despite umask 077
  mode_t wide_mode = ModeOf(path);
  ::umask(0);
  Status narrow = WriteFileAtomic(path, "b", 0600);  // 0600, despite umask 0
  mode_t narrow_mode = ModeOf(path);
  ::umask(old_umask);
  ASSERT_TRUE(wide.ok()) << wide.ToString();
  ASSERT_TRUE(narrow.ok()) << narrow.ToString();
  EXPECT_EQ(wide_mode, 0644u);
  EXPECT_EQ(narrow_mode, 0600u);
  EXPECT_EQ(*ReadFile(path), "b");
  EXPECT_EQ(Entries(), std::vector<std::string>{"secret"});
}

TEST_F(WriteFileAtomicTest, ReplacesAnExistingFileByRename) {
  const std::string path = (dir_ / "f").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old contents").ok());
  // A reader that opened the old file keeps reading the old file: the new one
  // is a different inode renamed over the name, never the old one truncated.
  int old_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(old_fd, 0);
  struct stat before;
  ASSERT_EQ(::fstat(old_fd, &before), 0);
  ASSERT_TRUE(WriteFileAtomic(path, "new").ok());
  char buf[64] = {};
  ssize_t n = ::pread(old_fd, buf, sizeof(buf), 0);
  ::close(old_fd);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "old contents");
  struct stat after;
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
  EXPECT_EQ(*ReadFile(path), "new");
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST_F(WriteFileAtomicTest, AStaleTempFileIsOverwrittenWithTheMode) {
  // A crash between create and rename leaves "<path>.tmp"; the next write
  // reuses it and must not keep its mode.
  const std::string path = (dir_ / "f").string();
  int fd = ::open((path + ".tmp").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchmod(fd, 0666), 0);
  ASSERT_EQ(::write(fd, "stale stale stale", 17), 17);
  ::close(fd);
  ASSERT_TRUE(WriteFileAtomic(path, "x", 0600).ok());
  EXPECT_EQ(*ReadFile(path), "x");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST_F(WriteFileAtomicTest, ADirectoryInTheWayFailsAndLeavesNoTempFile) {
  const std::filesystem::path target = dir_ / "d";
  std::filesystem::create_directories(target / "child");
  Status s = WriteFileAtomic(target.string(), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(target.string()));
  EXPECT_EQ(Entries(), std::vector<std::string>{"d"});  // no "d.tmp"
  EXPECT_TRUE(std::filesystem::is_directory(target / "child"));
}

TEST_F(WriteFileAtomicTest, AMissingDirectoryIsNotFound) {
  Status s = WriteFileAtomic((dir_ / "none" / "f").string(), "x");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("none/f.tmp"));
  EXPECT_EQ(Entries(), std::vector<std::string>{});
}

TEST_F(WriteFileAtomicTest, AnUnwritableDirectoryFailsAndLeavesTheOldFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into any directory";
  const std::string path = (dir_ / "f").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  std::filesystem::permissions(
      dir_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  Status s = WriteFileAtomic(path, "new");
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST_F(WriteFileAtomicTest, AFailedWriteLeavesTheOldFileAndNoTempFile) {
  const std::string path = (dir_ / "f").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  // A file size limit makes write() fail with EFBIG halfway (SIGXFSZ ignored),
  // even for root.
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status s = WriteFileAtomic(path, std::string(1 << 20, 'z'));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("writing " + path + ".tmp"));
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST(FileUtilTest, ErrnoCodes) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "a").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "a").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "a").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EROFS, "a").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrnoStatus(EIO, "a").code(), StatusCode::kInternal);
  EXPECT_EQ(ErrnoStatus(ENOENT, "open x").message(), "open x: No such file or directory");
}

}  // namespace
}  // namespace hpod
