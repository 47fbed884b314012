#pragma once

// `hpod describe-job-goodput --cluster-name X --job-id J`: an auto-resume job's
// goodput (HpodDescribeJobGoodput): useful step time over wall time from
// hpod-train's ledger, the steps re-run, and for each node failure during the job
// the seconds of detection, replacement, restart, rendezvous, checkpoint load and
// the first step after it. json prints the response; table and text a summary and
// one row per failure.
//
// Thread contract: free functions on the caller's thread.

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "hpod/base/status.h"
#include "hpod/cli/client.h"
#include "hpod/cli/output.h"

namespace hpod::cli {

struct DescribeJobGoodputOptions {
  std::string cluster_name;
  std::string job_id;
  OutputFormat format = OutputFormat::kJson;
};

std::string FormatJobGoodput(const nlohmann::ordered_json& response, OutputFormat format);

Status DescribeJobGoodput(ApiClient& client, const DescribeJobGoodputOptions& options,
                          std::ostream& out);

}  // namespace hpod::cli
