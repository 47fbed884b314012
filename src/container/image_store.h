#pragma once

// A node's cache of unpacked container images, on its data disk.
//
// Layout under `dir` (default /opt/sagemaker/hpod-container: HyperPod's data
// volume, never / or /run, the places enroot's defaults fill):
//   images/<key>/rootfs        the image, unpacked once per node
//   images/<key>/image.json    where it came from, its env/entrypoint/workdir, size
//   images/<key>/.use          flock(LOCK_SH) by every container running on it
//   containers/job-<id>/<name> a container's writable layer (overlayfs upper)
//   tmp/                       imports in progress (removed on failure)
//   locks/<key>                flock(LOCK_EX) around the import of one image (empty
//                              files, kept: unlinking a lock others wait on races)
//   .lock                      flock(LOCK_EX) around a trim
// Keys: "sqsh-…" from a squashfs file's identity (path, inode, size, mtime), so an
// image on /fsx is unpacked once per node however many steps use it; "oci-…" from
// a registry image's manifest digest, so a moved tag is pulled again.
//
// Every failure is one line that names the path and the fix; nothing here ever
// needs a node drained. After an import the cache is trimmed to `max_bytes`,
// least recently used first, never an image in use or the one just imported.
//
// Thread contract: an ImageStore is used by one thread; processes on a node share
// the directory through the flocks above.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/container/image_ref.h"

namespace hpod::container {

inline constexpr char kDefaultCacheDir[] = "/opt/sagemaker/hpod-container";

struct ImageConfig {
  std::vector<std::string> env;  // KEY=VALUE, as the image sets it
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string workdir;
};

struct CachedImage {
  std::string key;
  std::string source;  // the reference it was imported from
  ImageConfig config;
  uint64_t bytes = 0;
  int64_t last_used = 0;  // unix seconds
  bool in_use = false;
};

struct FetchOptions {
  bool allow_http = false;  // a registry without TLS (enroot's ENROOT_ALLOW_HTTP)
  std::string home;         // whose ~/.config/enroot/.credentials and ~/.docker/config.json
  std::function<void(const std::string&)> progress;  // one line per stage; may be empty
};

class ImageStore {
 public:
  // Creates `dir` if needed. max_bytes 0: half of its filesystem.
  static StatusOr<ImageStore> Open(const std::string& dir, uint64_t max_bytes = 0);

  // The image in the cache, importing it first if it is not there.
  StatusOr<CachedImage> Ensure(const ImageRef& ref, const FetchOptions& options);
  StatusOr<CachedImage> Get(const std::string& key) const;
  StatusOr<std::vector<CachedImage>> List() const;
  // kFailedPrecondition while a container runs on it.
  Status Remove(const std::string& key);
  // Removes least recently used images not in use until the cache is within
  // max_bytes; never `keep`. Returns how many it removed.
  StatusOr<int> Trim(const std::string& keep);

  const std::string& dir() const { return dir_; }
  std::string RootfsOf(const std::string& key) const;
  std::string UseLockOf(const std::string& key) const;

 private:
  ImageStore(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  // The cache key and about how many bytes an import needs on the cache's disk.
  StatusOr<std::pair<std::string, uint64_t>> KeyOf(const ImageRef& ref,
                                                   const FetchOptions& options) const;
  Status CheckRoom(uint64_t need, const std::string& what);

  std::string dir_;
  uint64_t max_bytes_;
};

// Imports `ref` into a squashfs file at `out` (enroot import): skopeo copies it into
// an OCI layout, umoci unpacks it, mksquashfs packs it with the image's config at
// /etc/hpod-container/image.json (and its env in /etc/environment, as enroot does).
// Works in a temporary directory beside `out`.
Status ImportToSquashfs(const ImageRef& ref, const std::string& out, const FetchOptions& options);

// The config of an unpacked rootfs: hpod's image.json, else enroot's
// /etc/environment (env only).
ImageConfig ReadRootfsConfig(const std::string& rootfs);

}  // namespace hpod::container
