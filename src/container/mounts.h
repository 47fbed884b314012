#pragma once

// `--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]`, pyxis's syntax: FLAGS joined
// with '+' ("ro+rprivate"); a lone SRC mounts at the same path. Sources are paths
// on the node, destinations absolute paths in the container.
//
// Thread contract: plain values and pure functions.

#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::container {

struct BindMount {
  std::string source;
  std::string destination;
  bool read_only = false;
  bool operator==(const BindMount&) const = default;
};

// kInvalidArgument naming the entry and what is wrong with it. Accepted flags:
// ro, rw, and the propagation flags enroot takes (private, rprivate, slave,
// rslave, shared, rshared), which are accepted and ignored: every mount in the
// container is private.
StatusOr<std::vector<BindMount>> ParseMounts(std::string_view value);

}  // namespace hpod::container
