#include "hpod/api/software_image.h"

#include <gtest/gtest.h>

#include <regex>

namespace hpod::api {
namespace {

TEST(SoftwareImageTest, AnIdInTheModelsPatternThatFollowsEveryProgram) {
  SoftwareDigests d = {{"hpod-agent", std::string(64, 'a')},
                       {"spank_hpod.so", std::string(64, 'b')}};
  const std::string id = ImageIdOf(d);
  EXPECT_TRUE(std::regex_match(id, std::regex("ami-[0-9a-f]{17}"))) << id;
  EXPECT_EQ(ImageIdOf(d), id) << "the same software, the same id";
  SoftwareDigests other = d;
  other["spank_hpod.so"] = std::string(64, 'c');
  EXPECT_NE(ImageIdOf(other), id) << "one program changed";
  other = d;
  other["hpod-deep-check"] = std::string(64, 'd');
  EXPECT_NE(ImageIdOf(other), id) << "one program more";
  other = d;
  other["notes.txt"] = std::string(64, 'e');
  EXPECT_EQ(ImageIdOf(other), id) << "a name outside the image does not count";
  EXPECT_EQ(ImageIdOf({}), "");
}

}  // namespace
}  // namespace hpod::api
