#include "hpod/provider/local/node_root.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "hpod/base/file_util.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string DecodeOctal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Whether `path` is `dir` or below it (both absolute, normalized).
bool AtOrUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

Status BindInto(const std::string& root, const std::string& path) {
  const std::string target = root + path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return InternalError(Errno("stat " + path));
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    fs::create_directories(target, ec);
  } else if (::access(target.c_str(), F_OK) != 0) {
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
  }
  if (::mount(path.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return InternalError(Errno("binding " + path + " into the node's root"));
  }
  return OkStatus();
}

// An overlay of the node's own over the host's mount at `path`, its layers in
// `node_disk`/root-mounts/<path with '/' as '_'>.
Status OverlayInto(const std::string& root, const std::string& path, const std::string& node_disk) {
  std::string name = path.substr(1);
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const std::string base = node_disk + "/root-mounts/" + name;
  std::error_code ec;
  for (const std::string& d : {base + "/upper", base + "/work", root + path}) {
    fs::create_directories(d, ec);
    if (ec) return InternalError("creating " + d + ": " + ec.message());
  }
  const std::string data =
      "lowerdir=" + path + ",upperdir=" + base + "/upper,workdir=" + base + "/work";
  if (::mount("overlay", (root + path).c_str(), "overlay", 0, data.c_str()) != 0) {
    return InternalError(Errno("mounting the node's layer over " + path));
  }
  return OkStatus();
}

}  // namespace

bool IsSystemMount(const std::string& path) {
  for (const char* d : {"/usr", "/var", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                        "/libx32", "/boot", "/root"}) {
    if (AtOrUnder(path, d)) return true;
  }
  return false;
}

std::vector<std::string> MountsToCarry(std::string_view mountinfo, const std::string& node_disk) {
  std::vector<std::string> candidates;
  std::istringstream in{std::string(mountinfo)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mountpoint;
    if (!(fields >> id >> parent >> dev >> root >> mountpoint)) continue;
    std::string p = DecodeOctal(mountpoint);
    if (p == "/" || p.empty() || p[0] != '/') continue;
    bool skip = AtOrUnder(p, node_disk);
    for (const char* own : {"/proc", "/sys", "/dev", "/run", "/tmp"})
      skip = skip || AtOrUnder(p, own);
    if (!skip) candidates.push_back(p);
  }
  std::vector<std::string> out;
  for (const std::string& p : candidates) {
    bool nested = false;
    for (const std::string& q : candidates) nested = nested || (q != p && AtOrUnder(p, q));
    bool seen = false;
    for (const std::string& q : out) seen = seen || q == p;
    if (!nested && !seen) out.push_back(p);
  }
  return out;
}

Status PrepareRootUpper(const std::string& upper, const std::string& host_home,
                        const std::string& skel) {
  const std::string home = upper + host_home;
  std::error_code ec;
  if (fs::exists(home, ec)) return OkStatus();  // not the first boot
  // Built beside, then renamed: a boot cut short halfway retries from scratch.
  const std::string building = upper + "/.hpod-root-home";
  fs::remove_all(building, ec);
  if (::mkdir(building.c_str(), 0700) != 0) return InternalError(Errno("mkdir " + building));
  // Iterated with error codes throughout: this runs in the node's PID 1, where an
  // exception would end the node.
  for (fs::directory_iterator it(host_home, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] != '.') continue;
    // A whiteout: a 0/0 character device hides the lower layer's entry.
    const std::string w = building + "/" + name;
    if (::mknod(w.c_str(), S_IFCHR | 0000, makedev(0, 0)) != 0) {
      return InternalError(Errno("whiteout " + w));
    }
  }
  ec.clear();
  for (fs::directory_iterator it(skel, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    const std::string to = building + "/" + it->path().filename().string();
    ::unlink(to.c_str());  // the whiteout a skel file replaces
    StatusOr<std::string> data = ReadFile(it->path().string());
    if (!data.ok()) return data.status();
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(to, *data, 0644));
  }
  fs::create_directories(fs::path(home).parent_path(), ec);
  if (::rename(building.c_str(), home.c_str()) != 0) {
    return InternalError(Errno("rename " + building + " to " + home));
  }
  return OkStatus();
}

StatusOr<std::string> MountNodeRoot(const std::string& node_disk) {
  const std::string upper = node_disk + "/root-upper";
  const std::string work = node_disk + "/root-work";
  const std::string root = node_disk + "/root";
  for (const std::string& d : {upper, work, root}) {
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) return InternalError("creating " + d + ": " + ec.message());
  }
  HPOD_RETURN_IF_ERROR(PrepareRootUpper(upper));
  // Read before the overlay is mounted: it would be a carried mount of its own.
  StatusOr<std::string> mountinfo = ReadFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mountinfo.status();
  const std::string data = "lowerdir=/,upperdir=" + upper + ",workdir=" + work;
  if (::mount("overlay", root.c_str(), "overlay", 0, data.c_str()) != 0) {
    return InternalError(Errno("mounting the node's root (overlay " + data + ")"));
  }
  for (const char* whole : {"/proc", "/sys", "/dev"}) HPOD_RETURN_IF_ERROR(BindInto(root, whole));
  for (const std::string& p : MountsToCarry(*mountinfo, node_disk)) {
    HPOD_RETURN_IF_ERROR(IsSystemMount(p) ? OverlayInto(root, p, node_disk) : BindInto(root, p));
  }
  return root;
}

Status EnterNodeRoot(const std::string& root) {
  if (::chdir(root.c_str()) != 0) return InternalError(Errno("chdir " + root));
  // pivot_root(".", "."): the old root is stacked on the new one and detached
  // right after, so no directory for it is needed in the node's root.
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return InternalError(Errno("pivot_root"));
  if (::umount2(".", MNT_DETACH) != 0) return InternalError(Errno("detaching the host's root"));
  if (::chdir("/") != 0) return InternalError(Errno("chdir /"));
  return OkStatus();
}

}  // namespace hpod::provider::local
