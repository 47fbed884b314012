#pragma once

// Slurm host lists as in SLURM_JOB_NODELIST: "ip-10-77-0-[11-13,15],ip-10-77-1-2".
// A pure function, so that the auto-resume supervisor can name the job's nodes to
// the agent without running `scontrol show hostnames` (srun must not depend on a
// subprocess to decide whether to retry), and hpod-train finds its rendezvous
// master in a container image that has no Slurm.
//
// Thread contract: stateless; safe from any thread.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod {

// A bound on the expansion, far above any real job, so that "n[0-999999999]" is an
// error and not an allocation of gigabytes inside srun.
inline constexpr std::size_t kMaxHosts = 100000;

// Expands a host list into host names, in order, duplicates kept.
// Grammar (Slurm's): items separated by commas outside brackets; an item is text
// with zero or more bracket groups, each a comma-separated list of numbers or
// ranges "lo-hi"; every group multiplies the item (rack[1-2]-n[1-2] gives four
// names). A range keeps the width of its lower bound ("n[01-10]" gives n01..n10,
// "n[9-10]" gives n9, n10). An empty string is an empty list.
// Errors (InvalidArgument, naming the item): unbalanced or nested brackets, an
// empty group or range, a non-digit in a group, hi < lo, an empty item, more than
// kMaxHosts names.
StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

}  // namespace hpod
