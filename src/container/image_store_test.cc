#include "hpod/container/image_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"
#include "hpod/container/fetch.h"

namespace hpod::container {
namespace {
namespace fs = std::filesystem;

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RunChecked({"sh", "-c", "command -v mksquashfs && command -v unsquashfs"}).ok()) {
      GTEST_SKIP() << "squashfs-tools is not installed";
    }
    char tmpl[] = "/tmp/hpod-image-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A squashfs image whose /hello holds `text`, with hpod's image config.
  std::string MakeImage(const std::string& name, const std::string& text) {
    const std::string root = dir_ + "/src-" + name;
    fs::create_directories(root + "/etc");
    std::ofstream(root + "/hello") << text;
    ImageConfig c;
    c.env = {"PATH=/opt/bin:/usr/bin", "IMAGE_NAME=" + name};
    c.workdir = "/work";
    EXPECT_TRUE(WriteRootfsConfig(root, c).ok());
    const std::string out = dir_ + "/" + name + ".sqsh";
    auto r = RunChecked({"mksquashfs", root, out, "-noappend", "-no-progress", "-quiet"});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return out;
  }

  std::string dir_;
};

TEST_F(ImageStoreTest, ASquashfsIsUnpackedOnceAndKeepsItsConfig) {
  auto store = ImageStore::Open(dir_ + "/cache");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string sqsh = MakeImage("a", "from a");
  ImageRef ref;
  ref.path = sqsh;
  auto first = store->Ensure(ref, {});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->key.rfind("sqsh-", 0), 0u);
  EXPECT_EQ(*ReadFile(store->RootfsOf(first->key) + "/hello"), "from a");
  EXPECT_EQ(first->config.workdir, "/work");
  EXPECT_EQ(first->config.env.back(), "IMAGE_NAME=a");
  EXPECT_GT(first->bytes, 0u);
  // Again: the same entry, not unpacked again.
  std::ofstream(store->RootfsOf(first->key) + "/marker") << "kept";
  auto second = store->Ensure(ref, {});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->key, first->key);
  EXPECT_TRUE(fs::exists(store->RootfsOf(first->key) + "/marker"));
  // A rewritten file is another image.
  fs::remove(sqsh);
  MakeImage("a", "from a, rebuilt");
  auto third = store->Ensure(ref, {});
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->key, first->key);
  EXPECT_EQ(*ReadFile(store->RootfsOf(third->key) + "/hello"), "from a, rebuilt");
}

TEST_F(ImageStoreTest, MissingAndCorruptImagesAreOneLineAndLeaveNothing) {
  auto store = ImageStore::Open(dir_ + "/cache");
  ASSERT_TRUE(store.ok());
  ImageRef missing;
  missing.path = dir_ + "/nope.sqsh";
  auto r = store->Ensure(missing, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("does not exist on this node"), std::string::npos);
  ImageRef corrupt;
  corrupt.path = dir_ + "/corrupt.sqsh";
  std::ofstream(corrupt.path) << std::string(8192, 'x');
  r = store->Ensure(corrupt, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a readable squashfs file"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  EXPECT_TRUE(fs::is_empty(dir_ + "/cache/tmp"));
}

TEST_F(ImageStoreTest, TrimEvictsLeastRecentlyUsedButNeverAnImageInUse) {
  auto store = ImageStore::Open(dir_ + "/cache", /*max_bytes=*/1);
  ASSERT_TRUE(store.ok());
  ImageRef a, b, c;
  a.path = MakeImage("a", "a");
  b.path = MakeImage("b", "b");
  c.path = MakeImage("c", "c");
  auto ia = store->Ensure(a, {});
  ASSERT_TRUE(ia.ok());
  // a is in use (a container holds its lock): importing b, then c, evicts b only.
  int fd = ::open(store->UseLockOf(ia->key).c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  auto ib = store->Ensure(b, {});
  ASSERT_TRUE(ib.ok());
  auto ic = store->Ensure(c, {});
  ASSERT_TRUE(ic.ok());
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> keys;
  for (const auto& i : *list) keys.push_back(i.key);
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_NE(std::find(keys.begin(), keys.end(), ia->key), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), ic->key), keys.end());
  Status s = store->Remove(ia->key);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  ::close(fd);
  EXPECT_TRUE(store->Remove(ia->key).ok());
  EXPECT_FALSE(fs::exists(store->RootfsOf(ia->key)));
}

}  // namespace
}  // namespace hpod::container
