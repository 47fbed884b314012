#include "hpod/agent/shared_fs.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "hpod/agent/fs_util.h"
#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

Status Fail(const std::string& why) {
  return FailedPreconditionError("shared filesystem check failed: " + why);
}

}  // namespace

bool IsMountPoint(const std::string& path) {
  struct stat self {}, parent {};
  if (::stat(path.c_str(), &self) != 0) return false;
  const std::string up = fs::path(path).parent_path().string();
  if (up.empty() || up == path) return true;
  if (::stat(up.c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

StatusOr<bool> EnsureSharedFilesystem(const api::agentproto::SharedFilesystem& decl,
                                      const SharedFsOptions& options) {
  const std::string& at = options.mount_point;
  if (decl.marker_name.empty() || decl.marker_name.find('/') != std::string::npos ||
      decl.marker_name == "." || decl.marker_name == "..") {
    return Fail("hpodd sent the marker name '" + decl.marker_name + "', which is no file name");
  }
  bool mounted_here = false;
  struct stat st {};
  if (::stat(at.c_str(), &st) != 0 && (errno == ENOTCONN || errno == EIO || errno == ESTALE)) {
    // A mount whose server side is gone (a FUSE daemon killed, a stale NFS
    // handle): away with it, then mount afresh.
    spdlog::warn("{} is a dead mount ({}); unmounting it", at, std::strerror(errno));
    UnmountSharedFilesystem(at);
  }
  if (!IsMountPoint(at)) {
    if (decl.type == "Existing") {
      return Fail(at + " is not mounted, and the cluster declares it Existing (mounted by the "
                  "admin on every host): mount it on this host, or declare what hpod mounts");
    }
    std::error_code ec;
    fs::create_directories(at, ec);
    SubprocessOptions mount;
    mount.argv = {"mount", "-t", decl.type};
    if (!decl.options.empty()) mount.argv.insert(mount.argv.end(), {"-o", decl.options});
    mount.argv.insert(mount.argv.end(), {decl.source, at});
    mount.timeout = std::chrono::seconds(60);
    mount.merge_stderr = true;
    auto r = RunCommand(mount);
    if (!r.ok() || r->exit_code != 0) {
      std::string out = r.ok() ? r->stdout_data : std::string(r.status().message());
      while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
      return Fail("mount -t " + decl.type + " " + decl.source + " " + at + " failed" +
                  (r.ok() && r->timed_out ? " (timed out after 60 s)" : "") +
                  (out.empty() ? "" : ": " + out));
    }
    mounted_here = true;
    spdlog::info("mounted {} ({}) at {}", decl.source, decl.type, at);
  }
  auto undo = [&](Status s) -> StatusOr<bool> {
    if (mounted_here) UnmountSharedFilesystem(at);
    return s;
  };
  // Writable: a probe of this instance's, removed at once.
  const std::string probe = at + "/.hpod-write-probe-" + options.instance_id;
  if (Status w = WriteFileAtomic(probe, "hpod\n", 0644); !w.ok()) {
    return undo(Fail(at + " is not writable: " + std::string(w.message())));
  }
  std::error_code ec;
  fs::remove(probe, ec);
  // The cluster's own: the writer creates the marker once; everyone compares.
  const std::string marker = at + "/" + decl.marker_name;
  if (decl.writer && !fs::exists(marker, ec)) {
    // Whole or not at all (a temporary file renamed): a reader never sees it
    // half written. The writer is the only one, so no exclusive create is needed.
    if (Status w = WriteFileAtomic(marker, decl.marker_value + "\n", 0644); !w.ok()) {
      return undo(Fail("cannot write the marker " + marker + ": " + std::string(w.message())));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + options.marker_wait;
  while (true) {
    auto text = ReadFile(marker);
    if (text.ok() && !text->empty()) {
      std::string value = *text;
      while (!value.empty() && value.back() == '\n') value.pop_back();
      if (value == decl.marker_value) return mounted_here;
      return undo(Fail(marker + " holds '" + value.substr(0, 200) + "', not this cluster's '" +
                       decl.marker_value + "': " + at + " here is another filesystem than the "
                       "cluster's"));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return undo(Fail("no " + marker + " within " +
                       std::to_string(options.marker_wait.count() / 1000) +
                       " s: the cluster's other nodes write it on their " + at +
                       ", so this host's " + at + " is another filesystem"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void UnmountSharedFilesystem(const std::string& mount_point) {
  SubprocessOptions u;
  u.argv = {"umount", "-l", mount_point};
  u.timeout = std::chrono::seconds(30);
  u.merge_stderr = true;
  auto r = RunCommand(u);
  if (!r.ok() || r->exit_code != 0) {
    spdlog::warn("umount {}: {}", mount_point,
                 r.ok() ? r->stdout_data : std::string(r.status().message()));
  }
}

}  // namespace hpod::agent
