#include "hpod/agent/ami_user.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/user_lookup.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string AmiSudoersText(const std::string& user) {
  return "# Written by hpod-agent: the HyperPod AMI's user, as its cloud-init leaves it.\n" + user +
         " ALL=(ALL) NOPASSWD:ALL\n";
}

Status EnsureAmiUser(const AmiUserOptions& paths) {
  const std::string& user = paths.user;
  const std::string home = paths.home_parent + "/" + user;
  std::optional<UserEntry> ids = LookupUser(user);
  if (!ids) {
    // useradd picks the uid (UID_MIN, 1000, upwards) and makes a group of the
    // same name; no home here: it may already be on the shared /fsx.
    auto r = RunCommand({.argv = {paths.useradd, "--no-create-home", "--home-dir", home, "--shell",
                                  "/bin/bash", "--user-group", user},
                         .timeout = std::chrono::seconds(30)});
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) {
      return InternalError("useradd " + user + " exited with code " + std::to_string(r->exit_code) +
                           ": " + r->stderr_data);
    }
    ids = LookupUser(user);
    if (!ids) return InternalError("useradd " + user + " left no such user");
    spdlog::info("created the AMI's user {} (uid {})", user, ids->uid);
  }
  std::error_code ec;
  if (fs::is_directory(paths.home_parent, ec) && !fs::exists(home, ec)) {
    // Built beside and renamed: another node may be making the same home.
    const std::string building = home + ".hpod-" + std::to_string(::getpid());
    fs::create_directory(building, ec);
    for (fs::directory_iterator it(paths.skel, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code copy_ec;
      if (it->is_regular_file(copy_ec)) {
        fs::copy_file(it->path(), building + "/" + it->path().filename().string(), copy_ec);
        if (::chown((building + "/" + it->path().filename().string()).c_str(), ids->uid,
                    ids->gid) != 0) {
          spdlog::warn("cannot chown a file of {}'s home", user);
        }
      }
    }
    if (::chown(building.c_str(), ids->uid, ids->gid) != 0 ||
        ::chmod(building.c_str(), 0750) != 0 || ::rename(building.c_str(), home.c_str()) != 0) {
      fs::remove_all(building, ec);
      if (!fs::exists(home, ec)) return InternalError("cannot make " + home);
    }
  }
  const std::string sudoers = paths.sudoers_dir + "/90-hpod-" + user;
  if (!fs::exists(sudoers, ec)) {
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(sudoers, AmiSudoersText(user), 0440));
  }
  return OkStatus();
}

}  // namespace hpod::agent
