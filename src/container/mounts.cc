#include "hpod/container/mounts.h"

namespace hpod::container {
namespace {

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

StatusOr<std::vector<BindMount>> ParseMounts(std::string_view value) {
  std::vector<BindMount> mounts;
  for (const std::string& entry : Split(value, ',')) {
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError("--container-mounts entry '" + entry + "': " + why +
                                  " (expected SRC:DST[:FLAGS], e.g. /fsx:/fsx:ro)");
    };
    if (entry.empty()) return bad("empty");
    std::vector<std::string> parts = Split(entry, ':');
    if (parts.size() > 3) return bad("too many ':'");
    BindMount m;
    m.source = parts[0];
    m.destination = parts.size() > 1 ? parts[1] : parts[0];
    if (m.source.empty() || m.source[0] != '/') return bad("the source must be an absolute path");
    if (m.destination.empty() || m.destination[0] != '/') {
      return bad("the destination must be an absolute path");
    }
    for (const std::string& p : {m.source, m.destination}) {
      if (p.find("/../") != std::string::npos || p.ends_with("/..")) {
        return bad("'..' is not allowed in a path");
      }
    }
    if (m.destination == "/") return bad("cannot mount over the container's /");
    if (parts.size() == 3) {
      for (const std::string& f : Split(parts[2], '+')) {
        if (f == "ro") {
          m.read_only = true;
        } else if (f == "rw") {
          m.read_only = false;
        } else if (f != "private" && f != "rprivate" && f != "slave" && f != "rslave" &&
                   f != "shared" && f != "rshared" && f != "rbind" && f != "bind") {
          return bad("unknown flag '" + f + "' (ro, rw, rprivate, ...)");
        }
      }
    }
    mounts.push_back(std::move(m));
  }
  return mounts;
}

}  // namespace hpod::container
