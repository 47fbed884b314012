#include "hpod/base/file_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

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
