#pragma once

// A container as pyxis users know it, from the kernel's parts: a mount namespace
// whose root is an overlayfs (the cached image read-only below, the container's
// own writable layer above) with the node's /dev, /sys, /proc, its /etc/hosts and
// /etc/resolv.conf, and the user's bind mounts. No other namespace: the tasks keep
// the node's network, PIDs, hostname and cgroup (Slurm's), as under pyxis.
//
// Why no OCI runtime (crun): Slurm's slurmstepd must exec each task itself, with
// its rank environment, I/O and cgroup; an OCI runtime would start the process
// itself. A task joins the namespace (setns) just before slurmstepd execs it.
//
// Thread contract: EnterContainer changes the calling process's mount namespace
// and root; call it in a single-threaded process (a forked child), as root.

#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/container/mounts.h"

namespace hpod::container {

struct ContainerSpec {
  std::string rootfs;         // the image (overlay's lower layer), read-only
  std::string container_dir;  // holds upper/, work/, merged/ (created here)
  bool writable = true;       // false: the container's / is mounted read-only
  std::vector<BindMount> mounts;
};

// In the calling process: unshare(CLONE_NEWNS), build the container's tree and
// pivot_root into it. kInvalidArgument for a mount source that does not exist,
// naming it; the process is unusable after any failure (exit).
Status EnterContainer(const ContainerSpec& spec);

}  // namespace hpod::container
