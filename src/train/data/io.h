// File helpers of the data library: whole-file reads and atomic writes.
//
// Thread contract: free functions, safe from any thread for distinct paths.
#pragma once

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::train::data {

// A Status for a failed system call: NotFound for ENOENT, PermissionDenied for
// EACCES/EPERM, ResourceExhausted for ENOSPC/EDQUOT, Internal otherwise. The
// message is "<context>: <strerror>".
Status ErrnoStatus(int err, const std::string& context);

// Reads the whole file.
StatusOr<std::string> ReadFile(const std::string& path);

// Writes `bytes` to "<path>.tmp", fsyncs it, renames it over `path` and fsyncs
// the directory, so readers see either the old file or the complete new one.
Status WriteFileAtomic(const std::string& path, std::string_view bytes);

}  // namespace hpod::train::data
