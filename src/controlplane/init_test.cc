#include "hpod/controlplane/init.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(InitTest, CreatesStoreKeyAndProfileIdempotently) {
  fs::path dir = fs::temp_directory_path() / ("hpod-init-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "aws");
  {
    std::ofstream f(dir / "aws" / "credentials");
    f << "[default]\naws_access_key_id = KEEP\naws_secret_access_key = ME\n";
  }
  InitOptions o;
  o.data_dir = (dir / "data").string();
  o.aws_dir = (dir / "aws").string();
  o.endpoint_url = "http://127.0.0.1:9999";
  FakeClock clock;
  auto r = InitDataDir(o, clock);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->access_key_id.rfind("HPOD", 0), 0u);
  std::string creds = Read(r->credentials_file);
  EXPECT_NE(creds.find("[default]\naws_access_key_id = KEEP"), std::string::npos);
  EXPECT_NE(creds.find("[hpod]\naws_access_key_id = " + r->access_key_id), std::string::npos);
  std::string config = Read(r->config_file);
  EXPECT_NE(config.find("[profile hpod]"), std::string::npos);
  EXPECT_NE(config.find("endpoint_url = http://127.0.0.1:9999"), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat(r->credentials_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(o.data_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  auto again = InitDataDir(o, clock);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->access_key_id, r->access_key_id);
  std::string creds2 = Read(r->credentials_file);
  // One [hpod] section, not two.
  EXPECT_EQ(creds2.find("[hpod]"), creds2.rfind("[hpod]"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hpod::controlplane
