#include "hpod/container/runtime.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "hpod/base/file_util.h"

namespace hpod::container {
namespace fs = std::filesystem;

namespace {

Status MountErr(const std::string& what) { return ErrnoStatus(errno, what); }

// Creates the mountpoint `target` inside the container for a source of the same
// kind (directory or file).
Status EnsureMountpoint(const std::string& target, bool directory) {
  std::error_code ec;
  if (directory) {
    fs::create_directories(target, ec);
    if (ec) return InternalError("creating mountpoint " + target + ": " + ec.message());
    return OkStatus();
  }
  fs::create_directories(fs::path(target).parent_path(), ec);
  if (fs::exists(target, ec) || fs::is_symlink(target, ec)) {
    if (fs::is_symlink(target, ec))
      fs::remove(target, ec);
    else
      return OkStatus();
  }
  int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "creating mountpoint " + target);
  ::close(fd);
  return OkStatus();
}

Status Bind(const std::string& source, const std::string& target, bool read_only) {
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return MountErr("bind-mounting " + source + " on " + target);
  }
  if (read_only && ::mount(nullptr, target.c_str(), nullptr,
                           MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC, nullptr) != 0) {
    return MountErr("making " + target + " read-only");
  }
  return OkStatus();
}

}  // namespace

Status EnterContainer(const ContainerSpec& spec) {
  const std::string upper = spec.container_dir + "/upper";
  const std::string work = spec.container_dir + "/work";
  const std::string root = spec.container_dir + "/merged";
  std::error_code ec;
  for (const std::string& d : {upper, work, root}) {
    fs::create_directories(d, ec);
    if (ec) return InternalError("creating " + d + ": " + ec.message());
  }
  // Every source must exist before anything is mounted: a typo is the user's one
  // line, not a half-built container.
  for (const BindMount& m : spec.mounts) {
    struct stat st;
    if (::stat(m.source.c_str(), &st) != 0) {
      return InvalidArgumentError("--container-mounts: " + m.source +
                                  " does not exist on this node (" + strerror(errno) + ")");
    }
  }
  if (::unshare(CLONE_NEWNS) != 0) return MountErr("unshare(CLONE_NEWNS)");
  // Nothing we mount may propagate back into the node's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return MountErr("making / private");
  }
  const std::string options = "lowerdir=" + spec.rootfs + ",upperdir=" + upper + ",workdir=" + work;
  if (::mount("overlay", root.c_str(), "overlay", 0, options.c_str()) != 0) {
    return MountErr("mounting the container's overlay on " + root);
  }
  HPOD_RETURN_IF_ERROR(EnsureMountpoint(root + "/proc", true));
  if (::mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    return MountErr("mounting /proc");
  }
  for (const char* d : {"/dev", "/sys"}) {
    HPOD_RETURN_IF_ERROR(EnsureMountpoint(root + d, true));
    HPOD_RETURN_IF_ERROR(Bind(d, root + d, false));
  }
  HPOD_RETURN_IF_ERROR(EnsureMountpoint(root + "/run", true));
  if (::mount("tmpfs", (root + "/run").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") != 0) {
    return MountErr("mounting /run");
  }
  // The node's names: Slurm's hostnames and the cluster's resolver.
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf"}) {
    struct stat st;
    if (::stat(f, &st) != 0) continue;
    HPOD_RETURN_IF_ERROR(EnsureMountpoint(root + f, false));
    HPOD_RETURN_IF_ERROR(Bind(f, root + f, true));
  }
  for (const BindMount& m : spec.mounts) {
    struct stat st;
    if (::stat(m.source.c_str(), &st) != 0) return MountErr("stat " + m.source);
    HPOD_RETURN_IF_ERROR(EnsureMountpoint(root + m.destination, S_ISDIR(st.st_mode)));
    HPOD_RETURN_IF_ERROR(Bind(m.source, root + m.destination, m.read_only));
  }
  if (!spec.writable &&
      ::mount(nullptr, root.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    return MountErr("making the container read-only");
  }
  // pivot_root(".", "."): the old root ends up stacked under the new one and is
  // detached at once (pivot_root(2), NOTES), so no directory is left for it.
  if (::chdir(root.c_str()) != 0) return MountErr("chdir " + root);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return MountErr("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return MountErr("detaching the node's root");
  if (::chdir("/") != 0) return MountErr("chdir /");
  return OkStatus();
}

}  // namespace hpod::container
