#pragma once

// The user HyperPod's AMI has: `ubuntu`, with passwordless sudo. AWS's lifecycle
// scripts expect it (gen-keypair-ubuntu.sh sets up its SSH keys, fsx_ubuntu.sh
// moves its home to /fsx, setup_user_associations.sh adds it to accounting), and
// HyperPod users log in as it. On a local node's own root the agent creates it
// once, before the lifecycle script: the next free uid from 1000 in the node's
// /etc/passwd (the host's, underneath, the same for every node of the host, so
// its files on /fsx keep their owner on every node and on a replacement), its
// home /fsx/ubuntu (where HyperPod moves it), a login shell, and a sudoers
// drop-in.
//
// Thread contract: EnsureAmiUser runs once, on the agent's main thread.

#include <string>

#include "hpod/base/status.h"

namespace hpod::agent {

inline constexpr char kAmiUser[] = "ubuntu";

struct AmiUserOptions {
  std::string user = kAmiUser;
  std::string home_parent = "/fsx";  // the home is <home_parent>/<user>
  std::string skel = "/etc/skel";
  std::string sudoers_dir = "/etc/sudoers.d";
  std::string useradd = "useradd";
};

// Creates the user unless one of that name exists (then it is left as it is);
// its home and the sudoers drop-in are made when missing.
Status EnsureAmiUser(const AmiUserOptions& options = {});

// The sudoers drop-in's text for `user`.
std::string AmiSudoersText(const std::string& user);

}  // namespace hpod::agent
