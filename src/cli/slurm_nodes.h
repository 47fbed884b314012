#pragma once

// `hpod list-cluster-nodes --cluster-name X --with-slurm`: the cluster's nodes
// (ListClusterNodes, every page) joined with Slurm's view of them
// (HpodListSlurmNodes), so one command maps instance id ↔ hostname ↔ Slurm state
// and reason, which HyperPod users otherwise script with sinfo and the console.
//
// --with-slurm is hpod's own flag: it is taken off the command line before the
// model's flags are parsed and never reaches the request.
//
// Join key: the first label of a node's PrivateDnsHostname
// ("ip-10-77-0-11" of "ip-10-77-0-11.us-west-2.compute.internal") is its Slurm
// NodeName, as on HyperPod. Nodes Slurm does not know (the controller, login
// nodes, nodes not yet in slurm.conf) have no Slurm entry; the client cannot tell
// a node's role, so they all show "-".
//
// Output:
//   json   {"ClusterNodeSummaries": [<summary> + "Slurm": {NodeName, State, Reason,
//          SlurmdStartTime} or null], "SlurmAvailable": bool}
//   table  aligned columns InstanceGroupName InstanceId Hostname InstanceStatus
//          SlurmState SlurmReason, with a header line;
//   text   the same columns tab-separated, one line per node, no header (like
//          the AWS CLI's text output, for cut and awk).
//   --query applies to the json form in every format and is then printed by the
//   usual formatters.
// When the service has no Slurm view yet (Available=false: no controller agent
// has reported) a one-line note goes to stderr and the nodes are still printed.
//
// Thread contract: free functions; ListClusterNodesWithSlurm uses the given
// client and streams exclusively while it runs.

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/cli/args.h"
#include "hpod/cli/client.h"
#include "hpod/cli/output.h"

namespace hpod::cli {

inline constexpr std::string_view kWithSlurmFlag = "--with-slurm";
inline constexpr std::string_view kSlurmUnavailableNote =
    "Slurm state is not available yet: the controller's agent has not reported";

// Removes every "--with-slurm" from `words` (the words after the verb); true when
// there was one.
bool TakeWithSlurmFlag(std::vector<std::string>& words);

// kInvalidArgument when --with-slurm is combined with options that would list
// only part of the nodes (--no-paginate, --next-token, --max-results,
// --starting-token, --max-items): the join needs every node. --page-size is
// fine. OK for anything that is not a --with-slurm operation run.
Status CheckWithSlurm(const Invocation& inv);

// The json form above, from ListClusterNodes' merged result and
// HpodListSlurmNodes' response (both as ApiClient returns them).
Json JoinSlurmNodes(const Json& cluster_nodes, const Json& slurm_nodes);

// `joined` (JoinSlurmNodes' result) as printed to stdout in `request.format`,
// `request.query` applied when set.
std::string FormatNodesWithSlurm(const FormatRequest& request, const Json& joined);

// Runs the command: ListClusterNodes with `params` (validated against its input)
// until the last page, `page_size` items per call when set, then
// HpodListSlurmNodes for the same cluster; prints to `out` (and the note to
// `err`). Errors are the ApiClient's, e.g. "An error occurred (ResourceNotFound)
// when calling the ListClusterNodes operation: ...".
Status ListClusterNodesWithSlurm(ApiClient& client, const Json& params,
                                 std::optional<int64_t> page_size, const FormatRequest& request,
                                 std::ostream& out, std::ostream& err);

// The lines `hpod list-cluster-nodes help` adds for --with-slurm.
std::string WithSlurmHelp();

}  // namespace hpod::cli
