// Whole-file helpers and errno → Status, for libraries that may use only base
// (the training runtime; docs/architecture.md).
//
// Thread contract: free functions, safe from any thread for distinct paths.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod {

// A Status for a failed system call, message "<what>: <strerror>": NotFound
// for ENOENT, PermissionDenied for EACCES/EPERM, ResourceExhausted for
// ENOSPC/EDQUOT, FailedPrecondition for a path of the wrong kind or a
// read-only file system (ENOTDIR, EISDIR, EEXIST, EROFS), Internal otherwise.
Status ErrnoStatus(int err, std::string_view what);

// Reads the whole file.
StatusOr<std::string> ReadFile(const std::string& path);

// Writes `bytes` to "<path>.tmp" with exactly `mode` (the umask neither widens
// nor narrows it), fsyncs it, renames it over `path` and fsyncs the parent
// directory, so readers and a crash see either the old file or the complete new
// one. The parent directory must exist. On any failure "<path>.tmp" is removed
// and `path` is untouched; the error is ErrnoStatus's for the failed call and
// names the file. Two writers of one `path` at once are not supported (they
// share the temporary name).
Status WriteFileAtomic(const std::string& path, std::string_view bytes, mode_t mode = 0644);

// Writes `bytes` over `path` in place (O_TRUNC, the same inode, mode 0644 when
// created): for files a bind mount pins, where a rename would leave the mount on
// the old copy. Not atomic: a reader may see it half written.
Status WriteFileInPlace(const std::string& path, std::string_view bytes);

}  // namespace hpod
