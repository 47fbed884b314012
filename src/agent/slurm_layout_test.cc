#include "hpod/agent/slurm_layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/base/file_util.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

TEST(LinkSlurmLayoutTest, LinksWhatIsInstalledAndKeepsWhatIsThere) {
  const fs::path dir =
      fs::temp_directory_path() / ("hpod-slurm-layout-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "usr/bin");
  fs::create_directories(dir / "usr/sbin");
  fs::create_directories(dir / "opt/slurm/bin");
  for (const char* p : {"usr/bin/sinfo", "usr/bin/srun", "usr/sbin/slurmd", "usr/bin/slurmd"}) {
    ASSERT_TRUE(WriteFileAtomic((dir / p).string(), "#!/bin/sh\n", 0755).ok());
  }
  ASSERT_TRUE(WriteFileAtomic((dir / "usr/bin/sacct").string(), "not executable", 0644).ok());
  // A program already there (a pool host's own Slurm build) stays.
  ASSERT_TRUE(WriteFileAtomic((dir / "opt/slurm/bin/srun").string(), "own\n", 0755).ok());
  const std::vector<std::string> search = {(dir / "usr/sbin").string(), (dir / "usr/bin").string()};

  ASSERT_TRUE(LinkSlurmLayout((dir / "opt/slurm").string(), search).ok());
  EXPECT_EQ(fs::read_symlink(dir / "opt/slurm/bin/sinfo"), dir / "usr/bin/sinfo");
  EXPECT_EQ(fs::read_symlink(dir / "opt/slurm/sbin/slurmd"), dir / "usr/sbin/slurmd")
      << "the first search dir that has it";
  EXPECT_EQ(*ReadFile((dir / "opt/slurm/bin/srun").string()), "own\n");
  EXPECT_FALSE(fs::exists(dir / "opt/slurm/bin/sacct")) << "not executable: not installed";
  EXPECT_FALSE(fs::exists(dir / "opt/slurm/sbin/slurmctld"));
  // Idempotent.
  EXPECT_TRUE(LinkSlurmLayout((dir / "opt/slurm").string(), search).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hpod::agent
