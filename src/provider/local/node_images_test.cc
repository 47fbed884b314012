// LocalProvider's image store (node_images.cc) against FakeNodeHost: an image
// named from the programs' copies, nodes launched with it running those copies
// after the build beside hpodd changed, launches with an older image, and which
// images are kept (those nodes run, the newest, any younger than the retention).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hpod/api/software_image.h"
#include "hpod/base/crypto.h"
#include "hpod/provider/local/local_provider.h"
#include "hpod/provider/local/local_provider_test_fixture.h"

namespace hpod::provider::local {
namespace {

using test_support::LocalProviderTest;
using test_support::ReadFile;
namespace fs = std::filesystem;

class NodeImagesTest : public LocalProviderTest {
 protected:
  LocalProviderOptions WithPrograms() {
    fs::create_directories(dir_ / "build");
    Write("hpod-agent", "agent 1");
    Write("spank_hpod.so", "plugin 1");
    LocalProviderOptions o = Options();
    o.agent_binary = (dir_ / "build/hpod-agent").string();
    o.spank_plugin = (dir_ / "build/spank_hpod.so").string();
    return o;
  }
  // As a build or an upgrade does: a new file renamed over the old one.
  void Write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / "build" / name;
    std::ofstream(p.string() + ".new") << content;
    fs::rename(p.string() + ".new", p);
  }
  static std::string ImageOf(const std::string& agent, const std::string& plugin) {
    return api::ImageIdOf(
        {{"hpod-agent", HexEncode(Sha256(agent))}, {"spank_hpod.so", HexEncode(Sha256(plugin))}});
  }
};

TEST_F(NodeImagesTest, NodesRunTheirImagesCopiesWhateverTheBuildBecomes) {
  auto p = Make(WithPrograms());
  ASSERT_NE(p, nullptr);
  auto first = p->CurrentImage();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, ImageOf("agent 1", "plugin 1")) << "named as an agent names what it runs";
  EXPECT_TRUE(p->HasImage(*first));
  EXPECT_EQ(*p->CurrentImage(), *first) << "unchanged programs, the same image";

  ASSERT_TRUE(p->Launch(Spec("i-aaaaaaaaaaaaaaaaa")).ok());
  const std::string dir = p->NodeDir("i-aaaaaaaaaaaaaaaaa");
  const std::string image_dir = (dir_ / "local/images" / *first).string();
  auto init = nlohmann::json::parse(ReadFile(dir + "/node-init.json"));
  EXPECT_EQ(init["program"][0], image_dir + "/hpod-agent");
  EXPECT_EQ(ReadFile(dir + "/disk/state/spank_hpod.so"), "plugin 1");
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir + "/node.json"))["image_id"], *first);

  Write("hpod-agent", "agent 2");  // rebuilt beside hpodd
  auto second = p->CurrentImage();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, ImageOf("agent 2", "plugin 1"));
  EXPECT_EQ(ReadFile(image_dir + "/hpod-agent"), "agent 1") << "the old image is kept";
  // A reboot keeps the node's image; a new node gets the new one, or the one named.
  ASSERT_TRUE(p->Reboot("i-aaaaaaaaaaaaaaaaa", "r-1").ok());
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir + "/node-init.json"))["program"][0],
            image_dir + "/hpod-agent");
  ASSERT_TRUE(p->Launch(Spec("i-bbbbbbbbbbbbbbbbb")).ok());
  EXPECT_EQ(
      nlohmann::json::parse(ReadFile(p->NodeDir("i-bbbbbbbbbbbbbbbbb") + "/node.json"))["image_id"],
      *second);
  LaunchSpec old = Spec("i-ccccccccccccccccc");
  old.image_id = *first;
  ASSERT_TRUE(p->Launch(old).ok());
  EXPECT_EQ(nlohmann::json::parse(
                ReadFile(p->NodeDir("i-ccccccccccccccccc") + "/node-init.json"))["program"][0],
            image_dir + "/hpod-agent");
  LaunchSpec unknown = Spec("i-ddddddddddddddddd");
  unknown.image_id = "ami-0123456789abcdef0";
  EXPECT_EQ(p->Launch(unknown).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(p->HasImage("ami-../../etc"));
}

TEST_F(NodeImagesTest, KeepsTheImagesNodesRunAndTheNewestOthers) {
  auto p = Make(WithPrograms());
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->Launch(Spec("i-aaaaaaaaaaaaaaaaa")).ok());
  const std::string running = *p->CurrentImage();
  std::vector<std::string> others;
  for (int k = 2; k <= LocalProvider::kKeptImages + 3; ++k) {
    Write("hpod-agent", "agent " + std::to_string(k));
    others.push_back(*p->CurrentImage());
    std::error_code ec;  // past the retention, and apart, so "newest" is well defined
    fs::last_write_time(dir_ / "local/images" / others.back(),
                        fs::file_time_type::clock::now() - LocalProvider::kImageRetention -
                            std::chrono::hours(1) + std::chrono::seconds(k),
                        ec);
  }
  ASSERT_TRUE(p->Launch(Spec("i-bbbbbbbbbbbbbbbbb")).ok());
  ASSERT_TRUE(p->Terminate("i-bbbbbbbbbbbbbbbbb").ok());  // a removal collects
  EXPECT_TRUE(p->HasImage(running)) << "a node runs it";
  int kept = 0;
  for (const auto& id : others) kept += p->HasImage(id);
  EXPECT_EQ(kept, LocalProvider::kKeptImages + 1) << "the newest others and the current";
  EXPECT_FALSE(p->HasImage(others.front())) << "the oldest unused one went";
  // One made again (a build back to an older version) is current, and new again.
  Write("hpod-agent", "agent 3");
  EXPECT_EQ(*p->CurrentImage(), others[1]);
  ASSERT_TRUE(p->Launch(Spec("i-ccccccccccccccccc")).ok());
  ASSERT_TRUE(p->Terminate("i-ccccccccccccccccc").ok());
  EXPECT_TRUE(p->HasImage(others[1]));
}

TEST_F(NodeImagesTest, NoAgentProgramNoImage) {
  auto p = Make();  // its agent_binary does not exist here
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p->CurrentImage(), "");
  ASSERT_TRUE(p->Launch(Spec("i-aaaaaaaaaaaaaaaaa")).ok());
  auto init =
      nlohmann::json::parse(ReadFile(p->NodeDir("i-aaaaaaaaaaaaaaaaa") + "/node-init.json"));
  EXPECT_EQ(init["program"][0], test_support::kAbsentAgent);
}

}  // namespace
}  // namespace hpod::provider::local
