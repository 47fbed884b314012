#pragma once

// A local node's own root filesystem (issue 28). hpod-node-init mounts an overlay
// whose lower layer is the host's root filesystem (read-only through the overlay)
// and whose upper layer is on the node's disk, then pivot_roots into it. So apt,
// pip, useradd, /etc and /root changes made on a node stay on that node, three
// nodes' `apt-get` take three different dpkg locks, a replacement (a new disk)
// starts from a clean root as a fresh machine does, and a reboot (the same disk)
// keeps the node's changes as a real disk would.
//
// What it is not: a security boundary. The node's processes are root in the host's
// user namespace and could mount the host's disk; the overlay keeps *accidents*
// (a lifecycle script's `apt-get install`, `rm -rf /opt/x`) inside the node.
//
// The host's other filesystems are carried over: a separate /usr, /var, /etc,
// /opt (the system's, IsSystemMount) gets a layer of the node's own as the root
// does; any other (a separate /home or /srv) is bound as it is, shared and
// writable, as before. /proc, /sys and /dev are the node's as before; /run and /tmp
// are its own (node_init.h).
//
// Thread contract: free functions, run by node-init's single thread (the node's
// PID 1) before it starts the node's program; MountsToCarry is pure.

#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::provider::local {

// The mountpoints, from /proc/self/mountinfo's text, that a node's new root
// carries over with a recursive bind: the outermost mounts other than "/", except
// those under /proc, /sys and /dev (carried whole), /run and /tmp (the node's own)
// and those at or under `node_disk` (the node's own disk and its root overlay).
// Octal escapes (\040 for a space) are decoded. In mountinfo's order.
std::vector<std::string> MountsToCarry(std::string_view mountinfo, const std::string& node_disk);

// Whether a host mount at `path` holds the system (/usr, /var, /etc, /opt, /bin,
// /sbin, /lib*, /boot, /root, or below): the node gets an overlay of its own
// over it rather than the host's, so installs there stay on the node too.
bool IsSystemMount(const std::string& path);

// Prepares the upper layer on a node's first boot (no `upper`/root yet): the
// node's /root starts as a fresh machine's, with /etc/skel's files and none of the
// host root's dot-entries (its shell profile, ~/.local, ~/.ssh, ~/.pyenv: a
// whiteout each), so a node's login shell is the node's, not the host user's.
// The host's other entries of /root stay visible (a checkout of hpod there keeps
// working inside nodes). Later boots leave the layer as the node left it.
Status PrepareRootUpper(const std::string& upper, const std::string& host_home = "/root",
                        const std::string& skel = "/etc/skel");

// Mounts the overlay (lower "/", upper and work dirs on `node_disk`) at
// `node_disk`/root and carries /proc, /sys, /dev and MountsToCarry into it (an
// overlay of its own for each IsSystemMount, under `node_disk`/root-mounts/);
// returns the new root's path. An error leaves nothing mounted that matters (the node's
// mount namespace is private) and the caller falls back to the host's root.
StatusOr<std::string> MountNodeRoot(const std::string& node_disk);

// pivot_root into `root` (a mountpoint) and detaches the old root; the calling
// process's root and working directory become the new "/".
Status EnterNodeRoot(const std::string& root);

}  // namespace hpod::provider::local
