#include "hpod/agent/user_lookup.h"

#include <pwd.h>

#include <vector>

namespace hpod::agent {

std::optional<UserEntry> LookupUser(const std::string& name) {
  if (name.empty()) return std::nullopt;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return UserEntry{pw.pw_uid, pw.pw_gid, pw.pw_dir ? pw.pw_dir : ""};
}

}  // namespace hpod::agent
