#pragma once

// SSH between a cluster's nodes (issue 28), on nodes whose sshd hpod runs (the
// local provider's: NodeEnvironment::cluster_sshd). hpodd keeps one Ed25519 host
// key per NodeName and sends it with the Slurm role, with every node's
// known_hosts line; the agent writes them and runs sshd on the node's cluster
// address (SlurmNode supervises it beside munged).
//
// Trust is host-based: a node trusts a user on another node of the cluster
// because that node proves it holds the cluster's host key for its name
// (ssh-keysign signs for the client). So root and every cluster user reach every
// node with `ssh ip-10-…` and no key of their own to create, copy or keep in
// step; a user added later can ssh at once; a replacement is trusted (and trusts)
// as soon as it runs, since it holds its predecessor's key. Passwords are off.
//
// Thread contract: free functions; run by SlurmNode's worker thread.

#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

struct SshPaths {
  std::string ssh_dir = "/etc/ssh";
  std::string root_home = "/root";
  std::string run_dir = "/run";  // sshd's privilege separation directory, /run/sshd
};

// hpod's sshd configuration (sshd -f), complete in itself so the machine's own
// /etc/ssh/sshd_config (the host's, under a local node's root) cannot weaken or
// break it; drop-ins in sshd_config.d/ still apply first.
inline constexpr char kSshdConfigName[] = "hpod_sshd_config";

// Writes the node's SSH setup under `p`: the host key (0600) and its .pub, the
// cluster's known_hosts, shosts.equiv and root's ~/.shosts (names and addresses
// of `known_hosts`' lines), hpod's sshd configuration and the client's drop-in
// (host-based authentication, ssh-keysign); removes the other host keys (a local
// node would otherwise offer the host machine's). Returns whether the host key
// changed (sshd must restart to use it). kInvalidArgument for a key or lines that
// are not what hpodd sends.
StatusOr<bool> WriteSshSetup(const SshPaths& p, const std::string& host_key,
                             const std::string& known_hosts);

// sshd in the foreground, logging to stderr, on `listen_address` only.
std::vector<std::string> SshdArgv(const std::string& sshd, const SshPaths& p,
                                  const std::string& listen_address);

}  // namespace hpod::agent
