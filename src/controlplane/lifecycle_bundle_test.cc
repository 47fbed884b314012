// file:// lifecycle sources that hpodd reads and sends to nodes that cannot see
// its files (lifecycle_bundle.h).

#include "hpod/controlplane/lifecycle_bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class LifecycleBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpod-bundle-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text, mode_t mode = 0644) {
    fs::create_directories((fs::path(dir_) / rel).parent_path());
    std::ofstream(fs::path(dir_) / rel) << text;
    ::chmod((fs::path(dir_) / rel).c_str(), mode);
  }
  std::string dir_;
};

TEST_F(LifecycleBundleTest, ReadsEveryFileWithItsExecuteBitAndFollowsNoLink) {
  Write("on_create.sh", "#!/bin/bash\n", 0755);
  Write("provisioning_parameters.json", "{}");
  Write("utils/helper.sh", "echo hi\n", 0700);
  fs::create_symlink("/etc/hostname", fs::path(dir_) / "outside");
  auto b = ReadLifecycleBundle("file://" + dir_ + "/", "on_create.sh");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->files.size(), 3u);
  EXPECT_EQ(b->files.at("utils/helper.sh"), "echo hi\n");
  EXPECT_EQ(b->executable, (std::set<std::string>{"on_create.sh", "utils/helper.sh"}));
  EXPECT_FALSE(b->files.count("outside"));
}

TEST_F(LifecycleBundleTest, RefusesWhatCannotBeSentWithTheFix) {
  Write("other.sh", "x");
  auto none = ReadLifecycleBundle("file://" + dir_, "on_create.sh");
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("has no on_create.sh"));
  EXPECT_THAT(ReadLifecycleBundle("file://" + dir_ + "/gone", "x").status().message(),
              HasSubstr("is not a directory on hpodd's machine"));
  EXPECT_THAT(ReadLifecycleBundle("file://relative", "x").status().message(),
              HasSubstr("absolute directory"));
  Write("big.bin", std::string(kMaxBundleBytes + 1, 'x'));
  Write("on_create.sh", "x");
  EXPECT_THAT(ReadLifecycleBundle("file://" + dir_, "on_create.sh").status().message(),
              HasSubstr("use an s3:// source"));
}

}  // namespace
}  // namespace hpod::controlplane
