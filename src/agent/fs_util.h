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

// Creates missing parent directories (0755), then base's WriteFileAtomic
// (hpod/base/file_util.h): `data` lands in `path` with exactly `mode`, and a
// crash leaves the old or the new file.
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode);

// Whole file; kNotFound when it does not exist.
StatusOr<std::string> ReadFile(const std::string& path);

inline constexpr char kBootIdFile[] = "/proc/sys/kernel/random/boot_id";

// The machine's boot id (the kernel's, one per boot) without its newline; empty
// when unreadable. What the agent's hello, its spare channel and its join facts
// report, so that hpodd sees a reboot.
std::string ReadBootId(const std::string& path = kBootIdFile);

}  // namespace hpod::agent
