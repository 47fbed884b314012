#include "hpod/controlplane/lifecycle_bundle.h"

#include <sys/stat.h>

#include <filesystem>

#include "hpod/base/file_util.h"

namespace hpod::controlplane {

namespace fs = std::filesystem;

StatusOr<LifecycleBundle> ReadLifecycleBundle(const std::string& uri,
                                              const std::string& on_create) {
  const std::string dir = uri.rfind("file://", 0) == 0 ? uri.substr(7) : "";
  if (dir.empty() || dir[0] != '/') {
    return InvalidArgumentError(uri + " is not a file:// URI of an absolute directory");
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return InvalidArgumentError(uri + " is not a directory on hpodd's machine (hpodd reads it "
                                "and sends the scripts to the nodes)");
  }
  LifecycleBundle bundle;
  size_t bytes = 0;
  // Symlinks are not followed: a link out of the directory would send files the
  // admin did not put there.
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const std::string rel = fs::relative(it->path(), dir, ec).generic_string();
    if (ec) break;
    auto content = ReadFile(it->path().string());
    if (!content.ok()) {
      return InvalidArgumentError("cannot read " + it->path().string() + " of " + uri + ": " +
                                  std::string(content.status().message()));
    }
    bytes += content->size();
    if (bundle.files.size() + 1 > kMaxBundleFiles || bytes > kMaxBundleBytes) {
      return InvalidArgumentError(uri + " holds more than " + std::to_string(kMaxBundleFiles) +
                                  " files or " + std::to_string(kMaxBundleBytes >> 20) +
                                  " MiB, more than hpodd sends to each node; keep large files "
                                  "on /fsx or use an s3:// source");
    }
    struct stat st {};
    if (::stat(it->path().c_str(), &st) == 0 && (st.st_mode & S_IXUSR)) {
      bundle.executable.insert(rel);
    }
    bundle.files[rel] = std::move(*content);
  }
  if (ec) return InvalidArgumentError("cannot read " + uri + ": " + ec.message());
  if (!bundle.files.count(on_create)) {
    return InvalidArgumentError(uri + " has no " + on_create + " (its OnCreate script)");
  }
  return bundle;
}

}  // namespace hpod::controlplane
