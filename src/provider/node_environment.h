#pragma once

// What a provider's nodes share with hpodd, declared in one value.
//
// hpodd once assumed that every node sits on its own machine: that agents reach a
// Unix socket in hpodd's data dir, that a file:// lifecycle source on hpodd's disk
// is on the node's too, that hpod's SPANK plugin and the S3 relay socket are
// where hpodd put them, that GPU instance types need stand-in devices, and that a
// replacement can take over its predecessor's address. Those are facts about the
// local provider, not about nodes. Each Provider declares them here
// (Provider::Environment) and the control plane reads this value instead of a
// literal or a provider-specific method. A provider whose nodes are other machines
// declares that they see nothing of hpodd's and dial it over the network.
//
// Thread contract: a plain value; not synchronized.

#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::provider {

struct NodeEnvironment {
  // How a node's agent dials hpodd: at most one is set.
  //   agent_socket: the path, inside the node, of hpodd's agent Unix socket
  //     ("/run/hpod/agent.sock"); the provider makes hpodd's socket directory (the
  //     directory of the daemon's agent socket) appear at that path's directory.
  //   agent_url: the https:// URL nodes dial over the network (mutual TLS).
  // Neither: the provider's nodes run no agent.
  std::string agent_socket;
  std::string agent_url;

  // Whether nodes see hpodd's machine's files, as the local provider's namespaces
  // do, except under `private_dirs` (absolute; each node has its own there: /tmp,
  // /run, ...). False: nodes are other machines and see none of hpodd's files, so
  // every file:// lifecycle source is refused at CreateCluster.
  bool sees_hpodd_files = false;
  std::vector<std::string> private_dirs;
  // Nodes that see none of hpodd's files but run an agent: hpodd reads a file://
  // lifecycle source itself and sends the scripts in each node's config
  // (controlplane/lifecycle_bundle.h), so file:// sources are taken. Only with
  // agent_url and !sees_hpodd_files.
  bool ships_file_sources = false;

  // Where hpod's SPANK plugin (spank_hpod.so, auto-resume) is on every node the
  // provider launches; empty: it installed none, and plugstack.conf lists none.
  std::string spank_plugin;

  // Where, inside the node, hpodd's S3 relay socket appears (hpodd creates it in
  // its agent socket's directory under this file name); empty: no relay, agents
  // reach the S3 endpoint themselves. Only with `agent_socket`, and in its
  // directory (the relay rides on the same shared directory).
  std::string s3_relay_socket;

  // GPU instance types get stand-in device files in `gpu_device_dir` (inside the
  // node), so Slurm's GRES accounting works on a machine without GPUs (the local
  // provider). False: nodes have the real devices, in /dev.
  bool gpu_stand_ins = false;
  std::string gpu_device_dir = "/dev";

  // Whether the nodes are hpod's own machines, whose sshd hpod runs: the agent
  // starts sshd on the node's cluster address with the host key hpodd keeps for
  // the node's name, and trusts the cluster's other nodes (host-based). False:
  // the machine has an sshd of its own that hpod leaves alone (a pool host).
  bool cluster_sshd = false;

  // Whether a replacement may take over its predecessor's address (and so its
  // hostname ip-a-b-c-d): the control plane asks for it only then.
  bool replacement_keeps_address = false;

  // Whether the declaration is consistent: at most one way to dial, each path
  // absolute, an https:// URL, private dirs and a relay only where nodes share
  // hpodd's files. kInvalidArgument naming the field otherwise.
  Status Validate() const;

  // The private directory that hides hpodd's `host_path` (absolute, symlinks
  // already resolved) from the nodes: the outermost of `private_dirs` at or above
  // it; "/" when nodes see none of hpodd's files; "" when they see it as hpodd does.
  std::string PrivateDirOf(std::string_view host_path) const;

  bool operator==(const NodeEnvironment&) const = default;
};

}  // namespace hpod::provider
