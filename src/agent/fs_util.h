#pragma once

// Small filesystem helpers of the agent: atomic file replacement (the credential,
// resource_config.json, lifecycle.json must never be seen half-written) and reads.
//
// Thread contract: free functions; safe from any thread for distinct paths.

#include <sys/types.h>

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::agent {

// Writes `data` to a temporary file beside `path` with `mode`, fsyncs it, renames it
// over `path` and fsyncs the directory, so a crash leaves the old or the new file.
// Creates missing parent directories (0755).
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode);

// Whole file; kNotFound when it does not exist.
StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace hpod::agent
