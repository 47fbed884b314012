#include "hpod/container/image_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/container/fetch.h"

namespace hpod::container {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Free space kept on the cache's filesystem beyond what an import needs, so that a
// full cache never leaves the node's other users of the disk without room.
constexpr uint64_t kReserveBytes = 256ull << 20;

// An flock held for the object's life; -1 when it could not be taken.
class FileLock {
 public:
  FileLock(const std::string& path, int op) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, op) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

std::string FixFor() {
  return "free space there (hpod-container remove), or point the cache at a larger disk "
         "(container_cache= in plugstack.conf)";
}

}  // namespace

StatusOr<ImageStore> ImageStore::Open(const std::string& dir, uint64_t max_bytes) {
  std::error_code ec;
  for (const char* sub : {"images", "containers", "tmp", "locks"}) {
    fs::create_directories(dir + "/" + sub, ec);
    if (ec) {
      return FailedPreconditionError("container cache " + dir + ": cannot create " + sub + " (" +
                                     ec.message() +
                                     "); check the node's data disk or set "
                                     "container_cache= in plugstack.conf");
    }
  }
  if (max_bytes == 0) {
    struct statvfs vfs;
    if (::statvfs(dir.c_str(), &vfs) != 0) return ErrnoStatus(errno, "statvfs " + dir);
    max_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize / 2;
  }
  return ImageStore(dir, max_bytes);
}

std::string ImageStore::RootfsOf(const std::string& key) const {
  return dir_ + "/images/" + key + "/rootfs";
}
std::string ImageStore::UseLockOf(const std::string& key) const {
  return dir_ + "/images/" + key + "/.use";
}

StatusOr<std::pair<std::string, uint64_t>> ImageStore::KeyOf(const ImageRef& ref,
                                                             const FetchOptions& options) const {
  if (ref.kind == ImageRef::Kind::kSquashfs) {
    std::error_code ec;
    fs::path real = fs::canonical(ref.path, ec);
    struct stat st;
    if (ec || ::stat(real.c_str(), &st) != 0) {
      return NotFoundError("image " + ref.path + " does not exist on this node (" +
                           (ec ? ec.message() : std::string(strerror(errno))) +
                           "); import it with hpod-container import -o " + ref.path);
    }
    if (!S_ISREG(st.st_mode)) return InvalidArgumentError("image " + ref.path + " is not a file");
    const std::string id = real.string() + "\n" + std::to_string(st.st_ino) + "\n" +
                           std::to_string(st.st_size) + "\n" + std::to_string(st.st_mtim.tv_sec) +
                           "." + std::to_string(st.st_mtim.tv_nsec);
    // A squashfs unpacks to about three times its size.
    return std::pair{"sqsh-" + HexEncode(Sha256(id)).substr(0, 24),
                     3 * static_cast<uint64_t>(st.st_size)};
  }
  auto remote = InspectRemote(ref, options);
  if (!remote.ok()) return remote.status();
  // The compressed layers in the OCI layout, and the tree they unpack to (about
  // three times); 512 MiB when the source does not say.
  const uint64_t need = remote->layer_bytes > 0 ? 4 * remote->layer_bytes : 512ull << 20;
  return std::pair{"oci-" + remote->digest.substr(0, 24), need};
}

Status ImageStore::CheckRoom(uint64_t need, const std::string& what) {
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0) return ErrnoStatus(errno, "statvfs " + dir_);
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (avail >= need + kReserveBytes) return OkStatus();
  return ResourceExhaustedError("container cache " + dir_ + ": " + what + " needs about " +
                                std::to_string(need >> 20) + " MiB and " +
                                std::to_string(avail >> 20) + " MiB are free; " + FixFor());
}

StatusOr<CachedImage> ImageStore::Ensure(const ImageRef& ref, const FetchOptions& options) {
  auto key_need = KeyOf(ref, options);
  if (!key_need.ok()) return key_need.status();
  const std::string* key = &key_need->first;
  // One import per image at a time (a second step wanting it waits, then finds it);
  // steps on other images, cached or not, go on meanwhile.
  FileLock lock(dir_ + "/locks/" + *key, LOCK_EX);
  if (!lock.held()) return ErrnoStatus(errno, "locking container cache " + dir_);
  const std::string image_dir = dir_ + "/images/" + *key;
  if (!fs::exists(image_dir + "/image.json")) {
    HPOD_RETURN_IF_ERROR(CheckRoom(key_need->second, "importing " + ref.ToString()));
    const std::string work = dir_ + "/tmp/" + *key + "." + std::to_string(::getpid());
    std::error_code ec;
    fs::remove_all(work, ec);
    fs::create_directories(work, ec);
    ImageConfig config;
    Status s = FetchRootfs(ref, work, options, &config);
    if (s.ok()) {
      fs::remove_all(image_dir, ec);
      fs::create_directories(image_dir, ec);
      fs::rename(work + "/rootfs", image_dir + "/rootfs", ec);
      if (ec)
        s = InternalError("moving " + work + "/rootfs into " + image_dir + ": " + ec.message());
    }
    if (s.ok()) {
      json meta = {{"source", ref.ToString()}, {"bytes", DiskUsage(image_dir + "/rootfs")}};
      s = WriteFileAtomic(image_dir + "/image.json", meta.dump() + "\n");
    }
    fs::remove_all(work, ec);
    if (!s.ok()) {
      fs::remove_all(image_dir, ec);
      struct statvfs vfs;
      if (::statvfs(dir_.c_str(), &vfs) == 0 &&
          static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize < kReserveBytes) {
        return ResourceExhaustedError("container cache " + dir_ + " is full while importing " +
                                      ref.ToString() + "; " + FixFor());
      }
      return s;
    }
    auto trimmed = Trim(*key);
    (void)trimmed;
  }
  // The last use is the mtime of the use lock: touched here, read by Trim.
  {
    FileLock touch(UseLockOf(*key), LOCK_SH);
    ::utimensat(AT_FDCWD, UseLockOf(*key).c_str(), nullptr, 0);
  }
  return Get(*key);
}

StatusOr<CachedImage> ImageStore::Get(const std::string& key) const {
  const std::string image_dir = dir_ + "/images/" + key;
  auto text = ReadFile(image_dir + "/image.json");
  if (!text.ok()) return NotFoundError("no image " + key + " in the container cache " + dir_);
  json meta = json::parse(*text, nullptr, false);
  CachedImage c;
  c.key = key;
  if (meta.is_object()) {
    c.source = meta.value("source", "");
    c.bytes = meta.value("bytes", uint64_t{0});
  }
  c.config = ReadRootfsConfig(image_dir + "/rootfs");
  struct stat st;
  if (::stat(UseLockOf(key).c_str(), &st) == 0) c.last_used = st.st_mtim.tv_sec;
  int fd = ::open(UseLockOf(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    c.in_use = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    ::close(fd);
  }
  return c;
}

StatusOr<std::vector<CachedImage>> ImageStore::List() const {
  std::vector<CachedImage> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ + "/images", ec)) {
    auto c = Get(e.path().filename().string());
    if (c.ok()) out.push_back(*c);
  }
  std::sort(out.begin(), out.end(),
            [](const CachedImage& a, const CachedImage& b) { return a.last_used > b.last_used; });
  return out;
}

Status ImageStore::Remove(const std::string& key) {
  if (key.empty() || key.find('/') != std::string::npos || key[0] == '.') {
    return InvalidArgumentError("no image " + key + " in the container cache " + dir_);
  }
  const std::string image_dir = dir_ + "/images/" + key;
  if (!fs::exists(image_dir))
    return NotFoundError("no image " + key + " in the container cache " + dir_);
  int fd = ::open(UseLockOf(key).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return FailedPreconditionError("image " + key + " is in use by a running container");
  }
  std::error_code ec;
  // Renamed away first, so that a half-removed tree is never taken for an image.
  const std::string doomed = dir_ + "/tmp/removing." + key + "." + std::to_string(::getpid());
  fs::rename(image_dir, doomed, ec);
  if (fd >= 0) ::close(fd);
  if (ec) return InternalError("removing " + image_dir + ": " + ec.message());
  fs::remove_all(doomed, ec);
  return OkStatus();
}

StatusOr<int> ImageStore::Trim(const std::string& keep) {
  // One trim at a time: two would both count the same images as still there.
  FileLock lock(dir_ + "/.lock", LOCK_EX);
  if (!lock.held()) return ErrnoStatus(errno, "locking container cache " + dir_);
  auto images = List();
  if (!images.ok()) return images.status();
  uint64_t total = 0;
  for (const auto& i : *images) total += i.bytes;
  int removed = 0;
  // Oldest last in List(): walk from the back.
  for (auto it = images->rbegin(); it != images->rend() && total > max_bytes_; ++it) {
    if (it->key == keep || it->in_use) continue;
    if (Remove(it->key).ok()) {
      total -= std::min(total, it->bytes);
      ++removed;
    }
  }
  return removed;
}

}  // namespace hpod::container
