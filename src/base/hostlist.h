#pragma once

// Slurm host lists as in SLURM_JOB_NODELIST: "ip-10-77-0-[11-13,15],ip-10-77-1-2".
// Pure functions, so that the auto-resume supervisor can name the job's nodes to
// the agent without running `scontrol show hostnames` (srun must not depend on a
// subprocess to decide whether to retry), hpod-train finds its rendezvous master
// in a container image that has no Slurm, and hpodd writes slurm.conf for 10,000
// nodes in a few dozen lines.
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

// Slurm refuses a range of more hosts than this ("Too many hosts in range",
// MAX_RANGE in its hostlist.c); CompressHostlist splits longer runs.
inline constexpr long kMaxHostRange = 65536;

// A host name as a host list sees it: text, then a trailing decimal number that a
// bracket range can vary. "ip-10-77-1-11" is {"ip-10-77-1-", 11, 0}; "n007" is
// {"n", 7, 3}: zero-padded, so only three-digit numbers share its brackets.
// "login", "a1b", "42" (no prefix) and a number of more than nine digits have no
// number (number < 0): such a name is always written as it is.
struct HostName {
  std::string_view prefix;  // the whole name when number < 0
  long number = -1;
  int width = 0;  // digits of a zero-padded number ("007": 3); 0 when unpadded
};
HostName SplitHostName(std::string_view host);

// Whether `next` may follow `last` inside one bracket group and expand back to
// itself: same prefix and padding, a larger number.
bool HostCanFollow(const HostName& last, const HostName& next);

// Orders names as people do, numbers by value ("ip-10-77-1-9" before
// "ip-10-77-1-10" before "ip-10-77-2-1"), names equal but for zero-padding by
// their text; a strict weak order in which equal names alone are equivalent.
// Sorting with it gives CompressHostlist its shortest result for names such as
// hpod's.
bool HostNameLess(std::string_view a, std::string_view b);

// Writes `hosts` as a host list that ExpandHostlist and Slurm expand back to
// exactly `hosts`, in this order: each maximal run of consecutive hosts for which
// HostCanFollow holds is one item ("ip-10-77-1-[11-13,15]"), numbers rising by
// one are a range (at most kMaxHostRange long), and an item of one host is the
// name itself ("ip-10-77-1-11", never "ip-10-77-1-[11]"). The order is kept
// because Slurm pairs a NodeName list with its NodeAddr list element by element.
// Hosts must not contain '[', ']' or ','; "" for no hosts.
std::string CompressHostlist(const std::vector<std::string>& hosts);

}  // namespace hpod
