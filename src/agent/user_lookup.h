#pragma once

// The node's users by name (getpwnam_r), for the agent's parts that run or own
// things as a user: munged's key, session shells, the AMI's user.
//
// Thread contract: thread-safe (getpwnam_r with a buffer of its own).

#include <sys/types.h>

#include <optional>
#include <string>

namespace hpod::agent {

struct UserEntry {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
};

// nullopt for an empty name or a user the node does not have.
std::optional<UserEntry> LookupUser(const std::string& name);

}  // namespace hpod::agent
