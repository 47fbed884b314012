#pragma once

// `hpod describe-recovery --cluster-name X (--recovery-id rcv-… | --node-id i-…)`:
// one node recovery's timeline (HpodDescribeRecovery; with --node-id, that node's
// latest recovery through HpodListRecoveries, as the failed node or as its
// replacement). json prints the Recovery object; table and text print a summary
// and one row per step with its time, the seconds since the fault was detected
// and the seconds the step took (since the previous one).
//
// Thread contract: free functions on the caller's thread.

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "hpod/base/status.h"
#include "hpod/cli/client.h"
#include "hpod/cli/output.h"

namespace hpod::cli {

struct DescribeRecoveryOptions {
  std::string cluster_name;
  std::string recovery_id;  // one of these two
  std::string node_id;
  OutputFormat format = OutputFormat::kJson;
};

// The Recovery object; kNotFound (one line saying so) when the node has none.
StatusOr<nlohmann::ordered_json> FetchRecovery(ApiClient& client,
                                               const DescribeRecoveryOptions& options);

// The table/text form described above (json: FormatJson of {"Recovery": …}).
std::string FormatRecovery(const nlohmann::ordered_json& recovery, OutputFormat format);

Status DescribeRecovery(ApiClient& client, const DescribeRecoveryOptions& options,
                        std::ostream& out);

}  // namespace hpod::cli
